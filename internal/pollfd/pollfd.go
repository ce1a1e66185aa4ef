// Package pollfd puts a kernel event fd (completion channel, async events,
// rdma_cm) on Go's netpoller, the way mdlayher/socket does: the fd is made
// non-blocking and wrapped in an *os.File, and reads go through
// syscall.RawConn so a waiting goroutine parks without holding an OS
// thread and obeys a context.
//
// Every read is attempted before waiting, so an event that arrived before
// the wait is never missed even though the netpoller is edge-triggered.
package pollfd

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// FD is a pollable file descriptor. Close closes it.
type FD struct {
	f      *os.File
	rc     syscall.RawConn
	closed atomic.Bool
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
	return &FD{f: f, rc: rc}, nil
}

// Raw runs fn with the descriptor number; for epoll users and for ioctls
// and writes on the same fd.
func (p *FD) Raw(fn func(fd int) error) error {
	var ferr error
	if err := p.rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
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

// TryRead reads once without waiting. It returns 0, nil when nothing is
// pending.
func (p *FD) TryRead(b []byte) (int, error) {
	var n int
	var rerr error
	err := p.rc.Read(func(fd uintptr) bool {
		n, rerr = unix.Read(int(fd), b)
		if rerr == unix.EAGAIN {
			n, rerr = 0, nil
		}
		return true
	})
	if err != nil {
		return 0, p.mapErr(err)
	}
	return n, rerr
}

// mapErr reports reads on a closed FD as os.ErrClosed.
func (p *FD) mapErr(err error) error {
	if p.closed.Load() {
		return os.ErrClosed
	}
	return err
}

// errDeadline is what a read interrupted through its deadline returns.
var errDeadline = os.ErrDeadlineExceeded

// Read reads once, waiting on the netpoller until data is there or ctx is
// done. It returns ctx.Err() when the context ends the wait.
func (p *FD) Read(ctx context.Context, b []byte) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	// Fast path: no wait needed.
	if n, err := p.TryRead(b); n > 0 || err != nil {
		return n, err
	}
	if done := ctx.Done(); done != nil {
		stop := context.AfterFunc(ctx, func() { p.f.SetReadDeadline(time.Unix(1, 0)) })
		defer func() {
			if !stop() {
				// The deadline was set (or is being set): clear it for the
				// next read.
				p.f.SetReadDeadline(time.Time{})
			}
		}()
	}
	var n int
	var rerr error
	err := p.rc.Read(func(fd uintptr) bool {
		n, rerr = unix.Read(int(fd), b)
		return rerr != unix.EAGAIN
	})
	if err != nil {
		if errors.Is(err, errDeadline) && ctx.Err() != nil {
			return 0, ctx.Err()
		}
		return 0, p.mapErr(err)
	}
	return n, rerr
}

// Close closes the descriptor; a goroutine blocked in Read returns
// os.ErrClosed.
func (p *FD) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	return p.f.Close()
}

// Do runs fn with the descriptor until it returns something other than
// EAGAIN, waiting on the netpoller for readability in between (for
// commands such as rdma_cm's GET_EVENT, a write that blocks until an event
// is readable). It returns ctx.Err() when ctx ends the wait.
func (p *FD) Do(ctx context.Context, fn func(fd int) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if done := ctx.Done(); done != nil {
		stop := context.AfterFunc(ctx, func() { p.f.SetReadDeadline(time.Unix(1, 0)) })
		defer func() {
			if !stop() {
				p.f.SetReadDeadline(time.Time{})
			}
		}()
	}
	for {
		var ferr error
		err := p.rc.Read(func(fd uintptr) bool {
			ferr = fn(int(fd))
			return !errors.Is(ferr, unix.EAGAIN)
		})
		if err == nil {
			return ferr
		}
		if !errors.Is(err, errDeadline) {
			return p.mapErr(err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// A deadline while ctx is live is a Kick: clear it and try
		// again. ctx.Err() is set before its AfterFunc sets the
		// deadline, so a cancellation racing with the clear is seen
		// here.
		p.f.SetReadDeadline(time.Time{})
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// Kick makes a goroutine waiting in Do run its function again now. It is
// for data that became readable without the kernel waking the file's
// waiters: rdma_cm's MIGRATE_ID moves an ID's pending events to another
// file silently, and an edge-triggered netpoller would wait for the next
// event forever. Use it only on an FD read with Do: a kick that finds
// nobody waiting leaves a deadline that only Do knows to clear.
func (p *FD) Kick() {
	p.f.SetReadDeadline(time.Unix(1, 0))
}
