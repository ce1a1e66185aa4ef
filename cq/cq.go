// Package cq implements completion queues: where the device reports
// finished work requests.
//
// Poll copies completions into a caller's slice, oldest first, straight
// from the queue the kernel shares with the process: no system call, no
// allocation, never blocking.
//
//	wc := make([]verbs.WorkCompletion, 16)
//	for {
//		n, err := c.Poll(wc)
//		...
//		for _, w := range wc[:n] {
//			if err := w.Err(); err != nil {
//				// only WRID, Status, QPNum and VendorErr are valid here
//			}
//		}
//	}
//
// WorkCompletion.Err turns the status check into an error check (nil on
// success). To wait, Next returns the next completion, or PollWait the
// next batch, with one error for the wait and the completion together:
//
//	wc, err := c.Next(ctx) // ctx's error, or the completion's *verbs.WCError
//
// To sleep instead of spinning, bind the CQ to a completion channel
// (Options.Channel): Next and PollWait then use Wait, which arms the CQ,
// re-polls to close the race with completions that arrived before arming,
// and parks on Go's netpoller until the channel fires or the context
// ends.
package cq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/goverbs/goverbs/internal/kobj"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/uverbs"
	"github.com/goverbs/goverbs/verbs"
)

// Options configure a new CQ.
type Options struct {
	// CQE is the least number of completions the CQ must hold; the
	// provider may round it up (CQ.CQE reports the real capacity).
	CQE int
	// CompVector selects the completion vector, below
	// Context.NumCompVectors.
	CompVector int
	// Channel, if set, receives an event each time the armed CQ gets a
	// completion.
	Channel *verbs.CompChannel
}

// CQ is a completion queue. Poll may run concurrently with posting on the
// QPs that use the CQ; concurrent Polls of one CQ are serialized.
type CQ struct {
	ctx    *verbs.Context
	ch     *verbs.CompChannel
	handle uint32
	track  uint64

	mu sync.Mutex // guards cqe and closed, and the ring against Resize/Close
	// ring is the provider's CQ (package internal/provider), made by the
	// context's provider at creation.
	ring provider.CQ
	// ready is ring's emptiness test (ring.Ready), read under pollLock.
	ready *provider.Ready
	// bad reports CQEs the provider could not turn into completions
	// (provider.BadCQEs), or is nil.
	bad provider.BadCQEs
	// pollLock is Poll's one lock and close guard: Resize holds it across
	// RESIZE_CQ and the ring's switch, Close closes it.
	pollLock provider.Lock
	cqe      int
	closed   bool

	events atomic.Uint64 // completion events received

	// Wait's context: the caller's, ended also by Close, kept for the
	// next Wait with the same caller's context (so waits allocate
	// nothing). Guarded by waitMu.
	waitMu     sync.Mutex
	closing    context.Context // done once Close has destroyed the CQ
	endWaits   context.CancelFunc
	waitParent <-chan struct{} // Done of the caller's context
	waitCtx    context.Context
	waitEnd    func()
}

func init() { kobj.CleanCQ = func(c any, q provider.QP) { c.(*CQ).clean(q) } }

// clean removes the provider QP q's completions from the ring, if the
// provider keeps them in user memory (provider.CQCleaner), holding the
// poll lock so that no Poll runs meanwhile. A closed CQ has nothing left
// to clean.
func (c *CQ) clean(q provider.QP) {
	cl, ok := c.ring.(provider.CQCleaner)
	if !ok || !c.pollLock.Lock() {
		return
	}
	defer c.pollLock.Unlock()
	cl.Clean(q)
}

// ErrBadCQE is returned for a capacity outside what the device supports.
var ErrBadCQE = errors.New("CQ size out of range")

// New creates a completion queue on the device context dev.
func New(dev *verbs.Context, opts Options) (*CQ, error) {
	if opts.CQE < 1 {
		return nil, fmt.Errorf("cq: create with %d entries: %w", opts.CQE, ErrBadCQE)
	}
	if opts.CompVector < 0 || opts.CompVector >= max(dev.NumCompVectors(), 1) {
		return nil, fmt.Errorf("cq: completion vector %d: the device has %d", opts.CompVector, dev.NumCompVectors())
	}
	if opts.Channel != nil && opts.Channel.Context() != dev {
		return nil, errors.New("cq: completion channel belongs to another context")
	}
	c := &CQ{ctx: dev, ch: opts.Channel}
	c.closing, c.endWaits = context.WithCancel(context.Background())
	track, err := kobj.ContextOf(dev).Track(kobj.KindCQ, c)
	if err != nil {
		return nil, fmt.Errorf("cq: create: %w", err)
	}
	c.track = track
	if err := c.create(opts); err != nil {
		kobj.ContextOf(dev).Untrack(track)
		return nil, err
	}
	return c, nil
}

