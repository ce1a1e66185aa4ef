package rxe

import (
	"sync/atomic"

	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/uverbs"
)

// RecvRing posts receive work requests to an RQ or SRQ ring. Posting needs
// no system call: the kernel reads the producer index when a message
// arrives. A post takes the ring's Lock once (one compare-and-swap, and a
// release store to unlock) and publishes the whole list with one release
// store of the producer index.
type RecvRing struct {
	lock   provider.Lock
	q      *Queue // replaced by Resize under lock
	maxSGE int
	errs   *provider.Errors
}

// NewRecvRing wraps a mapped receive queue whose elements hold maxSGE SGEs.
// errs names the post operation in its errors.
func NewRecvRing(q *Queue, maxSGE int, errs *provider.Errors) *RecvRing {
	return &RecvRing{q: q, maxSGE: maxSGE, errs: errs}
}

// Post writes wrs in order and publishes them with one release store. On
// error the work requests before the failing one are posted. The errors
// of a full queue and of a closed ring are not allocated.
func (r *RecvRing) Post(wrs []provider.RecvWR) error {
	if !r.lock.Lock() {
		return r.errs.Closed()
	}
	q := r.q
	free := q.Free()
	p := q.ProducerIndex()
	var err error
	n := 0
	for i := range wrs {
		if len(wrs[i].SGList) > r.maxSGE {
			err = r.errs.At(i, provider.ReasonTooManySGE)
			break
		}
		if uint32(i) >= free {
			err = r.errs.Full(i)
			break
		}
		if len(wrs[i].SGList) == 1 {
			writeRecv1(q.Elem(p), &wrs[i])
		} else {
			WriteRecv(q.Elem(p), &wrs[i])
		}
		p = q.Next(p)
		n++
	}
	if n > 0 {
		q.Publish(p)
	}
	r.lock.Unlock()
	return err
}

// Resize runs swap with the ring locked: no post touches the queue while
// swap asks the kernel for a new one and maps it, as rdma-core holds the
// SRQ's lock across MODIFY_SRQ and the remap. The kernel copies the posted
// WQEs between the indices it reads from the old queue into the new one,
// so a post into the old queue after that copy would be lost. swap
// returns the new queue (nil to keep the old one) and an error. Resize
// returns the old queue when it was replaced, for unmapping.
func (r *RecvRing) Resize(swap func() (*Queue, error)) (*Queue, error) {
	if !r.lock.Lock() {
		return nil, uverbs.ErrClosed
	}
	defer r.lock.Unlock()
	q, err := swap()
	if q == nil {
		return nil, err
	}
	old := r.q
	r.q = q
	return old, err
}

// Shut refuses every later post (with the closed error) and waits for a
// post in progress to finish. The queue stays mapped: Queue returns it for
// unmapping once the kernel object is gone. Shutting twice is harmless.
func (r *RecvRing) Shut() {
	if r.lock.Lock() {
		r.lock.CloseUnlock()
	}
}

// Queue returns the ring's queue. After Shut nothing else touches it.
func (r *RecvRing) Queue() *Queue {
	if !r.lock.Lock() {
		return r.q // shut: no writer left
	}
	defer r.lock.Unlock()
	return r.q
}

// Posted returns how many receive WQEs are posted and not yet consumed
// (0 after Shut).
func (r *RecvRing) Posted() int {
	if !r.lock.Lock() {
		return 0
	}
	defer r.lock.Unlock()
	q := r.q
	return int((q.ProducerIndex() - atomic.LoadUint32(q.cons)) & q.mask)
}
