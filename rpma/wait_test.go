package rpma_test

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/goverbs/goverbs/cm"
	"github.com/goverbs/goverbs/rpma"
	"github.com/goverbs/goverbs/verbs"
)

// waiter is one way to wait for a completion on a connection: through the
// shared channel (Conn.Wait) or on one CQ (CQ.Wait).
type waiter struct {
	name string
	cfg  func() *rpma.ConnCfg
	wait func(ctx context.Context, c *rpma.Conn) (*rpma.CQ, error)
}

var waiters = []waiter{
	{"shared", func() *rpma.ConnCfg {
		cfg := rpma.NewConnCfg()
		cfg.RCQSize, cfg.SharedChannel = 10, true
		return cfg
	}, func(ctx context.Context, c *rpma.Conn) (*rpma.CQ, error) {
		q, _, err := c.Wait(ctx)
		return q, err
	}},
	{"private-rcq", func() *rpma.ConnCfg {
		cfg := rpma.NewConnCfg()
		cfg.RCQSize = 10
		return cfg
	}, func(ctx context.Context, c *rpma.Conn) (*rpma.CQ, error) {
		return c.RCQ(), c.RCQ().Wait(ctx)
	}},
	{"private-cq", rpma.NewConnCfg, func(ctx context.Context, c *rpma.Conn) (*rpma.CQ, error) {
		return c.CQ(), c.CQ().Wait(ctx)
	}},
}

// isEnd reports whether err is a wait's error for a connection the peer
// disconnected.
func isEnd(err error) bool {
	return errors.Is(err, rpma.ErrNoCompletion) && errors.Is(err, cm.ErrDisconnected)
}

// A peer's disconnect ends a wait blocked on the connection, whichever
// way it waits. This is the Go server of 12scch against librpma's C
// client on 6.12: the client posts its last message unsignaled and
// disconnects at once, which there flushes the message before it leaves,
// and the server waited for it for ever. Here the client disconnects
// without sending. The blocked wait's context ends only once the server
// has seen the disconnect, and the connection's end takes precedence, so
// the wait must report the end: before waits watched the connection, it
// reported the context's end instead.
func TestWaitEndsWhenPeerDisconnects(t *testing.T) {
	p := newPeer(t)
	for _, w := range waiters {
		t.Run(w.name, func(t *testing.T) {
			// No receive is posted: on iWARP the peer's disconnect
			// flushes them, which would end the wait with a completion.
			c := connect(t, p, w.cfg(), w.cfg(), nil, nil, nil, nil)
			ctx, cancel := context.WithCancel(tctx(t))
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := w.wait(ctx, c.srv)
				done <- err
			}()
			if err := c.cli.Disconnect(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-rpma.Ended(c.srv):
			case <-tctx(t).Done():
				t.Fatal("the server never saw the disconnect")
			}
			cancel()
			if err := <-done; !isEnd(err) {
				t.Fatalf("blocked wait: %v, want ErrNoCompletion for the disconnect", err)
			}
			// A later wait does not block (tctx only bounds a failure).
			if _, err := w.wait(tctx(t), c.srv); !isEnd(err) {
				t.Fatalf("wait after the disconnect: %v, want ErrNoCompletion for the disconnect", err)
			}
		})
	}
}

// What the connection delivered before its end is still handed out: a
// wait after the peer's disconnect returns the CQ that holds the peer's
// last message, and only the wait after that reports the end. The
// client's send is signaled and complete before it disconnects, so the
// message is in the server's CQ (rxe completes a receive before it
// acknowledges it).
func TestWaitAfterDisconnectDrainsFirst(t *testing.T) {
	p := newPeer(t)
	srvBuf := alloc(t, p, 4096, rpma.UsageRecv)
	cliBuf := alloc(t, p, 4096, rpma.UsageSend)
	for _, w := range waiters {
		t.Run(w.name, func(t *testing.T) {
			c := connect(t, p, w.cfg(), w.cfg(), nil, nil, func(r *rpma.ConnReq) {
				if err := r.Recv(srvBuf, 0, 8, 2); err != nil {
					t.Error(err)
				}
			}, nil)
			binary.LittleEndian.PutUint64(cliBuf.Bytes(), 0xD0DE)
			if err := c.cli.Send(cliBuf, 0, 8, rpma.Always, 3); err != nil {
				t.Fatal(err)
			}
			var wc [1]verbs.WorkCompletion
			for {
				var q *rpma.CQ
				var err error
				if w.name == "shared" {
					q, _, err = c.cli.Wait(tctx(t))
				} else {
					q, err = c.cli.CQ(), c.cli.CQ().Wait(tctx(t))
				}
				if err != nil {
					t.Fatal(err)
				}
				if n, _ := q.GetWC(wc[:]); n == 1 {
					break
				}
			}
			if wc[0].Status != verbs.WCSuccess || wc[0].WRID != 3 {
				t.Fatalf("client's send: %+v", wc[0])
			}
			if err := c.cli.Disconnect(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-rpma.Ended(c.srv):
			case <-tctx(t).Done():
				t.Fatal("the server never saw the disconnect")
			}
			q, err := w.wait(tctx(t), c.srv)
			if err != nil {
				t.Fatalf("first wait after the disconnect: %v, want the CQ with the message", err)
			}
			if n, err := q.GetWC(wc[:]); n != 1 || err != nil || wc[0].WRID != 2 || wc[0].Status != verbs.WCSuccess ||
				binary.LittleEndian.Uint64(srvBuf.Bytes()) != 0xD0DE {
				t.Fatalf("message: %d %v %+v", n, err, wc[0])
			}
			if _, err := w.wait(tctx(t), c.srv); !isEnd(err) {
				t.Fatalf("second wait after the disconnect: %v, want ErrNoCompletion for the disconnect", err)
			}
		})
	}
}