func (c *CQ) create(opts Options) error {
	ring, err := kobj.ContextOf(c.ctx).Provider.NewCQ(opts.CQE)
	if err != nil {
		return fmt.Errorf("cq: create with %d entries: %w", opts.CQE, err)
	}
	var respCQE uint32
	var r uverbs.Ioctl
	r.Init("CQ.CREATE", uverbs.UVERBS_OBJECT_CQ, uverbs.UVERBS_METHOD_CQ_CREATE, kobj.ContextOf(c.ctx).Driver)
	h := r.NewHandle(uverbs.UVERBS_ATTR_CREATE_CQ_HANDLE)
	r.Out(uverbs.UVERBS_ATTR_CREATE_CQ_RESP_CQE, unsafe.Pointer(&respCQE), 4)
	r.U32(uverbs.UVERBS_ATTR_CREATE_CQ_CQE, uint32(min(opts.CQE, 1<<31-1)))
	r.U64(uverbs.UVERBS_ATTR_CREATE_CQ_USER_HANDLE, c.track)
	r.U32(uverbs.UVERBS_ATTR_CREATE_CQ_COMP_VECTOR, uint32(opts.CompVector))
	r.Optional(r.FD(uverbs.UVERBS_ATTR_CREATE_CQ_EVENT_FD, c.ctx.AsyncFD()))
	ring.Udata().Add(&r)
	do := func() error { return kobj.ContextOf(c.ctx).Do(&r) }
	if c.ch != nil {
		// Hold the channel's fd number steady across the call.
		do = func() error {
			return kobj.ChannelOf(c.ch).FD.Raw(func(fd int) error {
				r.FD(uverbs.UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL, fd)
				return kobj.ContextOf(c.ctx).Do(&r)
			})
		}
	}
	if err := do(); err != nil {
		ring.Release()
		if errors.Is(err, uverbs.ErrClosed) {
			return fmt.Errorf("cq: create: %w", verbs.ErrClosed)
		}
		return fmt.Errorf("cq: create with %d entries: %w", opts.CQE, err)
	}
	c.handle = uint32(r.Data(h))
	if err := ring.Start(respCQE); err != nil {
		c.destroy()
		ring.Release()
		return fmt.Errorf("cq: %w", err)
	}
	c.ring = ring
	c.ready = ring.Ready()
	c.bad, _ = ring.(provider.BadCQEs)
	c.cqe = int(respCQE)
	return nil
}

// Context returns the context of the CQ.
func (c *CQ) Context() *verbs.Context { return c.ctx }

// Handle is the kernel handle of the CQ.
func (c *CQ) Handle() uint32 { return c.handle }

// UserHandle is the value the kernel reports for this CQ in completion and
// async events.
func (c *CQ) UserHandle() uint64 { return c.track }

// Channel returns the completion channel the CQ is bound to, or nil.
func (c *CQ) Channel() *verbs.CompChannel { return c.ch }

// CQE is the capacity of the CQ: how many completions it holds before the
// device overruns it (an EventCQErr async event).
func (c *CQ) CQE() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cqe
}

// Poll moves up to len(wc) completions, oldest first, into wc and returns
// how many. It never blocks and never allocates; 0 means the CQ is empty.
// A completion entry the provider cannot attribute to a work request (a
// hardware CQ's entry naming no QP of the context) is consumed and ends
// the poll with an error matching verbs.ErrBadCompletion, after the
// completions before it.
// For a completion whose Status is not WCSuccess only WRID, Status, QPNum
// and VendorErr are valid.
func (c *CQ) Poll(wc []verbs.WorkCompletion) (int, error) {
	// One compare-and-swap to lock (refused once closed), one release
	// store of the consumer index when something was polled, one release
	// store to unlock: on amd64 only the first is a locked instruction.
	if !c.pollLock.Lock() {
		return 0, verbs.ErrClosed
	}
	// An empty CQ answers from the provider's emptiness test, one load;
	// otherwise one interface call into the provider, where View keeps wc
	// off the heap (see package internal/provider).
	if !c.ready.Pending() {
		c.pollLock.Unlock()
		return 0, nil
	}
	n := c.ring.Poll(provider.View[provider.WC](wc))
	if n < len(wc) && c.bad != nil {
		if k, what := c.bad.BadCQE(); k > 0 {
			c.pollLock.Unlock()
			return n, fmt.Errorf("cq: poll: %d bad completion entries (the last: %s): %w", k, what, verbs.ErrBadCompletion)
		}
	}
	c.pollLock.Unlock()
	return n, nil
}

