package cm

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
// The channel also opens, once, the verbs Context of each RDMA device its
// IDs bind to; create PDs, CQs and QPs for an ID on ID.Context(). Close
// destroys the IDs, then closes those contexts.
type Channel struct {
	fd     *pollfd.FD
	stop   context.CancelFunc
	done   chan struct{}
	runErr error // why the reader stopped; set before done is closed

	mu      sync.Mutex
	closed  bool
	ids     map[uint64]*ID
	nextUID uint64
	devs    map[uint32]*verbs.Context
	owned   map[uint32]bool // devs the channel opened (and closes)
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
		ids: make(map[uint64]*ID), devs: make(map[uint32]*verbs.Context), owned: make(map[uint32]bool)}
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
	for {
		err := ch.fd.Do(ctx, func(fd int) error {
			return uverbs.UcmaWrite(fd, "GET_EVENT", uverbs.RDMA_USER_CM_CMD_GET_EVENT, &req, unsafe.Pointer(resp), unsafe.Sizeof(*resp))
		})
		if err != nil {
			if ctx.Err() == nil {
				ch.runErr = fmt.Errorf("cm: reading events: %w", err)
			} else {
				ch.runErr = ErrClosed
			}
			return
		}
		ch.dispatch(resp)
	}
}

func (ch *Channel) dispatch(r *uverbs.UcmEventResp) {
	ch.mu.Lock()
	id := ch.ids[r.Uid]
	ch.mu.Unlock()
	if id == nil {
		return // destroyed meanwhile: the kernel purges, but a race is possible
	}
	ev := decodeEvent(r, id.ps.datagram())
	ev.ID = id
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

// newID registers an ID the kernel knows as handle.
func (ch *Channel) newID(handle uint32, ps PortSpace) (*ID, error) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.closed {
		return nil, ErrClosed
	}
	ch.nextUID++
	id := &ID{ch: ch, handle: handle, uid: ch.nextUID, ps: ps, notify: make(chan struct{}, 1)}
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
	ch.nextUID++
	return ch.nextUID, nil
}

// device returns the verbs Context of the device with ibdev index idx,
// opening it the first time.
func (ch *Channel) device(idx uint32) (*verbs.Context, error) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.closed {
		return nil, ErrClosed
	}
	if c, ok := ch.devs[idx]; ok {
		return c, nil
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
			ch.devs[idx] = c
			ch.owned[idx] = true
			return c, nil
		}
	}
	return nil, fmt.Errorf("cm: the kernel bound the ID to device index %d, which is not listed: %w", idx, verbs.ErrNoDevice)
}

// AttachContext makes IDs of this channel that bind to c's device use c
// (instead of a context the channel opens itself), so that their QPs can
// share c's PDs, CQs and memory regions. The channel does not close c.
// Attach before binding or resolving IDs.
func (ch *Channel) AttachContext(c *verbs.Context) error {
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

// Close destroys every ID of the channel (and the QPs they own), stops the
// event reader, closes the fd and then the device contexts the channel
// opened (with everything created on them).
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
	devs := ch.devs
	owned := ch.owned
	ch.devs = nil
	ch.mu.Unlock()
	ch.stop()
	<-ch.done
	errs = append(errs, ch.fd.Close())
	for idx, c := range devs {
		if owned[idx] {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}
