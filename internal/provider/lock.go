package provider

import (
	"runtime"
	"sync/atomic"
)

// Lock is the one lock a post or a poll takes, and the close guard of the
// ring it protects: a spin lock (as rdma-core's pthread_spin_lock around
// each post and poll) whose word also records that the ring was closed, so
// a post checks "open" and takes the lock in one compare-and-swap, and
// releases it with a plain release store.
//
// Critical sections are short and never block: the work queue element
// writes and index moves of one call. The one exception is an SRQ or CQ
// resize, which holds the lock across its system calls exactly as
// rdma-core does, so that no post or poll touches the queue the kernel is
// replacing.
//
// The zero Lock is open and unlocked.
type Lock struct {
	w uint32 // lockBit | closedBit
}

const (
	lockBit   = 1
	closedBit = 2
)

// Lock acquires the lock and reports true, or reports false (without
// acquiring) once the lock was closed with CloseUnlock.
func (l *Lock) Lock() bool {
	// Acquire: a successful CAS is a full barrier on amd64 (LOCK CMPXCHG)
	// and an acquire on arm64 (LDAXR/STLXR or CASAL), so the critical
	// section cannot read ring state older than the last Unlock.
	if atomic.CompareAndSwapUint32(&l.w, 0, lockBit) {
		return true
	}
	return l.lockSlow()
}

func (l *Lock) lockSlow() bool {
	for i := 0; ; i++ {
		w := atomic.LoadUint32(&l.w)
		if w&closedBit != 0 {
			return false
		}
		if w == 0 && atomic.CompareAndSwapUint32(&l.w, 0, lockBit) {
			return true
		}
		if i >= 16 {
			// The holder may be a goroutine waiting for a P, or a
			// resize in a system call: let it run.
			runtime.Gosched()
		}
	}
}

// Unlock releases the lock with a release store (see StoreRelease): every
// write of the critical section is visible to the next holder before it
// sees the lock free.
func (l *Lock) Unlock() { StoreRelease(&l.w, 0) }

// CloseUnlock releases the lock and closes it: every later Lock reports
// false. The caller holds the lock.
func (l *Lock) CloseUnlock() { StoreRelease(&l.w, closedBit) }

// Closed reports whether CloseUnlock was called.
func (l *Lock) Closed() bool { return atomic.LoadUint32(&l.w)&closedBit != 0 }
