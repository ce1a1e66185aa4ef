package cm_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/goverbs/goverbs/cm"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/verbs"
)

// connectPair connects a client and a server end over rdma_cm with the
// parameters each side passes.
func connectPair(t *testing.T, cliParam, srvParam cm.ConnParam) (cli, srv *end) {
	t.Helper()
	srvCh, cliCh := channel(t), channel(t)
	l, addr := listen(t, srvCh, cm.TCP)
	type result struct {
		e   *end
		err error
	}
	done := make(chan result, 1)
	go func() {
		id, _, err := l.GetRequest(timeout(t))
		if err != nil {
			done <- result{err: err}
			return
		}
		s, err := setupErr(id)
		if err == nil {
			err = id.Accept(timeout(t), srvParam)
		}
		done <- result{s, err}
	}()
	cli = setup(t, dial(t, cliCh, cm.TCP, addr))
	if _, err := cli.id.Connect(timeout(t), cliParam); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("server side: %v", r.err)
	}
	return cli, r.e
}

// Done closes on the peer's disconnect without anyone reading events, Err
// says why, and DisconnectContext returns once the peer answered.
func TestDoneAndDisconnectContext(t *testing.T) {
	cli, srv := connectPair(t, cm.ConnParam{}, cm.ConnParam{})
	select {
	case <-cli.id.Done():
		t.Fatalf("client Done closed on a live connection: %v", cli.id.Err())
	case <-srv.id.Done():
		t.Fatalf("server Done closed on a live connection: %v", srv.id.Err())
	default:
	}
	// The server watches Done and answers the disconnect, as a program
	// would, with no goroutine of its own reading events: its
	// DisconnectContext returns nil at once.
	answered := make(chan error, 1)
	go func() {
		select {
		case <-srv.id.Done():
			answered <- srv.id.DisconnectContext(context.Background())
		case <-time.After(60 * time.Second):
			answered <- errors.New("the server's Done did not close")
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	if err := cli.id.DisconnectContext(ctx); err != nil {
		t.Fatalf("DisconnectContext: %v", err)
	}
	t.Logf("DisconnectContext returned after %v", time.Since(start))
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
	for name, id := range map[string]*cm.ID{"client": cli.id, "server": srv.id} {
		if err := id.Err(); !errors.Is(err, cm.ErrDisconnected) {
			t.Errorf("%s Err %v, want ErrDisconnected", name, err)
		}
	}
	// The events are still there for whoever reads them.
	if ev, err := srv.id.Event(timeout(t)); err != nil || ev.Type != cm.EventDisconnected {
		t.Errorf("server event after Done: %v %v", ev.Type, err)
	}
	// Disconnecting again finds Done closed and returns at once.
	if err := cli.id.DisconnectContext(ctx); err != nil {
		t.Errorf("second DisconnectContext: %v", err)
	}
	if err := cli.id.Close(); err != nil {
		t.Fatal(err)
	}
	if err := cli.id.DisconnectContext(ctx); !errors.Is(err, cm.ErrClosed) {
		t.Errorf("DisconnectContext on a closed ID: %v", err)
	}
	// Err keeps the first reason.
	if err := cli.id.Err(); !errors.Is(err, cm.ErrDisconnected) {
		t.Errorf("Err after Close %v", err)
	}
}

// An ID that never connected: DisconnectContext fails at once, Close
// closes Done with ErrClosed.
func TestDoneUnconnected(t *testing.T) {
	ch := channel(t)
	id, err := ch.CreateID(cm.TCP)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := id.DisconnectContext(ctx); err == nil || ctx.Err() != nil {
		t.Errorf("DisconnectContext of an unconnected ID: %v (ctx %v)", err, ctx.Err())
	}
	done := id.Done()
	if err := id.Close(); err != nil {
		t.Fatal(err)
	}
	<-done
	if err := id.Err(); !errors.Is(err, cm.ErrClosed) {
		t.Errorf("Err after Close %v, want ErrClosed", err)
	}
}

// The connection manager's QPs get DefaultMinRNRTimer (0.64 ms), not the
// kernel CM's 0 (655.36 ms), or what ConnParam.MinRNRTimer asks for; and a
// SEND that finds no receive posted completes soon after the receive is
// posted, not 655 ms later.
func TestMinRNRTimer(t *testing.T) {
	testutil.SkipUnlessCap(t, !iwarp(t), "receiver-not-ready NAKs (iWARP has no RNR: a SEND waits in the TCP stream)")
	cli, srv := connectPair(t, cm.ConnParam{}, cm.ConnParam{MinRNRTimer: 2 * time.Millisecond})
	for _, tc := range []struct {
		name string
		q    *qp.QP
		want uint8
	}{
		{"client (default)", cli.qp, 12},
		{"server (2 ms)", srv.qp, 16}, // 2.56 ms, the next value of the table
	} {
		a, err := tc.q.Query()
		if err != nil {
			t.Fatal(err)
		}
		if a.MinRNRTimer != tc.want {
			t.Errorf("%s: min_rnr_timer %d (%v), want %d (%v)", tc.name, a.MinRNRTimer, qp.RNRTimerDelay(a.MinRNRTimer), tc.want, qp.RNRTimerDelay(tc.want))
		}
	}
	if qp.RNRTimerCode(qp.DefaultMinRNRTimer) != 12 {
		t.Errorf("DefaultMinRNRTimer is code %d", qp.RNRTimerCode(qp.DefaultMinRNRTimer))
	}

	// SEND from the server to the client before the client has a
	// receive posted; post it 100 ms later.
	const late = 100 * time.Millisecond
	start := time.Now()
	if err := srv.qp.PostSend([]verbs.SendWR{{WRID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, InlineData: []byte("early")}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(late)
	if err := cli.qp.PostRecv([]verbs.RecvWR{{WRID: 2, SGList: []verbs.SGE{cli.buf.SGE(0, 64)}}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := srv.cq.Next(ctx); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("SEND completed %v after it was posted, the receive %v after", took, late)
	// At the kernel CM's 655.36 ms, the first RNR retry alone would come
	// after 655 ms.
	if took > 500*time.Millisecond {
		t.Errorf("the SEND took %v to complete: the RNR timer is not the default", took)
	}
	if wc, err := cli.cq.Next(ctx); err != nil || string(cli.buf.Bytes()[:wc.ByteLen]) != "early" {
		t.Fatalf("receive %+v %v", wc, err)
	}
}
