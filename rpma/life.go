package rpma

import (
	"context"
	"fmt"
	"sync"

	"github.com/goverbs/goverbs/cm"
)

// life ends with the connection: when its ID gets the event that ends it
// (the peer's disconnect, the answer to our own, device removal: see
// cm.ID.Done) or is closed. The completion waits of the connection end
// with it, so that a wait for a message the peer will never send does not
// outlast the connection.
type life struct {
	done <-chan struct{} // closed when the connection ends (cm.ID.Done)
	why  func() error    // why it ended (cm.ID.Err)
	ctx  context.Context // done once done is closed
}

// newLife watches id with one goroutine, which returns when the
// connection ends or the ID is closed.
func newLife(id *cm.ID) *life { return watchLife(id.Done(), id.Err) }

// watchLife is newLife for any end signal.
func watchLife(done <-chan struct{}, why func() error) *life {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-done
		cancel()
	}()
	return &life{done: done, why: why, ctx: ctx}
}

// over reports whether the connection has ended. It asks the ID, not
// ctx, which the goroutine ends a moment later.
func (l *life) over() bool {
	if l == nil {
		return false
	}
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// err is a wait's error once the connection is over: ErrNoCompletion,
// wrapping why it ended (errors.Is(err, cm.ErrDisconnected) holds after a
// disconnect, either side's).
func (l *life) err() error {
	why := l.why()
	if why == nil { // closed before Done's reason was recorded: cannot happen, but say something
		why = cm.ErrClosed
	}
	return wrap(ErrNoCompletion, fmt.Errorf("rpma: the connection is over: %w", why))
}

// waitCtx makes the context a completion wait runs with: the caller's,
// ended also by the connection's end. It keeps the one it made for the
// next wait with the same caller's context, so that a loop of waits with
// one context allocates nothing after the first. One per waiter (Conn,
// CQ): a waiter waits from one goroutine at a time.
type waitCtx struct {
	mu     sync.Mutex
	parent <-chan struct{} // Done of the caller's context
	ctx    context.Context
	stop   func()
}

// with returns ctx ended also by l (ctx itself when l is nil: a CQ of no
// connection, such as an SRQ's).
func (w *waitCtx) with(ctx context.Context, l *life) context.Context {
	if l == nil {
		return ctx
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ctx != nil && w.parent == ctx.Done() {
		return w.ctx
	}
	if w.stop != nil {
		w.stop()
	}
	wctx, cancel := context.WithCancel(ctx)
	// When l ends, cancel runs and detaches wctx from ctx, so nothing
	// is left behind once the connection is over.
	stop := context.AfterFunc(l.ctx, cancel)
	w.ctx, w.parent = wctx, ctx.Done()
	w.stop = func() { stop(); cancel() }
	return wctx
}
