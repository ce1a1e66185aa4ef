package rxe

import (
	"sync/atomic"

	"github.com/goverbs/goverbs/uverbs"
)

// States of a send WQE (enum wqe_state, rxe_verbs.h): the kernel keeps
// one in each send WQE's state field while it works on the WQE; user
// space posts with 0.
const (
	wqeStatePosted     = 0 // not sent yet (again 0 when rolled back for a retry)
	wqeStateProcessing = 1 // some of its packets sent
	// 2 pending (all sent, RC waits for the acknowledgement), 3 done,
	// 4 error.
)

// SendsTransmitted reports whether the kernel has put on the wire every
// send WQE of the send queue q before index p (the producer index of the
// posts that matter): each one is either retired (the consumer index
// passed it) or completely sent (its state past processing). It reads
// only what the kernel publishes in the ring; the caller keeps the ring
// mapped (holds its lock).
//
// rxe on 6.1 sends in the doorbell's system call, so this holds as soon
// as the doorbell returns; later kernels only queue the requester on a
// workqueue there, and a QP moved to ERR before it ran flushes the WQE
// instead of sending it.
func SendsTransmitted(q *Queue, p uint32) bool {
	p &= q.mask
	for i := atomic.LoadUint32(q.cons) & q.mask; i != p; i = q.Next(i) {
		w := (*uverbs.RxeSendWqe)(q.Elem(i))
		if s := atomic.LoadUint32(&w.State); s == wqeStatePosted || s == wqeStateProcessing {
			return false
		}
	}
	return true
}
