package uverbs

import (
	"errors"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/uverbshook"
)

// FD owns a raw file descriptor: the uverbs device, an async-event or
// completion-channel fd, or the rdma_cm fd. It closes the descriptor once;
// a cleanup closes it if the FD becomes unreachable without Close, so a
// forgotten Close leaks no descriptor past the next garbage collection.
type FD struct {
	mu      sync.RWMutex
	raw     int
	cleanup runtime.Cleanup
	// noSignals: Use runs f with every signal blocked on its thread
	// (BlockSignalsInUse).
	noSignals atomic.Bool
	// fake answers for the kernel when a test installed one that owns
	// raw (internal/uverbshook); nil otherwise.
	fake uverbshook.Kernel
}

// NewFD takes ownership of raw.
func NewFD(raw int) *FD {
	fd := &FD{raw: raw, fake: uverbshook.For(raw)}
	fd.cleanup = runtime.AddCleanup(fd, func(raw int) { _ = unix.Close(raw) }, raw)
	return fd
}

// Int returns the raw descriptor, or -1 once closed.
func (fd *FD) Int() int {
	if fd == nil {
		return -1
	}
	fd.mu.RLock()
	defer fd.mu.RUnlock()
	return fd.raw
}

// Use runs f with the raw descriptor while holding a read lock, so Close
// cannot close (and the kernel cannot reuse) the number while f runs.
// It returns ErrClosed after Close.
func (fd *FD) Use(f func(raw int) error) error {
	if fd == nil {
		return ErrClosed
	}
	fd.mu.RLock()
	defer fd.mu.RUnlock()
	if fd.raw < 0 {
		return ErrClosed
	}
	if fd.noSignals.Load() {
		return withSignalsBlocked(fd.raw, f)
	}
	return f(fd.raw)
}

// BlockSignalsInUse makes every later Use run f with all signals blocked
// on the calling thread, for a device whose driver waits for the device's
// answer to a command interruptibly and reports an interrupted wait as a
// failed command although the device may still carry it out (vmw_pvrdma's
// pvrdma_cmd_recv returns ETIMEDOUT on -ERESTARTSYS). A Go program gets
// signals that a C program does not: the runtime preempts a goroutine
// with SIGURG, and one sent as the goroutine enters the system call
// interrupts the wait. A signal blocked meanwhile stays pending and is
// handled once Use restores the mask.
func (fd *FD) BlockSignalsInUse() { fd.noSignals.Store(true) }

// allSignals is the set of every signal (the kernel leaves SIGKILL and
// SIGSTOP unblocked). It is never written after init.
var allSignals = func() (s unix.Sigset_t) {
	for i := range s.Val {
		s.Val[i] = ^s.Val[i] // all ones, whatever the word size
	}
	return s
}()

// withSignalsBlocked runs f(raw) on a locked thread with every signal
// blocked, and restores the thread's mask after.
func withSignalsBlocked(raw int, f func(raw int) error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old unix.Sigset_t
	if err := unix.PthreadSigmask(unix.SIG_SETMASK, &allSignals, &old); err != nil { // the kernel only reads the set
		return wrap("rt_sigprocmask", err)
	}
	err := f(raw)
	if rerr := unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil); rerr != nil {
		// The thread would stay deaf to signals, so it must not run other
		// goroutines: one more lock than unlock keeps it wired to this
		// goroutine, and the runtime ends a thread still locked when its
		// goroutine exits.
		runtime.LockOSThread()
		return errors.Join(err, wrap("rt_sigprocmask", rerr))
	}
	return err
}

// Close closes the descriptor. Closing twice is not an error.
func (fd *FD) Close() error {
	if fd == nil {
		return nil
	}
	fd.mu.Lock()
	defer fd.mu.Unlock()
	if fd.raw < 0 {
		return nil
	}
	fd.cleanup.Stop()
	err := unix.Close(fd.raw)
	fd.raw = -1
	return wrap("close", err)
}

func (fd *FD) String() string { return "fd " + strconv.Itoa(fd.Int()) }
