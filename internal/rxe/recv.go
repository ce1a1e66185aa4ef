package rxe

import (
	"sync"

	"github.com/goverbs/goverbs/verbs"
)

// RecvRing posts receive work requests to an RQ or SRQ ring. Posting needs
// no system call: the kernel reads the producer index when a message
// arrives.
type RecvRing struct {
	mu     sync.Mutex
	q      *Queue
	maxSGE int
	closed bool
}

// NewRecvRing wraps a mapped receive queue whose elements hold maxSGE SGEs.
func NewRecvRing(q *Queue, maxSGE int) *RecvRing {
	return &RecvRing{q: q, maxSGE: maxSGE}
}

// Queue returns the ring's queue (nil after Close).
func (r *RecvRing) Queue() *Queue { return r.q }

// Swap replaces the queue (SRQ resize) and returns the old one.
func (r *RecvRing) Swap(q *Queue) *Queue {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.q
	r.q = q
	return old
}

// Post writes wrs in order and publishes them with one release store. On
// error the work requests before the failing one are posted.
func (r *RecvRing) Post(op string, wrs []verbs.RecvWR) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return &verbs.PostError{Op: op, Err: verbs.ErrClosed}
	}
	q := r.q
	free := q.Free()
	p := q.ProducerIndex()
	var err error
	n := 0
	for i := range wrs {
		if len(wrs[i].SGList) > r.maxSGE {
			err = &verbs.PostError{Op: op, Index: i, Err: verbs.ErrTooManySGE}
			break
		}
		if uint32(i) >= free {
			err = &verbs.PostError{Op: op, Index: i, Err: verbs.ErrQueueFull}
			break
		}
		WriteRecv(q.Elem(p), &wrs[i])
		p = q.Next(p)
		n++
	}
	if n > 0 {
		q.Publish(p)
	}
	return err
}

// Close marks the ring closed and returns its queue for unmapping.
func (r *RecvRing) Close() *Queue {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	q := r.q
	r.q = nil
	return q
}

// Posted returns how many receive WQEs are posted and not yet consumed.
func (r *RecvRing) Posted() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.q == nil {
		return 0
	}
	q := r.q
	return int((q.ProducerIndex() - q.ConsumerIndex()) & q.mask)
}
