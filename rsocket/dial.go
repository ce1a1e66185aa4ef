package rsocket

import (
	"context"
	"net"
	"net/netip"

	"github.com/goverbs/goverbs/cm"
	"github.com/goverbs/goverbs/internal/cmaddr"
	"github.com/goverbs/goverbs/internal/rdmaconn"
)

// transportRetries is the RC retry count asked for. C's rsocket asks
// for 7, which rxe takes as "retry for ever" (its completer counts down
// only counts below 7; docs/kernels.md): a peer whose host died would
// then never fail a connection, keepalive or not. 6 is one retry less on
// hardware and finite on rxe. The RNR retry count stays 7 (infinite),
// which rsocket's control messages rely on.
const transportRetries = 6

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
	// rs_do_connect: address and route resolution time out after 1, 2,
	// 4 ... 64 s, and are tried again on a timeout.
	ch, id, err := rdmaconn.Resolve(ctx, cfg.localAddr, dst, connRetries)
	if err != nil {
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
		return nil, rdmaconn.ConnectErrno(err)
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
	l *rdmaconn.Listener[*Conn]
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
	// rs_accept on the listen thread, one request after the other.
	l, err := rdmaconn.Listen(addr, rdmaconn.ListenConfig[*Conn]{
		Net:     "rsocket",
		Backlog: cfg.backlog,
		Addr:    func(a netip.AddrPort) net.Addr { return &Addr{a} },
		Accept:  func(ctx context.Context, id *cm.ID, ev cm.Event) (*Conn, error) { return accept(ctx, &cfg, id, ev) },
	})
	if err != nil {
		return nil, err
	}
	return &Listener{l}, nil
}

// accept sets up the connection of one request: it checks the peer's
// private data (C rejects any version but 1), creates the endpoint and
// answers with this side's private data, copying the request's
// connection parameters as rdma_accept does in rs_accept, and waits
// until the connection is established.
func accept(ctx context.Context, cfg *config, id *cm.ID, ev cm.Event) (*Conn, error) {
	d, err := parseConnData(ev.Conn.PrivateData)
	if err != nil {
		id.Reject(nil)
		id.Close()
		return nil, err
	}
	ch, err := rdmaconn.Migrate(id)
	if err != nil {
		return nil, err
	}
	c, err := newConn(ch, id, cfg)
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
	if err := rdmaconn.Accept(ctx, id, p); err != nil {
		c.free()
		return nil, err
	}
	c.start()
	return c, nil
}

// Accept waits for the next connection. It implements net.Listener.
func (l *Listener) Accept() (net.Conn, error) { return l.l.Accept() }

// AcceptContext waits for the next connection, or until ctx ends or the
// Listener is closed.
func (l *Listener) AcceptContext(ctx context.Context) (*Conn, error) {
	return l.l.AcceptContext(ctx)
}

// Close stops listening. Connections already accepted stay open; those
// established but not yet returned by Accept are closed.
func (l *Listener) Close() error { return l.l.Close() }

// Addr returns the address the Listener listens on (an *Addr).
func (l *Listener) Addr() net.Addr { return l.l.Addr() }

var _ net.Listener = (*Listener)(nil)
