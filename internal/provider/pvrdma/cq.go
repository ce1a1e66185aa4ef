package pvrdma

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/uverbs"
)

// CQ is pvrdma's provider.CQ: a buffer of [ring state page][CQEs] in user
// memory, which the device fills (pvrdma_create_cq in rdma-core's cq.c).
type CQ struct {
	ctx  *ucontext
	mem  []byte
	cmd  uverbs.PvrdmaCreateCq
	resp uverbs.PvrdmaCreateCqResp
	// alloc is the number of CQEs the buffer holds.
	alloc uint32
	// The data path, set by Start (or init, in tests).
	r    ring
	cqes unsafe.Pointer
	cqn  uint32
	db   *uint32 // the UAR's CQ doorbell
	qps  *qpTable
	// ready: the device's producer index (prod_tail, wrap bit included)
	// against our consumer index, which Poll moves.
	ready provider.Ready
}

// NewCQ allocates the buffer of a CQ of at least cqe entries, rounded up
// to a power of two as rdma-core and the kernel do.
func (c *ucontext) NewCQ(cqe int) (provider.CQ, error) {
	if cqe < 1 || cqe > maxRingElems {
		return nil, fmt.Errorf("%w: %d CQEs", errQueueSize, cqe)
	}
	n := pow2(uint32(cqe))
	mem, err := allocBuf(pageSize + uintptr(n)*CQESize)
	if err != nil {
		return nil, err
	}
	q := &CQ{ctx: c, mem: mem, alloc: n}
	q.cmd = uverbs.PvrdmaCreateCq{Addr: addr(mem), Size: uint32(len(mem))}
	return q, nil
}

// Udata is CREATE_CQ's driver data: the buffer in, the CQ number out.
func (q *CQ) Udata() provider.Udata {
	return provider.Udata{In: provider.Bytes(&q.cmd), Out: provider.Bytes(&q.resp)}
}

// Start takes over the buffer with the number of CQEs the device granted
// (the core response's cqe: rdma-core's cqe_cnt = ibv_cq.cqe).
func (q *CQ) Start(cqe uint32) error {
	return q.init(q.mem, cqe, q.resp.Cqn, q.ctx.doorbell(uarCQOffset), &q.ctx.qps)
}

// init sets up the data path over mem, a CQ buffer of n CQEs.
func (q *CQ) init(mem []byte, n, cqn uint32, db *uint32, qps *qpTable) error {
	if n == 0 || n&(n-1) != 0 || n > maxRingElems || uintptr(len(mem)) < pageSize+uintptr(n)*CQESize {
		return fmt.Errorf("%w: %d CQEs in a buffer of %d bytes", errQueueSize, n, len(mem))
	}
	base := unsafe.Pointer(unsafe.SliceData(mem))
	q.r = newRing(unsafe.Add(base, ringSize), n) // ring_state->rx
	q.cqes = unsafe.Add(base, pageSize)
	q.cqn, q.db, q.qps = cqn, db, qps
	q.ready = provider.Ready{Word: q.r.prodTail, Mask: ^uint32(0), Idle: atomic.LoadUint32(q.r.consHead)}
	return nil
}

// Ready returns the CQ's emptiness test. A pvrdma CQE has no owner bit:
// the ring state says whose a slot is, and the CQE at the consumer index
// is the device's while the device's prod_tail equals our cons_head, wrap
// bit included (pvrdma_idx_ring_has_data). So Word is prod_tail and Idle
// the consumer index Poll last stored. An invalid prod_tail reads as
// pending; Poll then finds nothing, as Pending does.
//
// An empty poll answered from Ready does not reach Poll, so it does not
// ring the POLL doorbell that rdma-core's pvrdma_poll_one rings on every
// empty poll. The device writes completions without it (qemu's backend
// thread polls the backing device on its completion events); the doorbell
// only asks it to look now. Poll still rings it once it is called and
// finds the ring empty. Sending every empty poll here, to ring it as C
// does, made every latency row of the bed's bench slower, none faster
// (docs/providers.md).
func (q *CQ) Ready() *provider.Ready { return &q.ready }

// Release frees the buffer; the kernel unpinned it when it destroyed the
// CQ.
func (q *CQ) Release() error {
	err := freeBuf(q.mem)
	q.mem, q.cqes = nil, nil
	return err
}

// Poll copies up to len(wc) completions, oldest first, and hands their
// slots back to the device. When it finds the ring empty it rings the POLL
// doorbell once and looks again, as rdma-core's pvrdma_poll_one does (the
// device may have completions it has not written out yet). A CQE of a QP
// the context no longer knows (destroyed: rdma-core removes those from the
// CQ at destroy, pvrdma_cq_clean) is consumed and dropped. An invalid ring
// state polls nothing.
func (q *CQ) Poll(wc []provider.WC) int {
	n := 0
	tried := false
	for n < len(wc) {
		slot, full, valid := q.r.data()
		if !valid {
			break
		}
		if !full {
			if tried {
				break
			}
			tried = true
			ringDoorbell(q.db, q.cqn|uarCQPoll)
			continue
		}
		cqe := q.cqe(slot)
		qpn, ok := q.qps.lookup(uint32(cqe.Qp))
		if ok {
			decode(&wc[n], cqe, qpn)
			n++
		}
		q.r.consume()
	}
	q.ready.Idle = *q.r.consHead // ours: only Poll moves it
	return n
}

