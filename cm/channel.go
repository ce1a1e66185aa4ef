package cm

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/pollfd"
	"github.com/goverbs/goverbs/uverbs"
	"github.com/goverbs/goverbs/verbs"
)

// DevicePath is the rdma_cm character device.
const DevicePath = "/dev/infiniband/rdma_cm"

// ErrClosed is returned by operations on a closed Channel or ID.
var ErrClosed = verbs.ErrClosed

// Channel is an rdma_cm event channel: one open file of
// /dev/infiniband/rdma_cm. Every ID belongs to a channel; the kernel queues
// the events of all its IDs on the channel's fd, and a goroutine of the
// channel reads them (parked on Go's netpoller) and hands each to its ID.
//
// IDs bound to an RDMA device share one verbs Context of it (opened by cm,
// closed when the last ID using it closes, or attached by the caller with
// AttachContext); create PDs, CQs and QPs for an ID on ID.Context(). Close
// destroys the channel's IDs.
type Channel struct {
	fd     *pollfd.FD
	stop   context.CancelFunc
	done   chan struct{}
	runErr error // why the reader stopped; set before done is closed

	evMu sync.Mutex // held while an event is read and dispatched, and by Migrate

	mu     sync.Mutex
	closed bool
	ids    map[uint64]*ID
	mcs    map[uint64]*mcGroup       // multicast groups joined, by the uid their events carry
	devs   map[uint32]*verbs.Context // contexts attached with AttachContext
}

// NewChannel opens an event channel.
func NewChannel() (*Channel, error) {
	raw, err := unix.Open(DevicePath, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("cm: open %s (is rdma_ucm loaded?): %w", DevicePath, err)
	}
	fd, err := pollfd.New(raw, "rdma_cm")
	if err != nil {
		return nil, fmt.Errorf("cm: %w", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	ch := &Channel{fd: fd, stop: stop, done: make(chan struct{}),
		ids: make(map[uint64]*ID), mcs: make(map[uint64]*mcGroup), devs: make(map[uint32]*verbs.Context)}
	go ch.run(ctx)
	return ch, nil
}

// FD returns the channel's descriptor number, valid until Close.
func (ch *Channel) FD() int { return ch.fd.Int() }

// run reads events until the channel closes.
func (ch *Channel) run(ctx context.Context) {
	defer close(ch.done)
	resp := new(uverbs.UcmEventResp)
	req := uverbs.UcmGetEvent{Response: uverbs.Addr(unsafe.Pointer(resp))}
	// One function for every read: a waiting Do allocates nothing.
	next := func(fd int) error {
		// Reading and dispatching are one step under evMu, which
		// Migrate holds around MIGRATE_ID: an event of a migrating ID
		// is either taken and delivered before the move, or moved.
		ch.evMu.Lock()
		defer ch.evMu.Unlock()
		err := uverbs.UcmaWrite(fd, "GET_EVENT", uverbs.RDMA_USER_CM_CMD_GET_EVENT, &req, unsafe.Pointer(resp), unsafe.Sizeof(*resp))
		if err == nil {
			if testHookEventRead != nil {
				testHookEventRead()
			}
			ch.dispatch(resp)
		}
		return err
	}
	for {
		err := ch.fd.Do(ctx, next)
		if err != nil {
			if ctx.Err() == nil {
				ch.runErr = fmt.Errorf("cm: reading events: %w", err)
			} else {
				ch.runErr = ErrClosed
			}
			return
		}
	}
}

func (ch *Channel) dispatch(r *uverbs.UcmEventResp) {
	ch.mu.Lock()
	id := ch.ids[r.Uid]
	// A multicast event carries the uid of the group (JOIN_MCAST), not
	// the ID's.
	mc := ch.mcs[r.Uid]
	ch.mu.Unlock()
	if id == nil && mc != nil {
		id = mc.id
	}
	if id == nil {
		return // destroyed meanwhile: the kernel purges, but a race is possible
	}
	ev := decodeEvent(r, id.ps.datagram())
	ev.ID = id
	if mc != nil {
		ev.Group, ev.mc = mc.group, mc
		switch ev.Type {
		case EventMulticastJoin:
			mc.processJoin(&ev)
		case EventMulticastError:
			ev.UD = UDParam{} // the kernel sends none (librdmacm copies none)
		}
	}
	if ev.Type == EventConnectRequest {
		child, err := ch.newID(r.Id, id.ps)
		if err != nil {
			return // channel closing
		}
		child.listener = id
		ev.ID, ev.Listener = child, id
	}
	id.deliver(ev)
}

// testHookEventRead, when set (by tests, before any channel opens), runs
// between reading an event and dispatching it.
var testHookEventRead func()

// nextUID numbers IDs across all channels: an ID keeps its uid when it
// migrates, so uids must not repeat between channels.
var nextUID atomic.Uint64

// newID registers an ID the kernel knows as handle.
func (ch *Channel) newID(handle uint32, ps PortSpace) (*ID, error) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.closed {
		return nil, ErrClosed
	}
	id := &ID{ch: ch, handle: handle, uid: nextUID.Add(1), ps: ps, notify: make(chan struct{}, 1)}
	ch.ids[id.uid] = id
	return id, nil
}

// reserveUID hands out a uid for an ID about to be created.
func (ch *Channel) reserveUID() (uint64, error) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.closed {
		return 0, ErrClosed
	}
	return nextUID.Add(1), nil
}

