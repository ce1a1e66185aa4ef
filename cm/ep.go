package cm

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/verbs"
)

// EP is what librdmacm's rdma_create_ep makes from an EPInfo: an ID
// on a Channel of its own, bound (passive) or with its address and route
// resolved (active), and, when QP capacities are given, a Queues (QP,
// send and receive CQs with their channels, the rdma_verbs.h helpers). A
// passive EP listens; GetRequest returns each connection as an EP of its
// own with a Queues made with the same capacities, as rdma_get_request
// does for an rdma_create_ep listener.
//
// rdma_create_ep's IDs are synchronous (each call waits for its event);
// the Go equivalent is the ID's methods, which wait with a context. Close
// is rdma_destroy_ep.
type EP struct {
	ch   *Channel
	id   *ID
	ep   *Queues // nil without capacities
	pd   *verbs.PD
	caps *qp.Caps // for the connections of a passive EP
}

// resolveTimeout is rdma_create_ep's wait for address and route
// resolution (2000 ms each) when ctx has no deadline.
const resolveTimeout = 2 * time.Second

// CreateEP is rdma_create_ep. Active (info without AIPassive): it resolves
// info.Dst (from info.Src when valid) and the route, and, with caps, makes
// the Queues on pd (nil: a PD of its own). Passive: it binds
// info.Src and keeps pd and caps for GetRequest. Connect, Listen and the
// rest are the ID's (EP.ID). Each resolution waits until ctx ends, or 2 s
// when ctx has no deadline, as librdmacm.
func CreateEP(ctx context.Context, info *EPInfo, pd *verbs.PD, caps *qp.Caps) (*EP, error) {
	if info == nil {
		return nil, errors.New("cm: create_ep: no EPInfo")
	}
	ps, _, err := kind(info.PortSpace, info.QPType)
	if err != nil {
		return nil, fmt.Errorf("cm: create_ep: %w", err)
	}
	ch, err := NewChannel()
	if err != nil {
		return nil, err
	}
	e := &EP{ch: ch, pd: pd}
	ok := false
	defer func() {
		if !ok {
			e.Close()
		}
	}()
	if e.id, err = ch.CreateID(ps); err != nil {
		return nil, err
	}
	if info.Flags&AIPassive != 0 {
		if err := e.id.Bind(info.Src); err != nil {
			return nil, err
		}
		if caps != nil {
			c := *caps
			e.caps = &c
		}
		ok = true
		return e, nil
	}
	if !info.Dst.IsValid() {
		return nil, errors.New("cm: create_ep: an active EPInfo without a destination")
	}
	rctx, cancel := withDefaultTimeout(ctx)
	err = e.id.ResolveAddr(rctx, info.Src, info.Dst)
	cancel()
	if err != nil {
		return nil, err
	}
	rctx, cancel = withDefaultTimeout(ctx)
	err = e.id.ResolveRoute(rctx)
	cancel()
	if err != nil {
		return nil, err
	}
	if caps != nil {
		if e.ep, err = e.id.NewQueues(pd, *caps); err != nil {
			return nil, err
		}
	}
	ok = true
	return e, nil
}

func withDefaultTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, resolveTimeout)
}

// ID returns the EP's rdma_cm ID.
func (e *EP) ID() *ID { return e.id }

// Queues returns the EP's Queues, or nil when it was made without QP
// capacities (and for a passive EP, which has no QP of its own).
func (e *EP) Queues() *Queues { return e.ep }

// Listen starts listening on a passive EP (rdma_listen), as ID.Listen:
// a backlog <= 0 is the kernel's maximum.
func (e *EP) Listen(backlog int) error { return e.id.Listen(backlog) }

// GetRequest waits for the next connection request on a listening EP and
// returns it as an EP on a channel of its own, with a Queues made with
// the listener's capacities (if it had any), ready to be accepted with
// ID().Accept, or rejected, or closed.
func (e *EP) GetRequest(ctx context.Context) (*EP, Event, error) {
	id, ev, err := e.id.GetRequest(ctx)
	if err != nil {
		return nil, ev, err
	}
	ch, err := NewChannel()
	if err != nil {
		id.Close()
		return nil, ev, err
	}
	c := &EP{ch: ch, id: id, pd: e.pd}
	// Like librdmacm (rdma_migrate_id to a new channel for each
	// connection of a synchronous listener): closing the listener leaves
	// its connections working.
	if err := id.Migrate(ch); err != nil {
		id.Close()
		ch.Close()
		return nil, ev, err
	}
	if e.caps != nil {
		if c.ep, err = id.NewQueues(e.pd, *e.caps); err != nil {
			c.Close()
			return nil, ev, err
		}
	}
	return c, ev, nil
}

// Close is rdma_destroy_ep: it destroys the Queues (QP, CQs, channels,
// and the PD if it made one), the ID and the EP's channel. It is safe to
// call more than once.
func (e *EP) Close() error {
	var errs []error
	if e.ep != nil {
		errs = append(errs, e.ep.Close())
		e.ep = nil
	}
	if e.id != nil {
		errs = append(errs, e.id.Close())
		e.id = nil
	}
	if e.ch != nil {
		errs = append(errs, e.ch.Close())
		e.ch = nil
	}
	return errors.Join(errs...)
}
