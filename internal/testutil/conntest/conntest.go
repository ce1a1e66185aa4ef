// Package conntest is test support for goverbs' two stream transports
// over RDMA connections, rsocket and valkeyrdma: connected pairs of
// their Conns closed when the test ends, a guard that turns a hang into
// a failure, and the checks both transports share, such as the
// keepalive's finding a peer that went silent.
package conntest

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/verbs"
)

// Acceptor is a transport's Listener.
type Acceptor[C net.Conn] interface {
	net.Listener
	AcceptContext(ctx context.Context) (C, error)
}

// Dialer dials address ("host:port") within ctx.
type Dialer[C net.Conn] func(ctx context.Context, address string) (C, error)

// Timeout returns a context that ends after d, or when the test ends.
func Timeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Listening returns a function that takes a Listen's results: it fails
// the test if the error is not nil, and otherwise closes the Listener
// when the test ends, as in Listening[*rsocket.Listener](t)(rsocket.Listen(...)).
func Listening[L io.Closer](t testing.TB) func(L, error) L {
	return func(l L, err error) L {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
}

// Pipe connects two Conns through l, c1 dialed with dial and c2 the
// accepted one, both closed when the test ends.
func Pipe[C net.Conn](t testing.TB, l Acceptor[C], dial Dialer[C]) (c1, c2 C) {
	t.Helper()
	ctx := Timeout(t, time.Minute)
	c1, err := dial(ctx, l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c1.Close() })
	c2, err = l.AcceptContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c2.Close() })
	return c1, c2
}

// Guard fails the test and closes cs if it runs longer than d: a hang
// becomes a failure with the connections torn down. report, if not nil,
// is logged first (what state the connections are in).
func Guard(t testing.TB, d time.Duration, report func() string, cs ...net.Conn) {
	tm := time.AfterFunc(d, func() {
		t.Errorf("test still running after %v: closing the connections", d)
		if report != nil {
			t.Log(report())
		}
		for _, c := range cs {
			c.Close()
		}
	})
	t.Cleanup(func() { tm.Stop() })
}

// SilentPeer is what KeepaliveFindsSilentPeer needs of a transport.
type SilentPeer[C net.Conn] struct {
	// Pipe connects two Conns with a keepalive every ka, the dialer
	// and the acceptor, on the test address addr; they are closed
	// when the test ends.
	Pipe func(t *testing.T, addr string, ka time.Duration) (dialer, acceptor C)
	// QP returns c's queue pair and the lock c holds while it uses it.
	QP func(c C) (*qp.QP, *sync.Mutex)
	// Retries is the RC retry count the transport asks for.
	Retries int
}

// KeepaliveFindsSilentPeer checks that a peer that stops answering
// without a word (no in-band disconnect, no DREQ, as when its host dies)
// is found by the keepalive: the device retries the keepalive, gives up,
// and a blocked Read fails with ETIMEDOUT instead of waiting for ever,
// whichever end watches. The silence is made by moving the peer's QP to
// the error state behind its back (rxe then drops what arrives for it).
func KeepaliveFindsSilentPeer[C net.Conn](t *testing.T, p SilentPeer[C]) {
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
			d, a := p.Pipe(t, addr, 100*time.Millisecond)
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
			wq, _ := p.QP(watcher)
			attr, err := wq.Query()
			if err != nil {
				t.Fatal(err)
			}
			if int(attr.RetryCnt) != p.Retries {
				t.Errorf("the watcher's QP has retry count %d, want %d", attr.RetryCnt, p.Retries)
			}
			sq, mu := p.QP(silent)
			mu.Lock()
			err = sq.ToError()
			mu.Unlock()
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
