package rsocket

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/verbs"
)

// A hostile peer on the wire: a connection whose QP posts what rsocket
// never sends at another Conn. The victim's Read and Write must fail with
// ErrProtocol — no panic, no hang — and Close must still free
// everything.
func TestHostilePeer(t *testing.T) {
	dev := testutil.Device(t)
	testutil.SkipUnlessCap(t, dev.NodeType.Transport() != verbs.TransportIWARP, "RDMA WRITE WITH IMMEDIATE (iWARP transport)")
	addr := testutil.Addr(t)

	imm := func(m uint32) verbs.SendWR {
		return verbs.SendWR{Opcode: verbs.WRRDMAWriteWithImm, Imm: m, WRID: 1}
	}
	for _, tc := range []struct {
		name string
		post func(evil, victim *Conn) []verbs.SendWR
		want string
	}{
		{"reserved op", func(_, _ *Conn) []verbs.SendWR { return []verbs.SendWR{imm(5 << 29)} }, "reserved operation 5"},
		{"length mismatch", func(_, _ *Conn) []verbs.SendWR { return []verbs.SendWR{imm(msg(opData, 5000))} }, "carried 0"},
		{"unknown control", func(_, _ *Conn) []verbs.SendWR { return []verbs.SendWR{imm(msg(opCtrl, 77))} }, "unknown control"},
		{"SEND", func(_, _ *Conn) []verbs.SendWR {
			return []verbs.SendWR{{Opcode: verbs.WRSend, WRID: 1}}
		}, "without immediate"},
		{"bad SGL update", func(evil, _ *Conn) []verbs.SendWR {
			// 8 bytes into the victim's target SGL entry 1.
			wr := imm(msg(opSGL, 100))
			wr.RemoteAddr, wr.RKey = evil.s.remoteSGL.Addr+sgeSize, evil.s.remoteSGL.Key
			wr.InlineData = make([]byte, 8)
			return []verbs.SendWR{wr}
		}, "SGL update of 8 bytes"},
		{"credits exceeded", func(evil, victim *Conn) []verbs.SendWR {
			// One-byte writes into the published buffer, more
			// than the credits, while the victim does not read.
			var wrs []verbs.SendWR
			t := evil.s.target[0]
			for i := range victim.s.rqSize + 8 {
				wr := imm(msg(opData, 1))
				wr.RemoteAddr, wr.RKey = t.Addr+uint64(i), t.Key
				wr.InlineData = []byte{byte(i)}
				wrs = append(wrs, wr)
			}
			return wrs
		}, "credits exceeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := Listen("tcp", net.JoinHostPort(addr, "0"))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			evil, err := Dial(ctx, "tcp", l.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer evil.Close()
			victim, err := l.AcceptContext(ctx)
			if err != nil {
				t.Fatal(err)
			}
			evil.mu.Lock()
			wrs := tc.post(evil, victim)
			for i := 0; i < len(wrs); i += 16 { // within the send queue
				if err := evil.qp.PostSend(wrs[i:min(i+16, len(wrs))]); err != nil {
					evil.mu.Unlock()
					t.Fatalf("post: %v", err)
				}
				time.Sleep(10 * time.Millisecond)
			}
			evil.mu.Unlock()
			// The victim's application is busy elsewhere (as in a
			// Write): completions are processed, nothing is read.
			for range 100 {
				victim.mu.Lock()
				victim.progress()
				failed := victim.s.err != nil
				victim.mu.Unlock()
				if failed {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			victim.SetDeadline(time.Now().Add(30 * time.Second))
			_, err = io.ReadAll(victim)
			if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("victim's read: %v, want ErrProtocol saying %q", err, tc.want)
			}
			if _, err := victim.Write([]byte("x")); !errors.Is(err, ErrProtocol) {
				t.Errorf("victim's write: %v, want ErrProtocol", err)
			}
			if err := victim.Close(); err != nil {
				t.Errorf("victim's close: %v", err)
			}
		})
	}
}
