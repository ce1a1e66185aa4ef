package valkeyrdma

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"github.com/goverbs/goverbs/cm"
	"github.com/goverbs/goverbs/internal/cmaddr"
)

// transportRetries is the RC retry count asked for. Valkey's client asks
// for 7, which rxe takes as "retry for ever": a server whose host died
// would then never fail the connection. 6 is one retry less on hardware
// and finite on rxe. The RNR retry count is 7 (infinite), as Valkey's.
const transportRetries = 6

// resolveRetries is how often a timed-out address or route resolution
// is tried again (1 s, 2 s, 4 s, ...).
const resolveRetries = 6

// acceptTimeout bounds one connection's set-up on the passive side.
const acceptTimeout = 30 * time.Second

// Dial connects to a Valkey server's RDMA port at address ("host:port"
// on network "tcp", "tcp4" or "tcp6": rdma_cm's TCP port space; the host
// must be reachable through an RDMA device). It resolves the address and
// the route, creates the queue pair and buffers, connects, and publishes
// its RX buffer; ctx bounds all of it. The Conn may be written at once:
// a Write waits for the server's RX buffer to arrive.
//
// A failed connect wraps ECONNREFUSED when the server rejected it (no
// listener on the port, or the server failed to set up the connection),
// otherwise the errno of the CM's failure event, with the *cm.EventError.
func Dial(ctx context.Context, network, address string, opts ...Option) (*Conn, error) {
	cfg := newConfig(opts)
	dst, err := cmaddr.Resolve(ctx, network, address, false)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "valkey-rdma", Err: err}
	}
	c, err := dial(ctx, dst, &cfg)
	if err != nil {
		var src net.Addr
		if cfg.localAddr.IsValid() {
			src = &Addr{cfg.localAddr}
		}
		return nil, &net.OpError{Op: "dial", Net: "valkey-rdma", Source: src, Addr: &Addr{dst}, Err: err}
	}
	return c, nil
}

func dial(ctx context.Context, dst netip.AddrPort, cfg *config) (*Conn, error) {
	ch, err := cm.NewChannel()
	if err != nil {
		return nil, fmt.Errorf("open rdma_cm: %w", err)
	}
	id, err := ch.CreateID(cm.TCP)
	if err != nil {
		ch.Close()
		return nil, err
	}
	err = cmaddr.Retry(ctx, resolveRetries, func(ctx context.Context) error { return id.ResolveAddr(ctx, cfg.localAddr, dst) })
	if err == nil {
		err = cmaddr.Retry(ctx, resolveRetries, id.ResolveRoute)
	}
	if err != nil {
		id.Close()
		ch.Close()
		return nil, err
	}
	c, err := newConn(ch, id, cfg, false)
	if err != nil {
		return nil, err
	}
	p := cm.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: transportRetries, RNRRetryCount: 7, Exact: true}
	if _, err := id.Connect(ctx, p); err != nil {
		c.free()
		return nil, connectErrno(err)
	}
	c.start()
	return c, nil
}

// connectErrno wraps a failed connect in ECONNREFUSED for a rejection,
// else in the failure event's negative status.
func connectErrno(err error) error {
	if errors.Is(err, cm.ErrRejected) {
		return fmt.Errorf("%w (%w)", syscall.ECONNREFUSED, err)
	}
	var ee *cm.EventError
	if errors.As(err, &ee) && ee.Status < 0 && !errors.As(err, new(syscall.Errno)) {
		return fmt.Errorf("%w (%w)", syscall.Errno(-ee.Status), err)
	}
	return err
}

// Listener accepts connections of Valkey's RDMA transport: the server
// side, for a Go program that serves RESP (or a test server). It
// implements net.Listener. Connection requests are accepted in the
// background and the established connections queued (up to the Backlog
// option) for Accept.
type Listener struct {
	ch   *cm.Channel
	id   *cm.ID
	addr *Addr
	cfg  config

	ctx    context.Context // ends with Close
	cancel context.CancelFunc
	conns  chan *Conn
	done   chan struct{} // the accept loop has ended

	mu  sync.Mutex
	err error // what ended the accept loop
}

// Listen listens on address ("host:port"; an empty host listens on every
// RDMA device, port 0 picks one) on network "tcp", "tcp4" or "tcp6".
func Listen(network, address string, opts ...Option) (*Listener, error) {
	cfg := newConfig(opts)
	addr, err := cmaddr.Resolve(context.Background(), network, address, true)
	if err != nil {
		return nil, &net.OpError{Op: "listen", Net: "valkey-rdma", Err: err}
	}
	l, err := listen(addr, cfg)
	if err != nil {
		return nil, &net.OpError{Op: "listen", Net: "valkey-rdma", Addr: &Addr{addr}, Err: err}
	}
	return l, nil
}