// Queued returns how many completions are waiting to be polled.
func (c *CQ) Queued() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0
	}
	return c.ring.Queued()
}

// Pending reports whether completions are waiting to be polled.
func (c *CQ) Pending() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.closed && c.ring.Pending()
}

// ReqNotify arms the CQ: the next completion (with solicitedOnly, the next
// solicited or error completion) queues one event on the CQ's channel.
// Arming is one-shot; re-arm after each event.
func (c *CQ) ReqNotify(solicitedOnly bool) error {
	if c.ch == nil {
		return errors.New("cq: ReqNotify: the CQ has no completion channel")
	}
	req := uverbs.ReqNotifyCq{Cq_handle: c.handle}
	if solicitedOnly {
		req.Solicited_only = 1
	}
	// The provider arms the CQ, or says the kernel must (rxe's
	// REQ_NOTIFY_CQ; siw stores to a mapped control word, a hardware
	// provider rings a doorbell).
	c.mu.Lock()
	closed := c.closed
	kernel := !closed && c.ring.Arm(solicitedOnly)
	c.mu.Unlock()
	if closed {
		return verbs.ErrClosed
	}
	if !kernel {
		return nil
	}
	return uverbs.Write(kobj.ContextOf(c.ctx).FD, "REQ_NOTIFY_CQ", uverbs.IB_USER_VERBS_CMD_REQ_NOTIFY_CQ, &req, nil, 0)
}

// Events returns how many completion events the channel delivered for this
// CQ. Every event read is acknowledged by counting it here, so destroying
// the CQ never waits.
func (c *CQ) Events() uint64 { return c.events.Load() }

// Wait blocks until the CQ has a completion to poll, or ctx ends, or the
// CQ is closed (ErrClosed). It arms the CQ, returns at once if
// completions are already queued (closing the race with completions that
// arrived before arming), and otherwise waits on the channel. Events it
// reads for other CQs sharing the channel stay queued on the channel, in
// order, for their Wait or for WaitChannel. Wait from one goroutine per
// channel: the kernel hands each event to whichever reader comes first.
// Waits that reuse one context allocate nothing after the first.
func (c *CQ) Wait(ctx context.Context) error {
	if c.ch == nil {
		return errors.New("cq: wait: the CQ has no completion channel")
	}
	wctx := c.waitContext(ctx)
	mine := func(h uint64) bool { return h == c.track }
	for {
		if _, ok := kobj.ChannelOf(c.ch).Take(mine); ok {
			return nil
		}
		if err := c.ReqNotify(false); err != nil {
			return err
		}
		if c.Pending() {
			return nil
		}
		if err := readEvents(wctx, c.ch); err != nil {
			if c.closing.Err() != nil {
				return fmt.Errorf("cq: wait: %w", verbs.ErrClosed)
			}
			return err
		}
	}
}

// waitContext returns a context that ends when ctx does or when Close
// destroys the CQ, reusing the one made for the previous Wait if it had
// the same ctx.
func (c *CQ) waitContext(ctx context.Context) context.Context {
	c.waitMu.Lock()
	defer c.waitMu.Unlock()
	if c.waitCtx != nil && c.waitParent == ctx.Done() {
		return c.waitCtx
	}
	if c.waitEnd != nil {
		c.waitEnd()
	}
	wctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(c.closing, cancel)
	c.waitCtx, c.waitParent = wctx, ctx.Done()
	c.waitEnd = func() { stop(); cancel() }
	return wctx
}

// readEvents blocks until the channel has events, drains them, counts
// each on its CQ (received and acknowledged) and queues them on the
// channel in arrival order.
func readEvents(ctx context.Context, ch *verbs.CompChannel) error {
	var handles [16]uint64
	n, err := kobj.ChannelOf(ch).Wait(ctx, handles[:])
	if err != nil {
		return fmt.Errorf("cq: wait: %w", err)
	}
	for _, h := range handles[:n] {
		if c, ok := kobj.ContextOf(ch.Context()).Object(h).(*CQ); ok { // else destroyed meanwhile
			c.events.Add(1)
			c.ring.Event()
			kobj.ChannelOf(ch).Stash(h)
		}
	}
	return nil
}

