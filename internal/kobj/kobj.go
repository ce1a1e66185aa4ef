// Package kobj is the plumbing between package verbs and the packages that
// create kernel objects on a verbs.Context (cq, qp, srq, mr) or use its
// objects (rpma): the uverbs descriptor, the context's provider (package
// internal/provider), the table of live objects that Context.Close tears
// down, the completion channel's descriptor and its unclaimed events, and
// the checks a child object makes on its parent.
//
// It is internal so that the public API hands out no way around an
// object's lifecycle: applications get descriptor numbers (for epoll) and
// kernel handles at most, never a raw ioctl on a Context's descriptor.
//
// Package verbs imports this package, so this package cannot name verbs'
// types. verbs installs the accessors below in its init function; they take
// verbs' own pointers (*verbs.Context, *verbs.CompChannel, *verbs.PD,
// *verbs.AH) as interface values, which costs no allocation, and anything
// else panics: they are for this module's packages only. The state behind
// them (Context, Channel) is typed, so callers call its methods directly.
package kobj

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/pollfd"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/uverbs"
)

// Accessors installed by package verbs in its init function.
var (
	// ContextOf returns the plumbing of a *verbs.Context.
	ContextOf func(ctx any) *Context
	// ChannelOf returns the plumbing of a *verbs.CompChannel.
	ChannelOf func(ch any) *Channel
	// CheckPD returns uverbs.ErrClosed once the *verbs.PD pd is closed;
	// packages call it before creating objects in the PD.
	CheckPD func(pd any) error
	// AH returns the provider's part of the *verbs.AH ah (what UD work
	// requests carry: rxe's ah_num), or uverbs.ErrClosed once the AH is
	// closed.
	AH func(ah any) (provider.AH, error)
	// PostErrors returns the error table of the post operation op ("qp:
	// post send"), whose errors are *verbs.PostError values wrapping
	// verbs' sentinels.
	PostErrors func(op string) *provider.Errors
)

// SRQOf returns the provider's SRQ of the *srq.SRQ s (provider.QPAttr's
// SharedRQ). Package srq installs it in its init function.
var SRQOf func(s any) provider.SRQ

// CleanCQ removes the completions of the provider QP qp from the *cq.CQ
// cq, under its poll lock, if its provider keeps them in user memory
// (provider.CQCleaner); package qp calls it after destroying a QP and
// after moving one to RESET. Package cq installs it in its init function.
var CleanCQ func(cq any, qp provider.QP)

// Kind orders the teardown of a Context's objects: lower kinds are
// destroyed first.
type Kind int

// Object kinds in teardown order. Memory windows go first: a bound type 2
// window holds a reference to the QP it was bound through.
const (
	KindMW Kind = iota
	KindQP
	KindSRQ
	KindCQ
	KindCompChannel
	KindAH
	KindMR
	KindPD
)

// Window is the part of a memory window (mr.MW) a QP needs: rxe keeps a
// QP alive while a type 2 window is bound through it, so a QP releases such
// windows before it is destroyed.
type Window interface {
	io.Closer
	// Posted records that a bind (bind true) or an invalidation of the
	// window was posted on the QP numbered qpn, and reports whether the
	// window now holds that QP.
	Posted(bind bool, qpn uint32) bool
	// HeldQP returns the number of the QP the window holds, if any.
	HeldQP() (qpn uint32, ok bool)
}

// Context is the plumbing of a verbs.Context. It is safe for concurrent
// use.
type Context struct {
	// FD is the uverbs descriptor: ioctls, write commands, mmaps of the
	// provider's rings.
	FD *uverbs.FD
	// Driver is the device's driver id, which every ioctl header carries.
	Driver uint32
	// Provider is the context's provider (its ops table), chosen from
	// Driver when the context was opened.
	Provider provider.Context

	mu      sync.Mutex
	closed  bool
	next    uint64
	objects map[uint64]entry

	wmu     sync.Mutex
	windows map[uint32]Window // by rkey index (rkey >> 8)
}

type entry struct {
	kind Kind
	obj  io.Closer
	shut func() // refuses later posts and waits for those in progress; nil if the object does not post
}

// Do issues an ioctl on the context's descriptor; once the Context is
// closed the descriptor refuses with uverbs.ErrClosed.
func (c *Context) Do(r *uverbs.Ioctl) error { return r.Do(c.FD) }

// Track registers an object the context owns, so that Close can destroy
// it, and returns a non-zero handle unique within the context. Objects pass
// the handle to the kernel as their user_handle; the kernel echoes it in
// completion and async events, and Object maps it back. It fails with
// uverbs.ErrClosed once Close has begun.
func (c *Context) Track(kind Kind, obj io.Closer) (uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, uverbs.ErrClosed
	}
	if c.objects == nil {
		c.objects = make(map[uint64]entry)
	}
	c.next++
	c.objects[c.next] = entry{kind: kind, obj: obj}
	return c.next, nil
}

