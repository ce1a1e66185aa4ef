package uverbs

import (
	"runtime"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// FD owns a raw file descriptor: the uverbs device, an async-event or
// completion-channel fd, or the rdma_cm fd. It closes the descriptor once;
// a cleanup closes it if the FD becomes unreachable without Close, so a
// forgotten Close leaks no descriptor past the next garbage collection.
type FD struct {
	mu      sync.RWMutex
	raw     int
	cleanup runtime.Cleanup
}

// NewFD takes ownership of raw.
func NewFD(raw int) *FD {
	fd := &FD{raw: raw}
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
	return f(fd.raw)
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
