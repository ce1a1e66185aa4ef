// Package pollfd puts a kernel event fd (completion channel, async events,
// rdma_cm) on Go's netpoller, the way mdlayher/socket does: the fd is made
// non-blocking and wrapped in an *os.File, and reads go through
// syscall.RawConn so a waiting goroutine parks without holding an OS
// thread and obeys a context.
//
// Every read is attempted before waiting, so an event that arrived before
// the wait is never missed even though the netpoller is edge-triggered.
//
// A context ends a wait through the file's read deadline. The
// registration that sets it (context.AfterFunc) is kept for the next wait
// with the same context, so a loop that waits again and again with one
// long-lived context allocates nothing after its first wait.
package pollfd

import (
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/uverbs"
)

// ErrClosed is what every operation on a closed FD returns, including a
// wait that Close interrupts. errors.Is matches it with uverbs.ErrClosed
// (which is verbs.ErrClosed, goverbs' one sentinel for closed objects)
// and with os.ErrClosed.
var ErrClosed error = closedError{}

type closedError struct{}

func (closedError) Error() string { return "use of closed file" }

func (closedError) Is(target error) bool { return target == uverbs.ErrClosed || target == os.ErrClosed }

// FD is a pollable file descriptor. Close closes it. One goroutine at a
// time waits on it (Read, TryRead and Do are serialized).
type FD struct {
	f      *os.File
	rc     syscall.RawConn
	closed atomic.Bool

	// Read, TryRead and Do hold opMu. What they hand to the RawConn is
	// built once in New from the fields below, so that a wait allocates
	// nothing.
	opMu    sync.Mutex
	fn      func(fd int) error // Do's function
	ferr    error              // its last result
	rbuf    []byte             // Read's and TryRead's buffer (scratch)
	rn      int
	rerr    error
	doOnce  func(fd uintptr) bool // runs fn once
	doRetry func(fd uintptr) bool // runs fn, asks to wait on EAGAIN
	readFn  func(fd int) error    // reads into rbuf

	mu   sync.Mutex
	regs []*watch // contexts whose end sets the read deadline
}

// watch is a context registered to interrupt waits on the FD.
type watch struct {
	done  <-chan struct{}
	stop  func() bool
	users int
}

// New takes ownership of raw, sets it non-blocking and registers it with
// the netpoller.
func New(raw int, name string) (*FD, error) {
	if err := unix.SetNonblock(raw, true); err != nil {
		unix.Close(raw)
		return nil, err
	}
	f := os.NewFile(uintptr(raw), name)
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	p := &FD{f: f, rc: rc}
	p.doOnce = func(fd uintptr) bool {
		p.ferr = p.fn(int(fd))
		return true
	}
	p.doRetry = func(fd uintptr) bool {
		p.ferr = p.fn(int(fd))
		return !errors.Is(p.ferr, unix.EAGAIN)
	}
	p.readFn = func(fd int) error {
		p.rn, p.rerr = unix.Read(fd, p.rbuf)
		if p.rerr == unix.EAGAIN {
			return unix.EAGAIN
		}
		return nil
	}
	return p, nil
}

// Raw runs fn with the descriptor number; for epoll users and for ioctls
// and writes on the same fd. It does not wait for Read or Do. The
// descriptor stays open while fn runs. On a closed FD fn does not run and
// Raw returns ErrClosed.
func (p *FD) Raw(fn func(fd int) error) error {
	var ferr error
	if err := p.rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return p.mapErr(err)
	}
	return ferr
}

// Int returns the descriptor number (for epoll users), or -1 once closed.
// The number is only valid until Close.
func (p *FD) Int() int {
	n := -1
	p.rc.Control(func(fd uintptr) { n = int(fd) })
	return n
}

// setBuf points the read functions at scratch space of n bytes. The
// caller holds opMu.
func (p *FD) setBuf(n int) {
	if cap(p.rbuf) < n {
		p.rbuf = make([]byte, n)
	}
	p.rbuf = p.rbuf[:n]
}

// TryRead reads once without waiting. It returns 0, nil when nothing is
// pending.
func (p *FD) TryRead(b []byte) (int, error) {
	p.opMu.Lock()
	defer p.opMu.Unlock()
	p.setBuf(len(b))
	p.fn = p.readFn
	for {
		err := p.rc.Read(p.doOnce)
		if err == nil {
			break
		}
		if !errors.Is(err, errDeadline) {
			return 0, p.mapErr(err)
		}
		// A deadline left by a Kick or by the end of a registered
		// context: TryRead does not wait, so it is not for this read. It
		// may be for Read's wait that follows, whose context ended just
		// now; do looks at that context again before it parks.
		p.f.SetReadDeadline(time.Time{})
	}
	if p.ferr != nil { // EAGAIN: nothing pending
		return 0, nil
	}
	return p.copyOut(b)
}

