package perftest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
)

// struct pingpong_dest as rdma_write_keys sends it from x86-64: big-endian
// fields, 4 bytes of padding before vaddr, the raw GID.
func TestDestCMWireFormat(t *testing.T) {
	d := Dest{LID: 0x1234, OutReads: 0x10, QPN: 0x11, PSN: 0xabcdef, RKey: 0x1234abcd, VAddr: 0x7f0012345000, GID: testGID, SRQN: 9}
	want := []byte{
		0, 0, 0x12, 0x34, 0, 0, 0, 0x10, 0, 0, 0, 0x11, 0, 0xab, 0xcd, 0xef, 0x12, 0x34, 0xab, 0xcd, 0, 0, 0, 0,
		0, 0, 0x7f, 0, 0x12, 0x34, 0x50, 0,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 169, 254, 77, 1,
		0, 0, 0, 9, 0, 0, 0, 0,
	}
	msg := MarshalDestCM(d)
	if !bytes.Equal(msg, want) {
		t.Fatalf("MarshalDestCM = % x\nwant            % x", msg, want)
	}
	if got, err := ParseDestCM(msg); err != nil || got != d {
		t.Fatalf("ParseDestCM = %+v, %v; want %+v", got, err, d)
	}
	for _, n := range []int{0, DestSize, DestCMSize - 1, DestCMSize + 1} {
		if _, err := ParseDestCM(make([]byte, n)); !errors.Is(err, ErrFormat) {
			t.Errorf("ParseDestCM(%d bytes) = %v, want ErrFormat", n, err)
		}
	}
}

// pipeMessenger is one end of an in-memory message pipe: what the rdma_cm
// exchange's QPs carry, one message per send, its size kept.
type pipeMessenger struct {
	out, in chan []byte
	sent    *[][]byte
	mu      *sync.Mutex
}

func (m pipeMessenger) sendMsg(ctx context.Context, b []byte, last bool) error {
	if len(b) > DestCMSize {
		return fmt.Errorf("a %d-byte message overflows the peer's receive", len(b))
	}
	m.mu.Lock()
	*m.sent = append(*m.sent, bytes.Clone(b))
	m.mu.Unlock()
	select {
	case m.out <- bytes.Clone(b):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (m pipeMessenger) recvMsg(ctx context.Context, b []byte, last bool) error {
	select {
	case got := <-m.in:
		if len(got) != len(b) {
			return fmt.Errorf("%w: got %d bytes, want %d", ErrFormat, len(got), len(b))
		}
		copy(b, got)
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (m pipeMessenger) close() error { return nil }

// The whole exchange over messages (perftest's -R): the same steps and
// sizes as over TCP, the handshakes as binary struct pingpong_dest, and no
// "done" at the end.
func TestExchangeCM(t *testing.T) {
	a, b := make(chan []byte, 1), make(chan []byte, 1)
	var mu sync.Mutex
	var sent [][]byte
	client := &Conn{msgs: pipeMessenger{out: a, in: b, sent: &sent, mu: &mu}, client: true}
	server := &Conn{msgs: pipeMessenger{out: b, in: a, sent: new([][]byte), mu: new(sync.Mutex)}}
	ctx := context.Background()
	cd := Dest{QPN: 1, PSN: 2, RKey: 3, VAddr: 4, GID: testGID, OutReads: 1}
	sd := Dest{QPN: 5, PSN: 6, RKey: 7, VAddr: 8, OutReads: 1}
	rep := BWReport{Size: 65536, Iters: 20, BWPeak: 5.03, BWAvg: 4.5, MsgRate: 0.00008}
	errc := make(chan error, 1)
	var gotRep BWReport
	var gotDest Dest
	go func() {
		errc <- func() error {
			if err := server.Versions(ctx); err != nil {
				return err
			}
			if _, _, err := server.SysData(ctx, 4096, 64); err != nil {
				return err
			}
			if _, err := server.MTU(ctx, 5); err != nil {
				return err
			}
			var err error
			if gotDest, err = server.HandShake(ctx, sd, false); err != nil {
				return err
			}
			if gotRep, err = server.ExchangeBWReports(ctx, BWReport{}); err != nil {
				return err
			}
			return server.Finish(ctx, sd, false)
		}()
	}()
	if !client.RDMACM() {
		t.Fatal("RDMACM() false for a messenger Conn")
	}
	clientExchange(t, ctx, client, cd, sd, rep, false)
	if err := client.Finish(ctx, cd, false); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if gotDest != cd || gotRep != rep {
		t.Errorf("server got dest %+v report %+v", gotDest, gotRep)
	}
	// The client's messages: version 16, cycle buffer 4, cache line 4,
	// MTU 2, address 56, report 5 × 8, last address 56 — and nothing
	// after it.
	var sizes []int
	for _, m := range sent {
		sizes = append(sizes, len(m))
	}
	if want := []int{16, 4, 4, 2, 56, 8, 8, 8, 8, 8, 56}; fmt.Sprint(sizes) != fmt.Sprint(want) {
		t.Errorf("client message sizes %v, want %v", sizes, want)
	}
}

// FuzzParseDestCM: any message parses or is ErrFormat; what parses
// formats back to the same bytes but the unread gid_index and padding.
func FuzzParseDestCM(f *testing.F) {
	f.Add(MarshalDestCM(Dest{QPN: 0x11, VAddr: 1 << 40, GID: testGID}))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, msg []byte) {
		d, err := ParseDestCM(msg)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v is not ErrFormat", err)
			}
			return
		}
		if d2, err := ParseDestCM(MarshalDestCM(d)); err != nil || d2 != d {
			t.Fatalf("round trip: %+v -> %+v, %v", d, d2, err)
		}
	})
}