// WaitChannel returns the CQ named by the oldest completion event of ch,
// which several CQs may share, waiting for one if none is queued. Arm
// each CQ with ReqNotify before waiting, and re-arm a returned CQ before
// polling it dry, or its next completion notifies nobody.
func WaitChannel(ctx context.Context, ch *verbs.CompChannel) (*CQ, error) {
	if ch == nil {
		return nil, errors.New("cq: wait: no completion channel")
	}
	any := func(uint64) bool { return true }
	for {
		for {
			h, ok := kobj.ChannelOf(ch).Take(any)
			if !ok {
				break
			}
			if c, ok := kobj.ContextOf(ch.Context()).Object(h).(*CQ); ok {
				return c, nil
			}
		}
		if err := readEvents(ctx, ch); err != nil {
			return nil, err
		}
	}
}

// Resize changes the capacity of the CQ to at least cqe. Completions not
// yet polled are kept; the kernel refuses (EINVAL) a size they do not fit.
func (c *CQ) Resize(cqe int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return verbs.ErrClosed
	}
	if cqe < 1 {
		return fmt.Errorf("cq: resize to %d: %w", cqe, ErrBadCQE)
	}
	if !c.ring.CanResize() {
		// siw has no RESIZE_CQ (the kernel driver has no resize_cq).
		return fmt.Errorf("cq: resize to %d: %w", cqe, verbs.ErrNotCapable)
	}
	// No Poll from here to the switch: the kernel copies the completions
	// between the consumer and producer indices of the old ring into the
	// new one (or the provider does), so a completion polled from the old
	// ring meanwhile would be delivered twice (rdma-core holds the CQ's
	// lock the same way).
	if !c.pollLock.Lock() {
		return verbs.ErrClosed
	}
	defer c.pollLock.Unlock()
	err := c.ring.Resize(cqe, func(u provider.Udata) error {
		req := uverbs.ResizeCq{Handle: c.handle, Cqe: uint32(min(cqe, 1<<31-1))}
		var resp uverbs.ResizeCqResp
		var r uverbs.Ioctl
		r.InitInvokeWrite("RESIZE_CQ", uverbs.IB_USER_VERBS_CMD_RESIZE_CQ, kobj.ContextOf(c.ctx).Driver)
		r.In(uverbs.UVERBS_ATTR_CORE_IN, unsafe.Pointer(&req), unsafe.Sizeof(req))
		r.Out(uverbs.UVERBS_ATTR_CORE_OUT, unsafe.Pointer(&resp), unsafe.Sizeof(resp))
		u.Add(&r)
		if err := kobj.ContextOf(c.ctx).Do(&r); err != nil {
			return err
		}
		c.cqe = int(resp.Cqe)
		return nil
	})
	if err != nil {
		return fmt.Errorf("cq: resize to %d: %w", cqe, err)
	}
	return nil
}

func (c *CQ) destroy() (uverbs.DestroyCqResp, error) {
	var resp uverbs.DestroyCqResp
	var r uverbs.Ioctl
	r.Init("CQ.DESTROY", uverbs.UVERBS_OBJECT_CQ, uverbs.UVERBS_METHOD_CQ_DESTROY, kobj.ContextOf(c.ctx).Driver)
	r.Handle(uverbs.UVERBS_ATTR_DESTROY_CQ_HANDLE, c.handle)
	r.Out(uverbs.UVERBS_ATTR_DESTROY_CQ_RESP, unsafe.Pointer(&resp), unsafe.Sizeof(resp))
	return resp, kobj.ContextOf(c.ctx).Do(&r)
}

// Close destroys the CQ and unmaps its ring. The kernel refuses (EBUSY)
// while QPs or SRQs still use the CQ; it then stays open.
func (c *CQ) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	if _, err := c.destroy(); err != nil {
		return fmt.Errorf("cq: destroy: %w", err)
	}
	c.closed = true
	kobj.ContextOf(c.ctx).Untrack(c.track)
	c.endWaits() // a goroutine in Wait returns ErrClosed
	c.waitMu.Lock()
	if c.waitEnd != nil {
		c.waitEnd()
		c.waitCtx, c.waitEnd = nil, nil
	}
	c.waitMu.Unlock()
	if c.pollLock.Lock() { // wait for a Poll in progress; refuse later ones
		c.pollLock.CloseUnlock()
	}
	return c.ring.Release()
}
