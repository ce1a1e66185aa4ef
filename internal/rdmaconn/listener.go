package rdmaconn

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/goverbs/goverbs/cm"
)

// AcceptTimeout bounds one connection's set-up on the passive side (the
// REP and the wait for the RTU), so that a peer that vanishes mid-way
// does not hold up the connections behind it.
const AcceptTimeout = 30 * time.Second

// ListenConfig says how a Listener names itself and sets up the
// connection of each request.
type ListenConfig[C net.Conn] struct {
	// Net is the network errors name ("rsocket", "valkey-rdma").
	Net string
	// Backlog is the listen backlog, and how many established
	// connections wait for Accept.
	Backlog int
	// Addr makes the transport's address from the listening ID's.
	Addr func(netip.AddrPort) net.Addr
	// Accept sets up the connection of one request; ctx ends with the
	// Listener. On failure it has rejected or closed id.
	Accept func(ctx context.Context, id *cm.ID, ev cm.Event) (C, error)
	// Concurrent sets up each request in a goroutine of its own, so
	// that a request need not wait for the set-up of the ones before it.
	Concurrent bool
}

// Listener accepts connection requests in the background and queues the
// established connections (up to the backlog) for Accept.
type Listener[C net.Conn] struct {
	ch   *cm.Channel
	id   *cm.ID
	addr net.Addr
	cfg  ListenConfig[C]

	ctx    context.Context // ends with Close
	cancel context.CancelFunc
	conns  chan C
	done   chan struct{} // the accept loop has ended

	mu  sync.Mutex
	err error // what ended the accept loop
}

// Listen binds a CM ID of its own channel to addr, listens on it and
// starts accepting. A failure is a *net.OpError naming addr.
func Listen[C net.Conn](addr netip.AddrPort, cfg ListenConfig[C]) (*Listener[C], error) {
	l, err := listen(addr, cfg)
	if err != nil {
		return nil, &net.OpError{Op: "listen", Net: cfg.Net, Addr: cfg.Addr(addr), Err: err}
	}
	return l, nil
}

func listen[C net.Conn](addr netip.AddrPort, cfg ListenConfig[C]) (*Listener[C], error) {
	ch, id, err := NewID()
	if err != nil {
		return nil, err
	}
	_ = id.SetReuseAddr(true) // as rstream does; C ignores some failures of it too
	if err := id.Bind(addr); err != nil {
		ch.Close()
		return nil, err
	}
	if err := id.Listen(cfg.Backlog); err != nil {
		ch.Close()
		return nil, err
	}
	info, err := id.Query()
	if err != nil {
		ch.Close()
		return nil, err
	}
	l := &Listener[C]{ch: ch, id: id, addr: cfg.Addr(info.Src), cfg: cfg,
		conns: make(chan C, cfg.Backlog), done: make(chan struct{})}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	if cfg.Concurrent {
		go l.runConcurrent()
	} else {
		go l.run()
	}
	return l, nil
}

// request takes the next connection request; false when the loop is to
// end (Close, or a failure, recorded for Accept).
func (l *Listener[C]) request() (*cm.ID, cm.Event, bool) {
	id, ev, err := l.id.GetRequest(l.ctx)
	if err != nil {
		if l.ctx.Err() == nil {
			l.mu.Lock()
			l.err = err
			l.mu.Unlock()
		}
		return nil, cm.Event{}, false
	}
	return id, ev, true
}

// queue hands c to Accept, or closes it if the Listener closes first; it
// reports whether c was queued.
func (l *Listener[C]) queue(c C) bool {
	select {
	case l.conns <- c:
		return true
	case <-l.ctx.Done():
		c.Close()
		return false
	}
}

// run sets up one request after the other until Close (rsocket's listen
// thread, rs_accept).
func (l *Listener[C]) run() {
	defer close(l.done)
	for {
		id, ev, ok := l.request()
		if !ok {
			return
		}
		c, err := l.cfg.Accept(l.ctx, id, ev)
		if err != nil {
			continue // refused or failed: the next request
		}
		if !l.queue(c) {
			return
		}
	}
}

// runConcurrent takes requests until Close and sets each up in a
// goroutine of its own.
func (l *Listener[C]) runConcurrent() {
	var setups sync.WaitGroup
	defer func() {
		setups.Wait()
		close(l.done)
	}()
	for {
		id, ev, ok := l.request()
		if !ok {
			return
		}
		setups.Add(1)
		go func() {
			defer setups.Done()
			c, err := l.cfg.Accept(l.ctx, id, ev)
			if err != nil {
				return // refused or failed
			}
			l.queue(c)
		}()
	}
}

// Accept waits for the next connection.
func (l *Listener[C]) Accept() (net.Conn, error) {
	c, err := l.AcceptContext(context.Background())
	if err != nil {
		return nil, err
	}
	return c, nil
}

// AcceptContext waits for the next connection, or until ctx ends or the
// Listener is closed.
func (l *Listener[C]) AcceptContext(ctx context.Context) (C, error) {
	select {
	case c := <-l.conns:
		return c, nil
	default:
	}
	var zero C
	select {
	case c := <-l.conns:
		return c, nil
	case <-ctx.Done():
		return zero, &net.OpError{Op: "accept", Net: l.cfg.Net, Addr: l.addr, Err: ctx.Err()}
	case <-l.done:
		l.mu.Lock()
		err := l.err
		l.mu.Unlock()
		if err == nil || l.ctx.Err() != nil {
			err = net.ErrClosed
		}
		return zero, &net.OpError{Op: "accept", Net: l.cfg.Net, Addr: l.addr, Err: err}
	}
}

// Close stops listening. Connections already accepted stay open; those
// established but not yet returned by Accept are closed.
func (l *Listener[C]) Close() error {
	l.mu.Lock()
	closed := l.ctx.Err() != nil
	l.cancel()
	l.mu.Unlock()
	if closed {
		return &net.OpError{Op: "close", Net: l.cfg.Net, Addr: l.addr, Err: net.ErrClosed}
	}
	<-l.done
	err := l.ch.Close() // destroys the listening ID
	for {
		select {
		case c := <-l.conns:
			c.Close()
		default:
			return err
		}
	}
}

// Addr returns the address the Listener listens on.
func (l *Listener[C]) Addr() net.Addr { return l.addr }
