package perftest

import (
	"context"
	"testing"
	"time"

	"github.com/goverbs/goverbs/cm"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/verbs"
)

// The server's last message whose acknowledgement never comes ends the
// exchange once the client has disconnected: Finish returns nil instead
// of waiting for rxe's endless retries (cmMessenger.sendMsg). The client
// here sends its half of the last handshake, then moves its QP to the
// error state (its responder drops the server's SEND and acknowledges
// nothing, as when the acknowledgement lost the race with the teardown)
// and disconnects; the server runs Finish after that. A message that is
// not the last one still waits: HandShake returns only when its context
// ends.
func TestFinishCMPeerGone(t *testing.T) {
	vctx := testutil.Open(t)
	testutil.SkipUnlessCap(t, !testutil.IWARP(vctx),
		"acknowledged SENDs (InfiniBand or RoCE transport; siw completes a SEND once TCP has taken it)")
	addr := testutil.Addr(t)
	for _, last := range []bool{true, false} {
		name := map[bool]string{true: "finish", false: "handshake"}[last]
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			srv, cli := cmConnPair(t, ctx, vctx, addr)
			cmsg := cli.msgs.(*cmMessenger)
			if err := cmsg.sendMsg(ctx, MarshalDestCM(Dest{QPN: 7}), false); err != nil {
				t.Fatalf("client's last message: %v", err)
			}
			if err := cmsg.ep.QP().ToError(); err != nil {
				t.Fatalf("client QP to error: %v", err)
			}
			if err := cmsg.id.Disconnect(); err != nil {
				t.Fatalf("client disconnect: %v", err)
			}
			sm := srv.msgs.(*cmMessenger)
			select {
			case <-sm.id.Done():
			case <-ctx.Done():
				t.Fatalf("the server never saw the client's disconnect: %v", ctx.Err())
			}
			if last {
				if err := srv.Finish(ctx, Dest{QPN: 8}, false); err != nil {
					t.Fatalf("server's Finish after the client left = %v, want nil", err)
				}
				// The SEND is still unacknowledged: the test made the
				// case it means to.
				if n, err := sm.ep.SendCQ().Poll(sm.wc[:]); err != nil || n != 0 {
					t.Errorf("server's send CQ after Finish: %d completions (%v), want 0: the SEND was acknowledged", n, err)
				}
				return
			}
			short, stop := context.WithTimeout(ctx, 3*time.Second)
			defer stop()
			if _, err := srv.HandShake(short, Dest{QPN: 8}, false); err == nil || short.Err() == nil {
				t.Fatalf("server's HandShake after the client left = %v (context %v), want the context's end", err, short.Err())
			}
		})
	}
}

// The client's end, once it has the exchange's last message, keeps its
// QP until the server disconnects (cmMessenger.close), so its responder
// still acknowledges the server's last SEND: the server's Finish sees
// that SEND complete, and the client's Close returns only after the
// server's Close (or lingerMax, 5 s, far beyond the 300 ms looked at
// here).
func TestFinishCMClientLingers(t *testing.T) {
	vctx := testutil.Open(t)
	addr := testutil.Addr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, cli := cmConnPair(t, ctx, vctx, addr)
	srvErr := make(chan error, 1)
	go func() { srvErr <- srv.Finish(ctx, Dest{QPN: 8}, false) }()
	if err := cli.Finish(ctx, Dest{QPN: 7}, false); err != nil {
		t.Fatalf("client's Finish: %v", err)
	}
	if err := <-srvErr; err != nil {
		t.Fatalf("server's Finish: %v", err)
	}
	closed := make(chan error, 1)
	go func() { closed <- cli.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("the client's Close returned (%v) while the server was still connected", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := srv.Close(); err != nil {
		t.Errorf("server's Close: %v", err)
	}
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("client's Close: %v", err)
		}
	case <-ctx.Done():
		t.Fatalf("the client's Close did not return after the server's: %v", ctx.Err())
	}
}

// cmConnPair connects a server and a client of the rdma_cm exchange on
// vctx's device, each on a channel of its own; both close when the test
// ends.
func cmConnPair(t *testing.T, ctx context.Context, vctx *verbs.Context, addr string) (srv, cli *Conn) {
	t.Helper()
	channel := func() *cm.Channel {
		ch, err := cm.NewChannel()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ch.Close() })
		if err := ch.AttachContext(vctx); err != nil {
			t.Fatal(err)
		}
		return ch
	}
	sch, cch := channel(), channel()
	port := testutil.Port()
	l, err := ListenCM(sch, port)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	type accepted struct {
		c   *Conn
		err error
	}
	acc := make(chan accepted, 1)
	go func() {
		c, err := AcceptCM(ctx, l)
		acc <- accepted{c, err}
	}()
	cli, err = DialCM(ctx, cch, addr, port)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	a := <-acc
	if a.err != nil {
		t.Fatal(a.err)
	}
	t.Cleanup(func() { a.c.Close() })
	return a.c, cli
}