func listen(addr netip.AddrPort, cfg config) (*Listener, error) {
	ch, err := cm.NewChannel()
	if err != nil {
		return nil, fmt.Errorf("open rdma_cm: %w", err)
	}
	id, err := ch.CreateID(cm.TCP)
	if err != nil {
		ch.Close()
		return nil, err
	}
	_ = id.SetReuseAddr(true)
	if err := id.Bind(addr); err != nil {
		ch.Close()
		return nil, err
	}
	if err := id.Listen(cfg.backlog); err != nil {
		ch.Close()
		return nil, err
	}
	info, err := id.Query()
	if err != nil {
		ch.Close()
		return nil, err
	}
	l := &Listener{ch: ch, id: id, addr: &Addr{info.Src}, cfg: cfg,
		conns: make(chan *Conn, cfg.backlog), done: make(chan struct{})}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	go l.run()
	return l, nil
}

// run takes connection requests until Close, and sets each up in a
// goroutine of its own: a client's connect need not wait for the set-up
// of the ones before it (Valkey's C client gives its connect one second,
// and a set-up takes a good part of it in the TCG test bed).
func (l *Listener) run() {
	var setups sync.WaitGroup
	defer func() {
		setups.Wait()
		close(l.done)
	}()
	for {
		id, ev, err := l.id.GetRequest(l.ctx)
		if err != nil {
			if l.ctx.Err() == nil {
				l.mu.Lock()
				l.err = err
				l.mu.Unlock()
			}
			return
		}
		setups.Add(1)
		go func() {
			defer setups.Done()
			c, err := l.accept(id, ev)
			if err != nil {
				return // refused or failed
			}
			select {
			case l.conns <- c:
			case <-l.ctx.Done():
				c.Close()
			}
		}()
	}
}

// accept sets up the connection of one request, as Valkey's server does:
// the endpoint with every receive posted, then rdma_accept with one
// responder resource and initiator depth; once established, the RX
// buffer goes to the client.
func (l *Listener) accept(id *cm.ID, ev cm.Event) (*Conn, error) {
	ch, err := cm.NewChannel()
	if err != nil {
		id.Reject(nil)
		id.Close()
		return nil, err
	}
	// The connection gets its own channel, so that it outlives the
	// Listener.
	if err := id.Migrate(ch); err != nil {
		id.Reject(nil)
		id.Close()
		ch.Close()
		return nil, err
	}
	c, err := newConn(ch, id, &l.cfg, true)
	if err != nil {
		return nil, err
	}
	p := cm.ConnParam{
		ResponderResources: 1,
		InitiatorDepth:     1,
		RetryCount:         min(ev.Conn.RetryCount, transportRetries),
		RNRRetryCount:      7,
		Exact:              true,
	}
	ctx, cancel := context.WithTimeout(l.ctx, acceptTimeout)
	defer cancel()
	if err := id.Accept(ctx, p); err != nil {
		c.free()
		return nil, err
	}
	c.start()
	return c, nil
}

// Accept waits for the next connection. It implements net.Listener.
func (l *Listener) Accept() (net.Conn, error) {
	c, err := l.AcceptContext(context.Background())
	if err != nil {
		return nil, err
	}
	return c, nil
}

// AcceptContext waits for the next connection, or until ctx ends or the
// Listener is closed.
func (l *Listener) AcceptContext(ctx context.Context) (*Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	default:
	}
	select {
	case c := <-l.conns:
		return c, nil
	case <-ctx.Done():
		return nil, &net.OpError{Op: "accept", Net: "valkey-rdma", Addr: l.addr, Err: ctx.Err()}
	case <-l.done:
		l.mu.Lock()
		err := l.err
		l.mu.Unlock()
		if err == nil || l.ctx.Err() != nil {
			err = net.ErrClosed
		}
		return nil, &net.OpError{Op: "accept", Net: "valkey-rdma", Addr: l.addr, Err: err}
	}
}

// Close stops listening. Connections already accepted stay open; those
// established but not yet returned by Accept are closed.
func (l *Listener) Close() error {
	l.mu.Lock()
	closed := l.ctx.Err() != nil
	l.cancel()
	l.mu.Unlock()
	if closed {
		return &net.OpError{Op: "close", Net: "valkey-rdma", Addr: l.addr, Err: net.ErrClosed}
	}
	<-l.done
	err := l.ch.Close()
	for {
		select {
		case c := <-l.conns:
			c.Close()
		default:
			return err
		}
	}
}

// Addr returns the address the Listener listens on (an *Addr).
func (l *Listener) Addr() net.Addr { return l.addr }

var _ net.Listener = (*Listener)(nil)
