package rsocket

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

// transportRetries is the RC retry count asked for. C's rsocket asks
// for 7, which rxe takes as "retry for ever" (its completer counts down
// only counts below 7; docs/kernels.md): a peer whose host died would
// then never fail a connection, keepalive or not. 6 is one retry less on
// hardware and finite on rxe. The RNR retry count stays 7 (infinite),
// which rsocket's control messages rely on.
const transportRetries = 6

// acceptTimeout bounds one connection's set-up on the passive side (the
// REP and the wait for the RTU), so that a peer that vanishes mid-way
// does not hold up the connections behind it.
const acceptTimeout = 30 * time.Second

// Dial connects to address, "host:port" on network "tcp", "tcp4" or
// "tcp6", or "rsocket" (what Addr.Network returns; the same as "tcp")
// (rsocket uses rdma_cm's TCP port space; the host must have an RDMA
// device that reaches it), as rconnect does: it resolves the address
// and the route, creates the queue pair and buffers, and sends a connect
// request carrying rsocket's private data. ctx bounds all of it. A
// failed connect wraps the errno rconnect would set: ECONNREFUSED when the
// peer rejected it, otherwise the errno of the failure event's status
// (EINVAL for siw's CONNECT_ERROR -22), with the *cm.EventError.
func Dial(ctx context.Context, network, address string, opts ...Option) (*Conn, error) {
	cfg := newConfig(opts)
	dst, err := resolve(ctx, network, address, false)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "rsocket", Err: err}
	}
	c, err := dial(ctx, dst, &cfg)
	if err != nil {
		var src net.Addr
		if cfg.localAddr.IsValid() {
			src = &Addr{cfg.localAddr}
		}
		return nil, &net.OpError{Op: "dial", Net: "rsocket", Source: src, Addr: &Addr{dst}, Err: err}
	}
	return c, nil
}

func dial(ctx context.Context, dst netip.AddrPort, cfg *config) (*Conn, error) {
	ch, err := cm.NewChannel()
	if err != nil {
		return nil, err
	}
	id, err := ch.CreateID(cm.TCP)
	if err != nil {
		ch.Close()
		return nil, err
	}
	// rs_do_connect: address and route resolution time out after 1, 2,
	// 4 ... 64 s, and are tried again on a timeout.
	err = retry(ctx, func(ctx context.Context) error { return id.ResolveAddr(ctx, cfg.localAddr, dst) })
	if err == nil {
		err = retry(ctx, id.ResolveRoute)
	}
	if err != nil {
		id.Close()
		ch.Close()
		return nil, err
	}
	c, err := newConn(ch, id, cfg)
	if err != nil {
		return nil, err
	}
	pd := c.connData()
	p := cm.ConnParam{PrivateData: pd[:], FlowControl: 1, RetryCount: transportRetries, RNRRetryCount: 7, Exact: true}
	if c.iwarp {
		// rs_do_connect: "work-around: iWarp issues RDMA read during
		// connection".
		p.InitiatorDepth = 1
	}
	ev, err := id.Connect(ctx, p)
	if err != nil {
		c.free()
		return nil, connectErrno(err)
	}
	d, err := parseConnData(ev.Conn.PrivateData)
	if err != nil {
		c.free()
		return nil, err
	}
	c.s.connect(d)
	c.start()
	return c, nil
}

// connectErrno wraps a failed connect in the errno rconnect sets
// (librdmacm's ucma_complete): ECONNREFUSED for a rejection, else the
// failure event's negative status (siw's CONNECT_ERROR -22 is EINVAL).
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

// retry runs a resolution step with C's timeouts: 1 s, doubled after
// each timeout, at most connRetries+1 times, within ctx.
func retry(ctx context.Context, step func(context.Context) error) error {
	return cmaddr.Retry(ctx, connRetries, step)
}

// resolve parses "host:port" for network. An empty host is the
// unspecified address, allowed only when listening.
func resolve(ctx context.Context, network, address string, listen bool) (netip.AddrPort, error) {
	if network == "rsocket" { // what Addr.Network says: the same as "tcp"
		network = "tcp"
	}
	return cmaddr.Resolve(ctx, network, address, listen)
}

