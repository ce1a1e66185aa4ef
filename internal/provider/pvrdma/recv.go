package pvrdma

import (
	"fmt"
	"unsafe"

	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/uverbs"
)

// RecvRing is pvrdma's provider.RecvQueue, a QP's receive queue or an SRQ:
// receive WQEs (struct pvrdma_rq_wqe_hdr and num_sge struct pvrdma_sge) in
// user memory, a producer index in the ring state page and a doorbell
// (rdma-core's pvrdma_post_recv and pvrdma_post_srq_recv). A post takes
// the ring's lock, writes the WQEs, advances the producer index after each
// and rings the doorbell once for the list: no system call.
type RecvRing struct {
	lock    provider.Lock
	r       ring
	wqes    unsafe.Pointer
	wqeSize uintptr
	maxSGE  int
	db      *uint32 // the UAR's QP or SRQ doorbell
	dbVal   uint32  // what it is rung with: RECV and the QP handle or SRQ number
	errs    *provider.Errors
}

// recvWQESize is the size of a receive WQE with maxSGE SGEs, a power of
// two (rdma-core: align_next_power2(sizeof hdr + maxSGE * sizeof sge)).
func recvWQESize(maxSGE uint32) uintptr {
	return uintptr(pow2(uint32(RecvHdrSize) + maxSGE*uint32(SGESize)))
}

// newRecvRing sets up a receive ring of n WQEs of wqeSize bytes for up to
// maxSGE SGEs at wqes, indexed by the pvrdma_ring at state.
func newRecvRing(state, wqes unsafe.Pointer, n uint32, maxSGE int, wqeSize uintptr,
	db *uint32, dbVal uint32, errs *provider.Errors) (*RecvRing, error) {
	if n == 0 || n&(n-1) != 0 || n > maxRingElems || wqeSize < RecvHdrSize+uintptr(maxSGE)*SGESize {
		return nil, fmt.Errorf("%w: %d receive WQEs of %d bytes, %d SGEs", errQueueSize, n, wqeSize, maxSGE)
	}
	return &RecvRing{r: newRing(state, n), wqes: wqes, wqeSize: wqeSize, maxSGE: maxSGE,
		db: db, dbVal: dbVal, errs: errs}, nil
}

// Slots is the number of WQEs; every one is usable (the wrap bit tells a
// full ring from an empty one).
func (q *RecvRing) Slots() uint32 { return q.r.n }

// Post writes wrs in order; on error the work requests before the failing
// one are posted. A full queue and a closed ring return shared errors; an
// invalid ring state (the device wrote indices out of range) refuses the
// post with the state error, as rdma-core refuses it with EINVAL.
func (q *RecvRing) Post(wrs []provider.RecvWR) error {
	if !q.lock.Lock() {
		return q.errs.Closed()
	}
	var err error
	n := 0
	for i := range wrs {
		wr := &wrs[i]
		slot, free, valid := q.r.space()
		if !valid {
			err = q.errs.State()
			break
		}
		if !free {
			err = q.errs.Full(i)
			break
		}
		if len(wr.SGList) > q.maxSGE {
			err = q.errs.At(i, provider.ReasonTooManySGE)
			break
		}
		e := unsafe.Add(q.wqes, uintptr(slot)*q.wqeSize)
		*(*uverbs.PvrdmaRqWqeHdr)(e) = uverbs.PvrdmaRqWqeHdr{Wr_id: wr.WRID, Num_sge: uint32(len(wr.SGList))}
		writeSGEs(unsafe.Add(e, RecvHdrSize), wr.SGList)
		q.r.produce()
		n++
	}
	if n > 0 {
		ringDoorbell(q.db, q.dbVal)
	}
	q.lock.Unlock()
	return err
}

// writeSGEs copies sges to dst as struct pvrdma_sge (which is struct
// ibv_sge: addr, length, lkey).
func writeSGEs(dst unsafe.Pointer, sges []provider.SGE) {
	for j := range sges {
		g := &sges[j]
		*(*uverbs.PvrdmaSge)(unsafe.Add(dst, uintptr(j)*SGESize)) = uverbs.PvrdmaSge{Addr: g.Addr, Length: g.Length, Lkey: g.LKey}
	}
}

// Posted returns how many posted receives the device has not consumed (0
// once shut).
func (q *RecvRing) Posted() int {
	if !q.lock.Lock() {
		return 0
	}
	n := q.r.count()
	q.lock.Unlock()
	return int(n)
}

// Shut refuses every later Post and waits for one in progress. Shutting
// twice is harmless.
func (q *RecvRing) Shut() {
	if q.lock.Lock() {
		q.lock.CloseUnlock()
	}
}

// reset empties the ring after the QP went back to RESET (rdma-core's
// pvrdma_init_qp_queue), under the ring's lock.
func (q *RecvRing) reset() {
	if q.lock.Lock() {
		q.r.reset()
		q.lock.Unlock()
	}
}
