package rsocket

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/verbs"
)

// A peer that stops answering without a word — no in-band disconnect, no
// DREQ, as when its host dies — is found by the keepalive: the device
// retries the keepalive's RDMA WRITE, gives up, and the blocked Read fails
// (ETIMEDOUT) instead of waiting for ever. The silence is made by moving
// the peer's QP to the error state behind its back (rxe then drops what
// arrives for it).
func TestKeepaliveFindsSilentPeer(t *testing.T) {
	dev := testutil.Device(t)
	// The silence is made the rxe way; siw drops a QP's TCP stream
	// when it goes to the error state (siw_qp_modify, read in the
	// source, not run here), so the peer would not be silent there.
	testutil.SkipUnlessCap(t, dev.NodeType.Transport() != verbs.TransportIWARP, "a peer made silent by its QP's error state (siw closes its TCP stream)")
	addr := testutil.Addr(t)
	for _, dialerWatches := range []bool{true, false} {
		name := "acceptor watches"
		if dialerWatches {
			name = "dialer watches"
		}
		t.Run(name, func(t *testing.T) {
			ka := KeepAlive(100 * time.Millisecond)
			l, err := Listen("tcp", net.JoinHostPort(addr, "0"), ka)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			d, err := Dial(ctx, "tcp", l.Addr().String(), ka)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			a, err := l.AcceptContext(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			watcher, silent := a, d
			if dialerWatches {
				watcher, silent = d, a
			}
			if _, err := silent.Write([]byte("hi")); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 2)
			if _, err := watcher.Read(buf); err != nil {
				t.Fatal(err)
			}
			attr, err := watcher.qp.Query()
			if err != nil {
				t.Fatal(err)
			}
			if attr.RetryCnt != transportRetries {
				t.Errorf("the watcher's QP has retry count %d, want %d", attr.RetryCnt, transportRetries)
			}
			silent.mu.Lock()
			err = silent.qp.ToError()
			silent.mu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			errc := make(chan error, 1)
			go func() {
				_, err := watcher.Read(buf)
				errc <- err
			}()
			select {
			case err := <-errc:
				if !errors.Is(err, syscall.ETIMEDOUT) {
					t.Fatalf("read from a silent peer: %v, want ETIMEDOUT (retries exceeded)", err)
				}
				t.Logf("the keepalive found the silent peer after %v (ACK timeout %d, %d retries): %v",
					time.Since(start).Round(time.Millisecond), attr.Timeout, attr.RetryCnt, err)
			case <-time.After(90 * time.Second):
				t.Fatal("Read still blocked 90 s after the peer went silent")
			}
		})
	}
}

// A connection uses the variant of the protocol the device's transport
// calls for (rs_create_ep: RS_OPT_MSG_SEND when the device reports
// iWARP), both ends of it, and carries data both ways in it.
func TestTransportVariant(t *testing.T) {
	dev := testutil.Device(t)
	addr := testutil.Addr(t)
	l, err := Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	acc := make(chan *Conn, 1)
	go func() {
		c, err := l.AcceptContext(ctx)
		if err != nil {
			t.Error(err)
		}
		acc <- c
	}()
	d, err := Dial(ctx, "tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	a := <-acc
	if a == nil {
		return
	}
	defer a.Close()
	iwarp := dev.NodeType.Transport() == verbs.TransportIWARP
	for _, c := range []*Conn{d, a} {
		if c.s.msgSend != iwarp || c.iwarp != iwarp {
			t.Errorf("%s (transport %v): RS_OPT_MSG_SEND %v, want %v", dev.Name, dev.NodeType.Transport(), c.s.msgSend, iwarp)
		}
	}
	msg := make([]byte, 100<<10)
	for i := range msg {
		msg[i] = byte(i * 7)
	}
	for _, dir := range [][2]*Conn{{d, a}, {a, d}} {
		errc := make(chan error, 1)
		go func() { _, err := dir[0].Write(msg); errc <- err }()
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(dir[1], got); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, msg) {
			t.Fatal("data differs")
		}
	}
	t.Logf("%s: dialer got %v; acceptor got %v", dev.Name, Stats(d), Stats(a))
}