// copyOut returns the result of the last read into rbuf.
func (p *FD) copyOut(b []byte) (int, error) {
	if p.rerr != nil || p.rn < 0 {
		return 0, p.rerr
	}
	return copy(b, p.rbuf[:p.rn]), nil
}

// mapErr reports any failure of a closed FD as ErrClosed.
func (p *FD) mapErr(err error) error {
	if p.closed.Load() {
		return ErrClosed
	}
	return err
}

// errDeadline is what a read interrupted through its deadline returns.
var errDeadline = os.ErrDeadlineExceeded

// Read reads once, waiting on the netpoller until data is there or ctx is
// done. It returns ctx.Err() when the context ends the wait, ErrClosed
// when Close does.
func (p *FD) Read(ctx context.Context, b []byte) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	// Fast path: no wait needed.
	if n, err := p.TryRead(b); n > 0 || err != nil {
		return n, err
	}
	p.opMu.Lock()
	defer p.opMu.Unlock()
	p.setBuf(len(b))
	if err := p.do(ctx, p.readFn); err != nil {
		return 0, err
	}
	return p.copyOut(b)
}

// Close closes the descriptor; a goroutine waiting in Read or Do returns
// ErrClosed.
func (p *FD) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	p.mu.Lock()
	for _, w := range p.regs {
		w.stop()
	}
	p.regs = nil
	p.mu.Unlock()
	return p.f.Close()
}

// Do runs fn with the descriptor until it returns something other than
// EAGAIN, waiting on the netpoller for readability in between (for
// commands such as rdma_cm's GET_EVENT, a write that blocks until an event
// is readable). It returns ctx.Err() when ctx ends the wait, ErrClosed
// when Close does. A waiting Do allocates nothing once ctx is registered
// (see the package comment) if fn is allocated once, outside the loop
// that calls Do.
func (p *FD) Do(ctx context.Context, fn func(fd int) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p.opMu.Lock()
	defer p.opMu.Unlock()
	return p.do(ctx, fn)
}

// do is Do; the caller holds opMu.
func (p *FD) do(ctx context.Context, fn func(fd int) error) error {
	w := p.watch(ctx)
	defer p.unwatch(w)
	// ctx may have ended since the caller looked, and the deadline its
	// end set may be gone already: Read's TryRead clears a deadline it
	// finds, taking it for a stale one. With w registered, an end from
	// here on sets the deadline again, so looking once more suffices.
	if err := ctx.Err(); err != nil {
		return err
	}
	p.fn = fn
	defer func() { p.fn = nil }()
	for {
		err := p.rc.Read(p.doRetry)
		if err == nil {
			return p.ferr
		}
		if !errors.Is(err, errDeadline) {
			return p.mapErr(err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// A deadline while ctx is live is a Kick, or was set by the end
		// of a context registered for an earlier wait: clear it and try
		// again. ctx.Err() is set before its AfterFunc sets the
		// deadline, so a cancellation racing with the clear is seen
		// here.
		p.f.SetReadDeadline(time.Time{})
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// maxIdle is how many registered contexts no wait uses are kept.
const maxIdle = 4

// watch makes the end of ctx interrupt waits on the FD, reusing the
// registration of an earlier wait with the same context.
func (p *FD) watch(ctx context.Context) *watch {
	done := ctx.Done()
	if done == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range p.regs {
		if w.done == done {
			w.users++
			return w
		}
	}
	w := &watch{done: done, users: 1}
	w.stop = context.AfterFunc(ctx, func() { p.expire(w) })
	p.regs = append(p.regs, w)
	return w
}

// expire interrupts the current wait, if w is still registered.
func (p *FD) expire(w *watch) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.regs {
		if r == w {
			p.f.SetReadDeadline(time.Unix(1, 0))
			return
		}
	}
}

// unwatch ends a wait's use of w. w stays registered for the next wait,
// with at most maxIdle-1 other unused registrations (the oldest go).
func (p *FD) unwatch(w *watch) {
	if w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	w.users--
	idle := 0
	for _, r := range p.regs {
		if r.users == 0 {
			idle++
		}
	}
	keep := p.regs[:0]
	for _, r := range p.regs {
		if r.users == 0 && r != w && idle > maxIdle {
			r.stop()
			idle--
			continue
		}
		keep = append(keep, r)
	}
	clear(p.regs[len(keep):])
	p.regs = keep
}

// Kick makes a goroutine waiting in Do run its function again now. It is
// for data that became readable without the kernel waking the file's
// waiters: rdma_cm's MIGRATE_ID moves an ID's pending events to another
// file silently, and an edge-triggered netpoller would wait for the next
// event forever. A kick that finds nobody waiting makes the next wait
// look once more before it parks.
func (p *FD) Kick() {
	p.f.SetReadDeadline(time.Unix(1, 0))
}