// SetShut registers shut for the object tracked under handle: a function
// that refuses the object's later posts (they fail with ErrClosed) and
// waits for those in progress. Close calls every registered shut before it
// returns the objects to destroy, so that a post racing a Context's
// teardown ends with ErrClosed rather than with the error a QP gives once
// its peer, destroyed a moment earlier on the same context, dropped the
// connection (siw: ENOTCONN).
func (c *Context) SetShut(handle uint64, shut func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.objects[handle]; ok {
		e.shut = shut
		c.objects[handle] = e
	}
}

// Untrack removes an object registered with Track; objects call it from
// their Close.
func (c *Context) Untrack(handle uint64) {
	c.mu.Lock()
	delete(c.objects, handle)
	c.mu.Unlock()
}

// Object returns the object registered under handle, or nil.
func (c *Context) Object(handle uint64) io.Closer {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.objects[handle].obj
}

// Count counts the objects of kind still open on the context.
func (c *Context) Count(kind Kind) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, e := range c.objects {
		if e.kind == kind {
			n++
		}
	}
	return n
}

// Closed reports whether Close has begun.
func (c *Context) Closed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// Close marks the context closed, so Track refuses from now on, shuts
// posting on every object that registered a shut (SetShut), and returns
// the objects still open in teardown order, for the caller to close. A
// second call returns ok false.
func (c *Context) Close() (objs []io.Closer, ok bool) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, false
	}
	c.closed = true
	es := make([]entry, 0, len(c.objects))
	for _, e := range c.objects {
		es = append(es, e)
	}
	c.mu.Unlock()
	for _, e := range es {
		if e.shut != nil {
			e.shut()
		}
	}
	slices.SortStableFunc(es, func(a, b entry) int { return int(a.kind - b.kind) })
	objs = make([]io.Closer, len(es))
	for i, e := range es {
		objs[i] = e.obj
	}
	return objs, true
}

// AddWindow registers a memory window under its rkey, so that a QP
// posting a bind or an invalidation of that rkey can tell the window.
// Only the rkey's index (its high 24 bits) counts: binds change the key
// byte.
func (c *Context) AddWindow(rkey uint32, w Window) {
	c.wmu.Lock()
	if c.windows == nil {
		c.windows = make(map[uint32]Window)
	}
	c.windows[rkey>>8] = w
	c.wmu.Unlock()
}

// RemoveWindow undoes AddWindow for the window w.
func (c *Context) RemoveWindow(rkey uint32, w Window) {
	c.wmu.Lock()
	if c.windows[rkey>>8] == w {
		delete(c.windows, rkey>>8)
	}
	c.wmu.Unlock()
}

// Window returns the memory window registered under rkey's index, or nil.
func (c *Context) Window(rkey uint32) Window {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.windows[rkey>>8]
}

// Channel is the plumbing of a verbs.CompChannel: its descriptor and the
// CQ handles of events read from it but not yet claimed.
type Channel struct {
	// FD is the channel's descriptor; CREATE_CQ binds CQs to its number.
	FD *pollfd.FD

	mu      sync.Mutex
	pending []uint64 // oldest first
}

// Stash queues CQ handles of events read from the channel but not yet
// claimed; Take hands them out oldest first. The cq package uses them so
// that waiting for one CQ never loses or reorders another CQ's events.
func (ch *Channel) Stash(handles ...uint64) {
	ch.mu.Lock()
	ch.pending = append(ch.pending, handles...)
	ch.mu.Unlock()
}

// Take removes and returns the oldest stashed handle for which match
// returns true.
func (ch *Channel) Take(match func(handle uint64) bool) (uint64, bool) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	for i, h := range ch.pending {
		if match(h) {
			ch.pending = append(ch.pending[:i], ch.pending[i+1:]...)
			return h, true
		}
	}
	return 0, false
}

// Wait blocks until at least one completion event is queued, then reads
// events until the fd is drained or handles is full, storing the user
// handle of each event's CQ (the handle Context.Track returned for it). It
// returns how many it stored, or ctx.Err() when ctx ends the wait.
//
// Each event is one notification of an armed CQ: re-arm the CQ (ReqNotify)
// before polling it again, or completions that arrive meanwhile notify
// nobody. Reading drains the fd completely unless handles fills up, so
// nothing is left behind for an edge-triggered poller to miss.
func (ch *Channel) Wait(ctx context.Context, handles []uint64) (int, error) {
	if len(handles) == 0 {
		// A closed channel says so first, whatever the arguments.
		if err := ch.FD.Raw(func(int) error { return nil }); err != nil {
			return 0, fmt.Errorf("completion channel wait: %w", err)
		}
		return 0, fmt.Errorf("completion channel wait: no room for events: %w", unix.EINVAL)
	}
	var d uverbs.CompEventDesc
	buf := unsafe.Slice((*byte)(unsafe.Pointer(&d)), unsafe.Sizeof(d))
	n, err := ch.FD.Read(ctx, buf)
	if err != nil {
		return 0, fmt.Errorf("completion channel wait: %w", err)
	}
	count := 0
	for n == len(buf) {
		handles[count] = d.Handle
		count++
		if count == len(handles) {
			break
		}
		if n, err = ch.FD.TryRead(buf); err != nil {
			return count, fmt.Errorf("completion channel read: %w", err)
		}
	}
	return count, nil
}