// cqe is the CQE in ring slot slot (below the ring's size).
func (q *CQ) cqe(slot uint32) *uverbs.PvrdmaCqe {
	return (*uverbs.PvrdmaCqe)(unsafe.Add(q.cqes, uintptr(slot)*CQESize))
}

// decode fills w from the CQE of QP qpn (rdma-core's pvrdma_poll_one, plus
// the vendor error and port number the kernel's own poll copies).
func decode(w *provider.WC, cqe *uverbs.PvrdmaCqe, qpn uint32) {
	*w = provider.WC{
		WRID: cqe.Wr_id, VendorErr: cqe.Vendor_err, ByteLen: cqe.Byte_len,
		ImmData: cqe.Imm_data, QPNum: qpn, SrcQP: cqe.Src_qp,
		Flags:     provider.WCFlags(cqe.Wc_flags) & wcFlagsMask,
		PkeyIndex: cqe.Pkey_index, SLID: cqe.Slid, SL: cqe.Sl,
		DLIDPathBits: cqe.Dlid_path_bits, PortNum: cqe.Port_num,
	}
	if cqe.Status < uint32(len(wcStatus)) {
		w.Status = wcStatus[cqe.Status]
	} else {
		w.Status = provider.WCGeneralErr
	}
	op, ok := wcOpcode(cqe.Opcode)
	w.Opcode = op
	if !ok && w.Status == provider.WCSuccess {
		// A successful completion of an operation goverbs never posts.
		w.Status = provider.WCGeneralErr
	}
}

// The generic code finds Clean by this interface; the assertion keeps a
// signature change from silently turning it off.
var _ provider.CQCleaner = (*CQ)(nil)

// Clean removes the completions of QP p from the ring and keeps the
// others in order, as rdma-core's pvrdma_cq_clean_int: from the newest
// back to the oldest, each CQE of another QP moves down to the next slot
// free from the producer's end, and the consumer index then moves past
// the slots p's CQEs left. The device writes only at and past the
// producer index, which Clean leaves alone, so it runs while the device
// goes on completing other QPs' work. Package cq calls it under the poll
// lock (provider.CQCleaner); a QP of another provider, or one never
// started, has nothing here.
func (q *CQ) Clean(p provider.QP) {
	v, ok := p.(*qp)
	if !ok || !v.started || q.cqes == nil {
		return
	}
	handle := v.handle & 0xffff
	n, wrap := q.r.n, q.r.n<<1-1
	tail := atomic.LoadUint32(q.r.prodTail)
	head := *q.r.consHead // ours: only Poll and Clean move it
	if !idxValid(tail, n) || !idxValid(head, n) {
		return
	}
	dst := tail
	for src := tail; src != head; {
		src = (src - 1) & wrap
		c := q.cqe(src & (n - 1))
		if uint32(c.Qp)&0xffff == handle {
			continue
		}
		dst = (dst - 1) & wrap
		if dst != src {
			*q.cqe(dst & (n - 1)) = *c
		}
	}
	provider.StoreRelease(q.r.consHead, dst)
	q.ready.Idle = dst
}

// Queued counts the completions the device wrote and Poll has not taken.
func (q *CQ) Queued() int { return int(q.r.count()) }

// Pending reports whether a completion is waiting.
func (q *CQ) Pending() bool { _, full, _ := q.r.data(); return full }

// Arm writes the CQ doorbell with ARM (the next completion) or ARM_SOL
// (the next solicited one), as rdma-core's pvrdma_req_notify_cq: no system
// call, so it reports false. A full barrier follows the doorbell, so the
// CQE check cq.Wait makes after arming cannot be satisfied from before
// the device saw the arm.
func (q *CQ) Arm(solicitedOnly bool) bool {
	v := q.cqn | uarCQArm
	if solicitedOnly {
		v = q.cqn | uarCQArmSol
	}
	ringDoorbell(q.db, v)
	full()
	return false
}

// Event does nothing: the device disarms the CQ when it raises the event
// (rdma-core's pvrdma has no cq_event).
func (q *CQ) Event() {}

// CanResize reports false: the kernel's pvrdma_resize_cq returns
// EOPNOTSUPP.
func (q *CQ) CanResize() bool { return false }

// Resize is never called (CanResize).
func (q *CQ) Resize(int, func(provider.Udata) error) error {
	return errors.New("pvrdma cannot resize a CQ")
}
