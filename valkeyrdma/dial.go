package valkeyrdma

import (
	"context"
	"net"
	"net/netip"

	"github.com/goverbs/goverbs/cm"
	"github.com/goverbs/goverbs/internal/cmaddr"
	"github.com/goverbs/goverbs/internal/rdmaconn"
)

// transportRetries is the RC retry count asked for. Valkey's client asks
// for 7, which rxe takes as "retry for ever": a server whose host died
// would then never fail the connection. 6 is one retry less on hardware
// and finite on rxe. The RNR retry count is 7 (infinite), as Valkey's.
const transportRetries = 6

// resolveRetries is how often a timed-out address or route resolution
// is tried again (1 s, 2 s, 4 s, ...).
const resolveRetries = 6

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
	ch, id, err := rdmaconn.Resolve(ctx, cfg.localAddr, dst, resolveRetries)
	if err != nil {
		return nil, err
	}
	c, err := newConn(ch, id, cfg, false)
	if err != nil {
		return nil, err
	}
	p := cm.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: transportRetries, RNRRetryCount: 7, Exact: true}
	if _, err := id.Connect(ctx, p); err != nil {
		c.free()
		return nil, rdmaconn.ConnectErrno(err)
	}
	c.start()
	return c, nil
}

// Listener accepts connections of Valkey's RDMA transport: the server
// side, for a Go program that serves RESP (or a test server). It
// implements net.Listener. Connection requests are accepted in the
// background and the established connections queued (up to the Backlog
// option) for Accept.
type Listener struct {
	l *rdmaconn.Listener[*Conn]
}

// Listen listens on address ("host:port"; an empty host listens on every
// RDMA device, port 0 picks one) on network "tcp", "tcp4" or "tcp6".
func Listen(network, address string, opts ...Option) (*Listener, error) {
	cfg := newConfig(opts)
	addr, err := cmaddr.Resolve(context.Background(), network, address, true)
	if err != nil {
		return nil, &net.OpError{Op: "listen", Net: "valkey-rdma", Err: err}
	}
	// Each request is set up in a goroutine of its own: a client's
	// connect need not wait for the set-up of the ones before it
	// (Valkey's C client gives its connect one second, and a set-up
	// takes a good part of it in the TCG test bed).
	l, err := rdmaconn.Listen(addr, rdmaconn.ListenConfig[*Conn]{
		Net:        "valkey-rdma",
		Backlog:    cfg.backlog,
		Addr:       func(a netip.AddrPort) net.Addr { return &Addr{a} },
		Accept:     func(ctx context.Context, id *cm.ID, ev cm.Event) (*Conn, error) { return accept(ctx, &cfg, id, ev) },
		Concurrent: true,
	})
	if err != nil {
		return nil, err
	}
	return &Listener{l}, nil
}

// accept sets up the connection of one request, as Valkey's server does:
// the endpoint with every receive posted, then rdma_accept with one
// responder resource and initiator depth; once established, the RX
// buffer goes to the client.
func accept(ctx context.Context, cfg *config, id *cm.ID, ev cm.Event) (*Conn, error) {
	ch, err := rdmaconn.Migrate(id)
	if err != nil {
		return nil, err
	}
	c, err := newConn(ch, id, cfg, true)
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
