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
// everything. On iWARP the messages go as C sends them there (a WRITE
// and a SEND of the message word: msgSendWRs); what only the IB variant
// can get wrong (a WRITE WITH IMM whose length differs from its
// immediate's) is left out there, and what only iWARP's can (a SEND
// that is not a message word, an SGL update into an entry still in
// use) is in.
func TestHostilePeer(t *testing.T) {
	dev := testutil.Device(t)
	addr := testutil.Addr(t)
	iwarp := dev.NodeType.Transport() == verbs.TransportIWARP

	imm := func(m uint32) verbs.SendWR {
		return verbs.SendWR{Opcode: verbs.WRRDMAWriteWithImm, Imm: m, WRID: 1}
	}
	for _, tc := range []struct {
		name string
		post func(evil, victim *Conn) []verbs.SendWR
		want string
		only int // 0: both variants; 1: IB/RoCE only; 2: iWARP only
	}{
		{"reserved op", func(_, _ *Conn) []verbs.SendWR { return []verbs.SendWR{imm(5 << 29)} }, "reserved operation 5", 0},
		{"length mismatch", func(_, _ *Conn) []verbs.SendWR { return []verbs.SendWR{imm(msg(opData, 5000))} }, "carried 0", 1},
		{"unknown control", func(_, _ *Conn) []verbs.SendWR { return []verbs.SendWR{imm(msg(opCtrl, 77))} }, "unknown control", 0},
		{"SEND", func(_, _ *Conn) []verbs.SendWR {
			return []verbs.SendWR{{Opcode: verbs.WRSend, WRID: 1}}
		}, "without immediate", 1},
		{"empty SEND", func(_, _ *Conn) []verbs.SendWR {
			return []verbs.SendWR{{Opcode: verbs.WRSend, WRID: 1}}
		}, "a receive of 0 bytes", 2},
		{"SGL update into an entry in use", func(evil, _ *Conn) []verbs.SendWR {
			// A whole entry with a length into the victim's entry
			// the next update fills, whose half it has not filled.
			wr := imm(msg(opSGL, 100))
			wr.RemoteAddr, wr.RKey = evil.s.remoteSGL.Addr+sgeSize*uint64(evil.s.remoteIdx), evil.s.remoteSGL.Key
			wr.InlineData = make([]byte, sgeSize)
			wr.InlineData[12] = 100
			return []verbs.SendWR{wr}
		}, "still has", 2},
		{"bad SGL update", func(evil, _ *Conn) []verbs.SendWR {
			// 8 bytes into the victim's target SGL entry 1.
			wr := imm(msg(opSGL, 100))
			wr.RemoteAddr, wr.RKey = evil.s.remoteSGL.Addr+sgeSize, evil.s.remoteSGL.Key
			wr.InlineData = make([]byte, 8)
			return []verbs.SendWR{wr}
		}, "SGL update of 8 bytes", 1},
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
		}, "credits exceeded", 0},
	} {
		if tc.only == 1 && iwarp || tc.only == 2 && !iwarp {
			continue
		}
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
			if iwarp {
				var msgs []verbs.SendWR
				for _, wr := range wrs {
					var pair [2]verbs.SendWR
					pair[0] = wr
					var word [msgSize]byte
					n := msgSendWRs(&pair, &word)
					if n == 2 || pair[0].Opcode == verbs.WRSend && len(pair[0].InlineData) > 0 {
						// The word is copied when posted; keep one
						// per message.
						w := append([]byte(nil), word[:]...)
						pair[n-1].InlineData = w
					}
					msgs = append(msgs, pair[:n]...)
				}
				wrs = msgs
			}
			for i := 0; i < len(wrs); i += 16 { // within the send queue
				if err := evil.qp.PostSend(wrs[i:min(i+16, len(wrs))]); err != nil {
					evil.mu.Unlock()
					t.Fatalf("post: %v", err)
				}
				time.Sleep(10 * time.Millisecond)
				if iwarp {
					// iWARP has no RNR retry: a message that finds
					// no receive posted ends the connection (siw
					// terminates it), so the victim processes its
					// completions, re-posting receives, while the
					// messages come, as a Write of its would. And
					// two completions a message would overflow the
					// evil side's CQ (sq+rq entries).
					victim.mu.Lock()
					victim.progress()
					victim.mu.Unlock()
					for {
						n, err := evil.cq.Poll(evil.wc[:])
						if err != nil || n == 0 {
							break
						}
					}
				}
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
