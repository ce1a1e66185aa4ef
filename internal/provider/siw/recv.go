package siw

import (
	"sync/atomic"
	"unsafe"

	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/uverbs"
)

// RecvRing is siw's provider.RecvQueue: it posts receive work requests to
// a mapped siw receive queue or SRQ, without a system call: the kernel
// looks for a VALID RQE when a message arrives. A post takes the ring's
// lock once (a provider.Lock, like rxe's rings) and publishes each RQE
// with a release store of its ownership word.
type RecvRing struct {
	lock   provider.Lock
	r      ring
	put    uint32 // free-running producer counter; under lock
	maxSGE int
	errs   *provider.Errors
}

// NewRecvRing wraps the mapping of a receive queue of num RQEs that take
// up to maxSGE SGEs each. errs names the post operation in its errors.
func NewRecvRing(mem []byte, num uint32, maxSGE int, errs *provider.Errors) (*RecvRing, error) {
	r, err := newRing(mem, num, RQESize, 0)
	if err != nil {
		return nil, err
	}
	return &RecvRing{r: r, maxSGE: min(maxSGE, MaxSGE), errs: errs}, nil
}

// Slots is the number of RQEs; all of them are usable.
func (q *RecvRing) Slots() uint32 { return q.r.mask + 1 }

// Post writes wrs in order. On error the work requests before the failing
// one are posted. The errors of a full queue and of a closed ring are not
// allocated.
func (q *RecvRing) Post(wrs []provider.RecvWR) error {
	if !q.lock.Lock() {
		return q.errs.Closed()
	}
	var err error
	put := q.put
	for i := range wrs {
		wr := &wrs[i]
		if len(wr.SGList) > q.maxSGE {
			err = q.errs.At(i, provider.ReasonTooManySGE)
			break
		}
		if q.r.valid(put) {
			err = q.errs.Full(i)
			break
		}
		e := q.r.elem(put)
		rqe := (*uverbs.SiwRqe)(e)
		rqe.Id = wr.WRID
		for j := range wr.SGList {
			g := &wr.SGList[j]
			rqe.Sge[j] = uverbs.SiwSge{Laddr: g.Addr, Length: g.Length, Lkey: g.LKey}
		}
		atomic.StoreUint32((*uint32)(unsafe.Add(e, offFlags)),
			wqeHead{flags: uverbs.SIW_WQE_VALID, numSGE: uint8(len(wr.SGList))}.word())
		put++
	}
	q.put = put
	q.lock.Unlock()
	return err
}

// Shut refuses every later post (with the closed error) and waits for a
// post in progress to finish. The queue stays mapped until Mem's caller
// unmaps it. Shutting twice is harmless.
func (q *RecvRing) Shut() {
	if q.lock.Lock() {
		q.lock.CloseUnlock()
	}
}

// Mem returns the mapping, for munmap after Shut.
func (q *RecvRing) Mem() []byte { return q.r.mem }

// Posted returns how many posted RQEs the kernel has not consumed yet (0
// after Shut).
func (q *RecvRing) Posted() int {
	if !q.lock.Lock() {
		return 0
	}
	defer q.lock.Unlock()
	n := 0
	for i := uint32(0); i <= q.r.mask; i++ {
		if q.r.valid(i) {
			n++
		}
	}
	return n
}
