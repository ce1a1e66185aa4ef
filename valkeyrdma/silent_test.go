package valkeyrdma

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/verbs"
)

// A peer that stops answering without a word (no DREQ, as when its host
// dies) is found by the keepalive: the device retries the Keepalive's
// SEND, gives up, and a blocked Read fails with ETIMEDOUT instead of
// waiting for ever. The silence is made by moving the peer's QP to the
// error state behind its back (rxe then drops what arrives for it), as
// rsocket's test of the same does.
func TestKeepaliveFindsSilentPeer(t *testing.T) {
	dev := testutil.Device(t)
	testutil.SkipUnlessCap(t, dev.NodeType.Transport() != verbs.TransportIWARP, "a peer made silent by its QP's error state (siw closes its TCP stream)")
	addr := testutil.Addr(t)
	for _, dialerWatches := range []bool{true, false} {
		name := "acceptor watches"
		if dialerWatches {
			name = "dialer watches"
		}
		t.Run(name, func(t *testing.T) {
			ka := Keepalive(100 * time.Millisecond)
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
