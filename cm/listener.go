package cm

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/verbs"
)

// ListenOptions configure Listen.
type ListenOptions struct {
	// Caps are the capacities of each connection's QP; the zero value
	// is DefaultListenCaps.
	Caps qp.Caps
	// PD is the protection domain of every connection's Queues; nil
	// gives each connection a PD of its own, which its Queues.Close
	// deallocates.
	PD *verbs.PD
	// Backlog is ID.Listen's: <= 0 is the kernel's maximum.
	Backlog int
	// Param is what Accept accepts each connection with (the zero value:
	// librdmacm's defaults, see ConnParam).
	Param ConnParam
	// Ready, when set, is called with each connection before it is
	// accepted, when its QP exists but the peer cannot send yet: the
	// place to register memory (EP.Queues().NewMR) and post receives.
	// (Receives posted after Accept are late on iWARP, where a SEND that
	// finds none fails the connection; InfiniBand and RoCE retry it.)
	// An error rejects the request and Accept returns it.
	Ready func(*EP) error
}

// DefaultListenCaps are the QP capacities of Listen's connections when
// ListenOptions.Caps is zero.
var DefaultListenCaps = qp.Caps{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}

// Listener accepts reliable connections (TCP port space, RC QPs) on one
// address: the shortcut for GetRequest, NewQueues, posting receives and
// Accept, as net.Listener is for sockets.
type Listener struct {
	ep   *EP
	opts ListenOptions
	addr netip.AddrPort
}

// Listen binds addr (an address of an RDMA device, or the unspecified
// address for all of them; port 0 picks a free one) and listens on it.
func Listen(addr netip.AddrPort, opts ListenOptions) (*Listener, error) {
	if opts.Caps == (qp.Caps{}) {
		opts.Caps = DefaultListenCaps
	}
	ep, err := CreateEP(context.Background(), &EPInfo{Flags: AIPassive, PortSpace: TCP, QPType: qp.RC, Src: addr}, opts.PD, &opts.Caps)
	if err != nil {
		return nil, fmt.Errorf("cm: listen on %v: %w", addr, err)
	}
	if err := ep.Listen(opts.Backlog); err != nil {
		ep.Close()
		return nil, fmt.Errorf("cm: listen on %v: %w", addr, err)
	}
	info, err := ep.ID().Query()
	if err != nil {
		ep.Close()
		return nil, err
	}
	return &Listener{ep: ep, opts: opts, addr: info.Src}, nil
}

// Addr returns the address the listener is bound to, its port filled in.
func (l *Listener) Addr() netip.AddrPort { return l.addr }

// ID returns the listening ID.
func (l *Listener) ID() *ID { return l.ep.ID() }

// Accept waits for the next connection request, or for ctx to end, and
// returns the connection established: an EP on a channel of its own
// whose Queues are ready to post to. Before accepting it calls
// ListenOptions.Ready. A request that fails on the way is rejected or
// closed and Accept returns the error; the listener stays usable. Close
// the EP when done (after ID().DisconnectContext to end the connection
// cleanly).
func (l *Listener) Accept(ctx context.Context) (*EP, error) {
	c, _, err := l.ep.GetRequest(ctx)
	if err != nil {
		return nil, err
	}
	if l.opts.Ready != nil {
		if err := l.opts.Ready(c); err != nil {
			c.ID().Reject(nil)
			return nil, errors.Join(fmt.Errorf("cm: accept: not ready: %w", err), c.Close())
		}
	}
	if err := c.ID().Accept(ctx, l.opts.Param); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	return c, nil
}

// Close stops listening. Connections Accept returned live on.
func (l *Listener) Close() error { return l.ep.Close() }
