package rpma

import (
	"context"
	"errors"
	"testing"

	"github.com/goverbs/goverbs/cm"
)

// The context a connection's wait runs with ends when the connection
// does, is kept for the next wait with the same caller's context (no
// allocation), and the wait's error then says why the connection ended.
// Host-only: a fake end stands for the connection's ID.
func TestWaitContextEndsWithConnection(t *testing.T) {
	end := make(chan struct{})
	why := &cm.EventError{Event: cm.EventDisconnected}
	l := watchLife(end, func() error { return why })
	var w waitCtx
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wctx := w.with(ctx, l)
	if n := testing.AllocsPerRun(100, func() {
		if w.with(ctx, l) != wctx {
			t.Fatal("a new context for the same caller's context")
		}
	}); n != 0 {
		t.Errorf("a wait with the same context: %v allocations", n)
	}
	if l.over() || wctx.Err() != nil {
		t.Fatal("over before the end")
	}
	// Another caller's context gets its own, and the old one is let go.
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	wctx2 := w.with(ctx2, l)
	if wctx2 == wctx || wctx.Err() == nil {
		t.Fatal("the previous wait's context was kept")
	}
	// The caller's end ends the wait's context, not the connection.
	cancel2()
	<-wctx2.Done()
	if l.over() {
		t.Fatal("the caller's context ended the connection")
	}
	wctx3 := w.with(ctx, l)
	close(end)
	<-wctx3.Done() // the connection's end ends the wait
	if !l.over() {
		t.Fatal("not over after the end")
	}
	err := l.err()
	if !errors.Is(err, ErrNoCompletion) || !errors.Is(err, cm.ErrDisconnected) || Code(err) != ErrNoCompletion.Code() {
		t.Fatalf("wait error %v: want ErrNoCompletion wrapping the disconnect", err)
	}
	// A CQ of no connection (an SRQ's) waits with the caller's context.
	var none *life
	if w.with(ctx, none) != ctx || none.over() {
		t.Fatal("a CQ without a connection")
	}
}