// Listener accepts rsocket connections. It implements net.Listener.
//
// Like rsocket's listen thread, it accepts connection requests in the
// background, each with the sizes the Listener's options give, and
// queues the established connections (up to the Backlog option) for
// Accept: a C client's rconnect completes without waiting for Accept.
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
// RDMA device, port 0 picks one) on network "tcp", "tcp4" or "tcp6", or
// "rsocket" (what Addr.Network returns; the same as "tcp").
func Listen(network, address string, opts ...Option) (*Listener, error) {
	cfg := newConfig(opts)
	addr, err := resolve(context.Background(), network, address, true)
	if err != nil {
		return nil, &net.OpError{Op: "listen", Net: "rsocket", Err: err}
	}
	l, err := listen(addr, cfg)
	if err != nil {
		return nil, &net.OpError{Op: "listen", Net: "rsocket", Addr: &Addr{addr}, Err: err}
	}
	return l, nil
}

func listen(addr netip.AddrPort, cfg config) (*Listener, error) {
	ch, err := cm.NewChannel()
	if err != nil {
		return nil, err
	}
	id, err := ch.CreateID(cm.TCP)
	if err != nil {
		ch.Close()
		return nil, err
	}
	_ = id.SetReuseAddr(true) // as rstream does; C ignores some failures of it too
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

// run accepts connection requests until Close (rs_accept on the listen
// thread).
func (l *Listener) run() {
	defer close(l.done)
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
		c, err := l.accept(id, ev)
		if err != nil {
			continue // refused or failed: the next request
		}
		select {
		case l.conns <- c:
		case <-l.ctx.Done():
			c.Close()
			return
		}
	}
}

// accept sets up the connection of one request: it checks the peer's
// private data (C rejects any version but 1), creates the endpoint and
// answers with this side's private data, copying the request's
// connection parameters as rdma_accept does in rs_accept, and waits
// until the connection is established.
func (l *Listener) accept(id *cm.ID, ev cm.Event) (*Conn, error) {
	d, err := parseConnData(ev.Conn.PrivateData)
	if err != nil {
		id.Reject(nil)
		id.Close()
		return nil, err
	}
	ch, err := cm.NewChannel()
	if err != nil {
		id.Reject(nil)
		id.Close()
		return nil, err
	}
	// The connection gets its own channel, so that it outlives the
	// Listener (librdmacm does the same for rdma_get_request's IDs).
	if err := id.Migrate(ch); err != nil {
		id.Reject(nil)
		id.Close()
		ch.Close()
		return nil, err
	}
	c, err := newConn(ch, id, &l.cfg)
	if err != nil {
		// newConn closed id and ch; the peer sees its request time
		// out or the ID's destruction.
		return nil, err
	}
	c.s.connect(d)
	// On iWARP the passive side may send only once the active side's
	// first message has arrived (docs/providers.md, "siw: who sends
	// first").
	c.s.held = c.iwarp
	pd := c.connData()
	p := cm.ConnParam{
		PrivateData:        pd[:],
		ResponderResources: ev.Conn.ResponderResources,
		InitiatorDepth:     ev.Conn.InitiatorDepth,
		FlowControl:        ev.Conn.FlowControl,
		RetryCount:         min(ev.Conn.RetryCount, transportRetries),
		RNRRetryCount:      ev.Conn.RNRRetryCount,
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
		return nil, &net.OpError{Op: "accept", Net: "rsocket", Addr: l.addr, Err: ctx.Err()}
	case <-l.done:
		l.mu.Lock()
		err := l.err
		l.mu.Unlock()
		if err == nil || l.ctx.Err() != nil {
			err = net.ErrClosed
		}
		return nil, &net.OpError{Op: "accept", Net: "rsocket", Addr: l.addr, Err: err}
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
		return &net.OpError{Op: "close", Net: "rsocket", Addr: l.addr, Err: net.ErrClosed}
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

// Addr returns the address the Listener listens on (an *Addr).
func (l *Listener) Addr() net.Addr { return l.addr }

var _ net.Listener = (*Listener)(nil)