// device returns the verbs Context IDs of this channel use for the device
// with ibdev index idx: an attached one (owned is false), or the one the
// package shares among IDs (owned is true: the caller holds a reference
// and must releaseDevice it).
func (ch *Channel) device(idx uint32) (c *verbs.Context, owned bool, err error) {
	ch.mu.Lock()
	closed := ch.closed
	c, ok := ch.devs[idx]
	ch.mu.Unlock()
	if closed {
		return nil, false, ErrClosed
	}
	if ok {
		return c, false, nil
	}
	c, err = acquireDevice(idx)
	return c, err == nil, err
}

// The verbs contexts cm opens are shared by every ID bound to the device,
// whatever its channel, and closed when the last such ID closes: an ID
// keeps its device (and what was created on it) across Migrate.
var shared struct {
	sync.Mutex
	devs map[uint32]*sharedDev
}

type sharedDev struct {
	ctx  *verbs.Context
	refs int
}

func acquireDevice(idx uint32) (*verbs.Context, error) {
	shared.Lock()
	defer shared.Unlock()
	if d, ok := shared.devs[idx]; ok {
		d.refs++
		return d.ctx, nil
	}
	devs, err := verbs.Devices()
	if err != nil {
		return nil, err
	}
	for _, d := range devs {
		if d.IndexKnown && d.Index == idx {
			c, err := verbs.OpenDevice(d)
			if err != nil {
				return nil, err
			}
			if shared.devs == nil {
				shared.devs = make(map[uint32]*sharedDev)
			}
			shared.devs[idx] = &sharedDev{ctx: c, refs: 1}
			return c, nil
		}
	}
	return nil, fmt.Errorf("cm: the kernel bound the ID to device index %d, which is not listed: %w", idx, verbs.ErrNoDevice)
}

func releaseDevice(c *verbs.Context) error {
	shared.Lock()
	defer shared.Unlock()
	for idx, d := range shared.devs {
		if d.ctx == c {
			if d.refs--; d.refs == 0 {
				delete(shared.devs, idx)
				return c.Close()
			}
			return nil
		}
	}
	return nil
}

// AttachContext makes IDs of this channel that bind to c's device use c
// (instead of the context cm opens and shares), so that their QPs can
// share c's PDs, CQs and memory regions. cm does not close c. Attach before
// binding or resolving IDs.
func (ch *Channel) AttachContext(c *verbs.Context) error {
	if c == nil {
		ch.mu.Lock()
		closed := ch.closed
		ch.mu.Unlock()
		if closed {
			return ErrClosed
		}
		return fmt.Errorf("cm: attach a nil context: %w", unix.EINVAL)
	}
	dev := c.Device()
	if !dev.IndexKnown {
		return fmt.Errorf("cm: attach context of %s: device index unknown", dev.Name)
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.closed {
		return ErrClosed
	}
	if old, ok := ch.devs[dev.Index]; ok && old != c {
		return fmt.Errorf("cm: attach context of %s: the channel already uses another context for it", dev.Name)
	}
	ch.devs[dev.Index] = c
	return nil
}

// raw runs a command on the channel's fd.
func (ch *Channel) raw(fn func(fd int) error) error { return ch.fd.Raw(fn) }

// Close destroys every ID of the channel, as ID.Close does (the QPs they
// own with them; a device context cm opened closes, with everything
// created on it, when the last ID that uses it does, on whichever
// channel), then stops the event reader and closes the fd. Contexts
// attached with AttachContext stay open: they are the caller's.
func (ch *Channel) Close() error {
	ch.mu.Lock()
	if ch.closed {
		ch.mu.Unlock()
		return nil
	}
	ids := make([]*ID, 0, len(ch.ids))
	for _, id := range ch.ids {
		ids = append(ids, id)
	}
	ch.mu.Unlock()
	var errs []error
	for _, id := range ids {
		if err := id.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	ch.mu.Lock()
	ch.closed = true
	ch.devs = nil
	ch.mu.Unlock()
	ch.stop()
	<-ch.done
	errs = append(errs, ch.fd.Close())
	return errors.Join(errs...)
}
