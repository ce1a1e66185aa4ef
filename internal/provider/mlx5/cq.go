package mlx5

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/goverbs/goverbs/internal/provider"
)

const cqeSize = 64

// CQ is mlx5's provider.CQ: a ring of 64-byte CQEs and a doorbell record
// in user memory (create_cq, mlx5_alloc_cq_buf).
type CQ struct {
	ctx  *ucontext
	mem  []byte
	db   unsafe.Pointer // [0] consumer index, [1] arm word; big-endian
	cmd  createCQ
	resp createCQResp
	nent uint32
	// The data path.
	cqes  unsafe.Pointer
	ci    uint32
	cqn   uint32
	armSN atomic.Uint32
	ready provider.Ready
	// CQEs Poll consumed but could not turn into completions (BadCQE).
	bad     int
	badOp   byte
	badQPN  uint32
	badUIdx uint32
}

// NewCQ allocates the ring of a CQ of at least cqe entries: cqe+1 rounded
// up to a power of two, every CQE INVALID with the owner bit clear, then
// the doorbell record (libmlx5's order).
func (c *ucontext) NewCQ(cqe int) (provider.CQ, error) {
	if cqe < 1 || cqe >= 1<<24 {
		return nil, fmt.Errorf("%w: %d CQEs", errQueueSize, cqe)
	}
	n := pow2(uint32(cqe) + 1)
	mem, err := allocBuf(uintptr(n) * cqeSize)
	if err != nil {
		return nil, err
	}
	for i := uint32(0); i < n; i++ {
		mem[i*cqeSize+cqeOpOwn] = cqeInvalid << 4
	}
	db, err := c.dbrecs.alloc(c.resp.CacheLineSize)
	if err != nil {
		freeBuf(mem)
		return nil, err
	}
	q := &CQ{ctx: c, mem: mem, db: db, nent: n}
	q.cmd = createCQ{BufAddr: addr(unsafe.Pointer(&mem[0])), DBAddr: addr(db), CQESize: cqeSize}
	return q, nil
}

// Udata is CREATE_CQ's driver data: the ring and the record in, the CQ
// number out.
func (q *CQ) Udata() provider.Udata {
	return provider.Udata{In: provider.Bytes(&q.cmd), Out: provider.Bytes(&q.resp)}
}

// Start takes over the ring. The kernel rounds the CQE count up as
// libmlx5 did, so it grants nent-1.
func (q *CQ) Start(cqe uint32) error {
	if cqe+1 != q.nent {
		return fmt.Errorf("%w: the kernel made a CQ of %d entries for a ring of %d", errDevice, cqe+1, q.nent)
	}
	q.cqes = unsafe.Pointer(&q.mem[0])
	q.cqn = q.resp.CQN
	q.ci = 0
	q.setReady()
	return nil
}

// slot returns the CQE at index n (modulo the ring).
func (q *CQ) slot(n uint32) unsafe.Pointer {
	return unsafe.Add(q.cqes, uintptr(n&(q.nent-1))*cqeSize)
}

// setReady points the emptiness test at the CQE at the consumer index.
// Its last word holds op_own in its top byte (wqe_counter, signature,
// op_own). On the first pass a slot the device has not written holds
// INVALID with the owner bit clear; on a later pass it holds the CQE of
// the pass before, whose owner bit is the previous pass's parity.
func (q *CQ) setReady() {
	word := (*uint32)(unsafe.Add(q.slot(q.ci), cqeWQECounter))
	opOwnShift := uint32(24)
	if bigEndian { // op_own is the word's low byte
		opOwnShift = 0
	}
	if q.ci < q.nent {
		q.ready = provider.Ready{Word: word, Mask: 0xf1 << opOwnShift, Idle: 0xf0 << opOwnShift}
		return
	}
	prev := (q.ci/q.nent - 1) & 1
	q.ready = provider.Ready{Word: word, Mask: 1 << opOwnShift, Idle: prev << opOwnShift}
}

// Ready returns the CQ's emptiness test.
func (q *CQ) Ready() *provider.Ready { return &q.ready }

// sw returns the CQE at index n if software owns it (get_sw_cqe): not
// INVALID, and its owner bit the parity of n's pass over the ring.
func (q *CQ) sw(n uint32) unsafe.Pointer {
	cqe := q.slot(n)
	op := atomic.LoadUint32((*uint32)(unsafe.Add(cqe, cqeWQECounter)))
	opOwn := byte(beWord32(op)) // the word's last byte in memory
	owner := uint32(0)
	if n&q.nent != 0 {
		owner = 1
	}
	if opOwn>>4 != cqeInvalid && uint32(opOwn&1) == owner {
		return cqe
	}
	return nil
}

// Poll moves completions into wc as mlx5_poll_one does, then stores the
// consumer index into the doorbell record. It first counts the CQEs
// software owns (up to len(wc)), then reads them after one barrier: every
// owner byte was read before it, every CQE body after it, the order
// libmlx5 gets with one barrier per CQE.
func (q *CQ) Poll(wc []provider.WC) int {
	own := 0
	for own < len(wc) && q.sw(q.ci+uint32(own)) != nil {
		own++
	}
	if own > 0 {
		fromDevice()
	}
	n := 0
	var last lastQP
	for n < own {
		cqe := q.slot(q.ci)
		q.ci++
		if !q.parse(cqe, &wc[n], &last) {
			// libmlx5 fails the whole poll (CQ_POLL_ERR); goverbs
			// returns the completions before it and reports the entry
			// (BadCQE).
			q.bad++
			q.badOp = *(*byte)(unsafe.Add(cqe, cqeOpOwn)) >> 4
			q.badQPN = be32(unsafe.Add(cqe, cqeSopDropQPN)) & 0xffffff
			q.badUIdx = be32(unsafe.Add(cqe, cqeSRQNUIdx)) & 0xffffff
			break
		}
		n++
	}
	provider.StoreRelease((*uint32)(q.db), beWord32(q.ci&0xffffff))
	q.setReady()
	return n
}

// parse fills w from the CQE (mlx5_parse_cqe with cqe_version 1: the QP
// is found by the user index in srqn_uidx). It reports false for a CQE it
// cannot attribute (no such QP), which libmlx5 answers with a poll error.
func (q *CQ) parse(cqe unsafe.Pointer, w *provider.WC, last *lastQP) bool {
	qpn := be32(unsafe.Add(cqe, cqeSopDropQPN)) & 0xffffff
	w.Flags = 0
	w.QPNum = qpn
	opOwn := *(*byte)(unsafe.Add(cqe, cqeOpOwn))
	switch opOwn >> 4 {
	case cqeReq:
		p := q.qp(cqe, qpn, last)
		if p == nil || p.sq == nil {
			return false
		}
		s := p.sq
		idx := uint32(be16(unsafe.Add(cqe, cqeWQECounter))) & (s.wqeCnt - 1)
		switch be32(unsafe.Add(cqe, cqeSopDropQPN)) >> 24 {
		case opRDMAWriteImm:
			w.Flags |= provider.WCWithImm
			w.Opcode = provider.WCRDMAWrite
		case opRDMAWrite:
			w.Opcode = provider.WCRDMAWrite
		case opSendImm:
			w.Flags |= provider.WCWithImm
			w.Opcode = provider.WCSend
		case opSend, opSendInval:
			w.Opcode = provider.WCSend
		case opRDMARead:
			w.Opcode = provider.WCRDMARead
			w.ByteLen = be32(unsafe.Add(cqe, cqeByteCnt))
		case opAtomicCS:
			w.Opcode = provider.WCCompSwap
			w.ByteLen = 8
		case opAtomicFA:
			w.Opcode = provider.WCFetchAdd
			w.ByteLen = 8
		case opNOP:
			w.Opcode = provider.WCOpcode(s.slots[idx].data)
		}
		slot := &s.slots[idx]
		w.WRID = slot.wrid
		w.Status = provider.WCSuccess
		provider.StoreRelease(&s.tail, slot.head+1)
	case cqeRespWRImm, cqeRespSend, cqeRespSendImm, cqeRespSendInv:
		p, sr, ok := q.responder(cqe, qpn, last)
		if !ok {
			return false
		}
		w.ByteLen = be32(unsafe.Add(cqe, cqeByteCnt))
		// Scatter to CQE (the QP asks for it, as libmlx5's do): a
		// small message came in the CQE, not in the buffer.
		scatter := opOwn&(inlineScatter32|inlineScatter64) != 0
		src := cqe
		if opOwn&inlineScatter32 == 0 {
			src = unsafe.Add(cqe, -cqeSize) // the first half of a 128-byte CQE
		}
		st := provider.WCSuccess
		if sr != nil {
			ctr := uint32(be16(unsafe.Add(cqe, cqeWQECounter)))
			w.WRID = sr.wrid[ctr&(sr.max-1)]
			sr.free(ctr)
			if scatter {
				st = sr.copyIn(ctr, src, w.ByteLen, opOwn&inlineScatter32 != 0)
			}
		} else {
			r := p.rq
			idx := r.tail & (r.wqeCnt - 1)
			w.WRID = r.wrid[idx]
			provider.StoreRelease(&r.tail, atomic.LoadUint32(&r.tail)+1) // only Poll moves it
			if scatter {
				st = r.copyIn(idx, src, w.ByteLen, opOwn&inlineScatter32 != 0)
			}
		}
		if st != provider.WCSuccess {
			w.Status = st
			return true
		}
		imm := *(*uint32)(unsafe.Add(cqe, cqeImmInval)) // network order, as ibv_wc's imm_data
		switch opOwn >> 4 {
		case cqeRespWRImm:
			w.Opcode = provider.WCRecvRDMAWithImm
			w.Flags |= provider.WCWithImm
			w.ImmData = imm
		case cqeRespSend:
			w.Opcode = provider.WCRecv
		case cqeRespSendImm:
			w.Opcode = provider.WCRecv
			w.Flags |= provider.WCWithImm
			w.ImmData = imm
		case cqeRespSendInv:
			w.Opcode = provider.WCRecv
			w.Flags |= provider.WCWithInvalidate
			w.ImmData = be32(unsafe.Add(cqe, cqeImmInval))
		}
		flagsRQPN := be32(unsafe.Add(cqe, cqeFlagsRQPN))
		w.SLID = be16(unsafe.Add(cqe, cqeSLID))
		w.SL = uint8(flagsRQPN>>24) & 0xf
		w.SrcQP = flagsRQPN & 0xffffff
		w.DLIDPathBits = *(*byte)(unsafe.Add(cqe, cqeMLPath)) & 0x7f
		if (flagsRQPN>>28)&3 != 0 {
			w.Flags |= provider.WCGRH
		}
		w.PkeyIndex = uint16(be32(unsafe.Add(cqe, cqeImmInval)))
		w.Status = provider.WCSuccess
	case cqeReqErr, cqeRespErr:
		w.Status = errStatus(*(*byte)(unsafe.Add(cqe, cqeSyndrome)))
		w.VendorErr = uint32(*(*byte)(unsafe.Add(cqe, cqeVendorErr)))
		p := q.qp(cqe, qpn, last)
		if opOwn>>4 == cqeReqErr {
			if p == nil || p.sq == nil {
				return false
			}
			s := p.sq
			idx := uint32(be16(unsafe.Add(cqe, cqeWQECounter))) & (s.wqeCnt - 1)
			w.WRID = s.slots[idx].wrid
			provider.StoreRelease(&s.tail, s.slots[idx].head+1)
		} else {
			p, sr, ok := q.responder(cqe, qpn, last)
			if !ok {
				return false
			}
			if sr != nil {
				ctr := uint32(be16(unsafe.Add(cqe, cqeWQECounter)))
				w.WRID = sr.wrid[ctr&(sr.max-1)]
				sr.free(ctr)
			} else {
				r := p.rq
				w.WRID = r.wrid[r.tail&(r.wqeCnt-1)]
				provider.StoreRelease(&r.tail, atomic.LoadUint32(&r.tail)+1) // only Poll moves it
			}
		}
	default:
		// RESIZE_CQ outside a resize, and opcodes libmlx5 does not know:
		// libmlx5 returns a completion with only the QP number and the
		// flags written; goverbs reports a bad entry.
		return false
	}
	return true
}

// BadCQE returns how many CQEs Poll consumed without a completion since
// the last call, and what the last one was.
func (q *CQ) BadCQE() (int, string) {
	n := q.bad
	if n == 0 {
		return 0, ""
	}
	q.bad = 0
	return n, fmt.Sprintf("CQE opcode %d for QP %#x, user index %#x", q.badOp, q.badQPN, q.badUIdx)
}

// copyIn copies n bytes of a scattered CQE at src into the receive WQE
// idx's buffers (mlx5_copy_to_recv_wqe). Only a 32-byte scatter fits a
// 64-byte CQE; a 64-byte one there is refused as a length error.
func (r *recvQueue) copyIn(idx uint32, src unsafe.Pointer, n uint32, in32 bool) provider.WCStatus {
	if !in32 || n > 32 {
		return provider.WCLocLenErr
	}
	scat := unsafe.Add(r.start, uintptr(idx)<<r.shift)
	for i := uint32(0); i < r.maxGS && n > 0; i++ {
		d := unsafe.Add(scat, uintptr(i)*dataSegSize)
		c := min(n, be32(d))
		dst := be64(unsafe.Add(d, 8))
		copy(unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&dst))), c), unsafe.Slice((*byte)(src), c))
		src = unsafe.Add(src, c)
		n -= c
	}
	if n != 0 {
		return provider.WCLocLenErr
	}
	return provider.WCSuccess
}

// responder finds where a responder CQE's receive came from
// (get_cur_rsc): with CQE version 1 the QP by user index, and its SRQ if
// it has one; with version 0 the SRQ by number when the CQE names one,
// else the QP by number. ok is false when there is none.
func (q *CQ) responder(cqe unsafe.Pointer, qpn uint32, last *lastQP) (p *qp, s *srq, ok bool) {
	sn := be32(unsafe.Add(cqe, cqeSRQNUIdx)) & 0xffffff
	if q.ctx.resp.CQEVersion == 1 {
		p = q.qp(cqe, qpn, last)
		if p == nil {
			return nil, nil, false
		}
		if p.srq != nil {
			return p, p.srq, true
		}
		return p, nil, p.rq != nil
	}
	if sn != 0 {
		s = q.ctx.srqs.get(sn)
		return nil, s, s != nil
	}
	p = q.qp(cqe, qpn, last)
	return p, nil, p != nil && p.rq != nil
}

// qp finds the CQE's QP: by user index with CQE version 1, else by QP
// number.
func (q *CQ) qp(cqe unsafe.Pointer, qpn uint32, last *lastQP) *qp {
	key := q.rsn(cqe, qpn)
	if p := last.hit(key); p != nil {
		return p
	}
	return q.lookup(key, last)
}

// rsn is the number that names the CQE's QP in the context's table: its
// user index with CQE version 1, else its QP number.
func (q *CQ) rsn(cqe unsafe.Pointer, qpn uint32) uint32 {
	if q.ctx.resp.CQEVersion == 1 {
		return be32(unsafe.Add(cqe, cqeSRQNUIdx)) & 0xffffff
	}
	return qpn
}

// lookup finds the QP of key (a user index or a QP number, as qp) in the
// context's table and remembers it in last. (Not inlined, so that qp's
// test of last is.)
//
//go:noinline
func (q *CQ) lookup(key uint32, last *lastQP) *qp {
	t := &q.ctx.byQPN
	if q.ctx.resp.CQEVersion == 1 {
		t = &q.ctx.byUIdx
	}
	p := t.get(key)
	last.key, last.qp = key, p
	return p
}

// lastQP is the QP the last CQE of one Poll named (libmlx5's cur_rsc):
// the CQEs of one QP in a row look it up once. It lives for one Poll,
// under the poll lock: a QP leaves its table only after its CQs were
// cleaned under that lock.
type lastQP struct {
	key uint32
	qp  *qp
}

// hit returns the QP of key if it was the last one, else nil.
func (l *lastQP) hit(key uint32) *qp {
	if l.key == key {
		return l.qp
	}
	return nil
}

// errStatus maps an error CQE's syndrome to a completion status
// (mlx5_handle_error_cqe).
func errStatus(syndrome byte) provider.WCStatus {
	switch syndrome {
	case 0x01:
		return provider.WCLocLenErr
	case 0x02:
		return provider.WCLocQPOpErr
	case 0x04:
		return provider.WCLocProtErr
	case 0x05:
		return provider.WCWRFlushErr
	case 0x06:
		return 6 // IBV_WC_MW_BIND_ERR
	case 0x10:
		return provider.WCBadRespErr
	case 0x11:
		return provider.WCLocAccessErr
	case 0x12:
		return provider.WCRemInvReqErr
	case 0x13:
		return provider.WCRemAccessErr
	case 0x14:
		return provider.WCRemOpErr
	case 0x15:
		return provider.WCRetryExcErr
	case 0x16:
		return provider.WCRNRRetryExcErr
	case 0x22:
		return 16 // IBV_WC_REM_ABORT_ERR
	}
	return provider.WCGeneralErr
}

// Clean removes the completions of p from the ring (__mlx5_cq_clean): it
// finds the producer index, then sweeps back to the consumer index moving
// older CQEs of other QPs over the removed ones (each keeping the owner
// bit of the slot it lands in), and moves the consumer index past the
// removed ones. The caller holds the poll lock.
func (q *CQ) Clean(pq provider.QP) {
	p, ok := pq.(*qp)
	if !ok || q.cqes == nil {
		return
	}
	rsn, v1 := p.qpn, q.ctx.resp.CQEVersion == 1
	if v1 {
		rsn = p.uidx
	}
	pi := q.ci
	for q.sw(pi) != nil {
		if pi == q.ci+q.nent-1 {
			break
		}
		pi++
	}
	freed := uint32(0)
	for int32(pi-1-q.ci) >= 0 {
		pi--
		cqe := q.slot(pi)
		var mine bool
		if v1 {
			mine = be32(unsafe.Add(cqe, cqeSRQNUIdx))&0xffffff == rsn
		} else {
			mine = be32(unsafe.Add(cqe, cqeSopDropQPN))&0xffffff == rsn
		}
		if mine {
			if p.srq != nil {
				op := *(*byte)(unsafe.Add(cqe, cqeOpOwn)) >> 4
				if op >= cqeRespWRImm && op <= cqeRespSendInv || op == cqeRespErr {
					p.srq.free(uint32(be16(unsafe.Add(cqe, cqeWQECounter))))
				}
			}
			freed++
		} else if freed > 0 {
			dest := q.slot(pi + freed)
			owner := *(*byte)(unsafe.Add(dest, cqeOpOwn)) & 1
			copy(unsafe.Slice((*byte)(dest), cqeSize), unsafe.Slice((*byte)(cqe), cqeSize))
			op := (*byte)(unsafe.Add(dest, cqeOpOwn))
			*op = *op&^1 | owner
		}
	}
	if freed > 0 {
		q.ci += freed
		toDevice()
		atomic.StoreUint32((*uint32)(q.db), beWord32(q.ci&0xffffff))
		q.setReady()
	}
}

// Queued counts the completions waiting, without moving anything.
func (q *CQ) Queued() int {
	n := 0
	for q.sw(q.ci+uint32(n)) != nil && uint32(n) < q.nent {
		n++
	}
	return n
}

// Pending reports whether a completion is waiting.
func (q *CQ) Pending() bool { return q.sw(q.ci) != nil }

// Arm writes sn<<28 | cmd | ci into the record's arm word, then stores
// the same word and the CQ number to the UAR's CQ doorbell
// (mlx5_arm_cq); no kernel command.
func (q *CQ) Arm(solicitedOnly bool) bool {
	sn := q.armSN.Load() & 3
	cmd := uint32(cqDBReqNot)
	if solicitedOnly {
		cmd = cqDBReqNotSol
	}
	word := sn<<28 | cmd | q.ci&0xffffff
	atomic.StoreUint32((*uint32)(unsafe.Add(q.db, 4)), beWord32(word))
	wcStart()
	store64((*uint64)(unsafe.Add(q.ctx.cqUAR, cqDoorbell)), beWord64(uint64(word)<<32|uint64(q.cqn)))
	wcFlush()
	full()
	return false
}

// Event counts a completion event into the next arm's sequence number.
func (q *CQ) Event() { q.armSN.Add(1) }

// CanResize reports true.
func (q *CQ) CanResize() bool { return true }

// Resize replaces the ring by one of cqe+1 entries rounded up to a power
// of two (nothing happens when that is the present size), as
// mlx5_resize_cq: RESIZE_CQ with the new ring, then the CQEs not yet
// polled are copied over until the RESIZE_CQ CQE the device wrote last
// into the old ring, which is consumed. The caller holds the poll lock.
func (q *CQ) Resize(cqe int, do func(provider.Udata) error) error {
	if cqe < 1 || cqe >= 1<<24 {
		return fmt.Errorf("%w: %d CQEs", errQueueSize, cqe)
	}
	n := pow2(uint32(cqe) + 1)
	if n == q.nent {
		return nil
	}
	mem, err := allocBuf(uintptr(n) * cqeSize)
	if err != nil {
		return err
	}
	for i := uint32(0); i < n; i++ {
		mem[i*cqeSize+cqeOpOwn] = cqeInvalid << 4
	}
	cmd := resizeCQ{BufAddr: addr(unsafe.Pointer(&mem[0])), CQESize: cqeSize}
	if err := do(provider.Udata{In: provider.Bytes(&cmd), Keep: unsafe.Pointer(&mem[0])}); err != nil {
		freeBuf(mem)
		return err
	}
	q.copyCQEs(unsafe.Pointer(&mem[0]), n)
	old := q.mem
	q.mem, q.cqes, q.nent = mem, unsafe.Pointer(&mem[0]), n
	q.setReady()
	return freeBuf(old)
}

// copyCQEs is mlx5_cq_resize_copy_cqes: from the consumer index i on,
// each CQE goes to slot i+1 of the new ring with that slot's owner bit, up
// to the RESIZE_CQ CQE, which is consumed. A slot whose owner bit says the
// device's, or a full turn without the RESIZE_CQ CQE, stops the copy, as
// libmlx5 stops (with a message).
func (q *CQ) copyCQEs(dst unsafe.Pointer, n uint32) {
	i := q.ci
	src := q.slot(i)
	start := src
	if q.hw(src, i) {
		return
	}
	for *(*byte)(unsafe.Add(src, cqeOpOwn))>>4 != cqeResizeCQ {
		d := unsafe.Add(dst, uintptr((i+1)&(n-1))*cqeSize)
		copy(unsafe.Slice((*byte)(d), cqeSize), unsafe.Slice((*byte)(src), cqeSize))
		own := byte(0)
		if (i+1)&n != 0 {
			own = 1
		}
		op := (*byte)(unsafe.Add(d, cqeOpOwn))
		*op = *op&^1 | own
		i++
		src = q.slot(i)
		if q.hw(src, i) || src == start {
			return
		}
	}
	q.ci++
}

// hw reports whether the owner bit of the CQE at index i says the device
// owns it (is_hw: the opcode is not looked at).
func (q *CQ) hw(cqe unsafe.Pointer, i uint32) bool {
	own := *(*byte)(unsafe.Add(cqe, cqeOpOwn)) & 1
	return (own == 1) != (i&q.nent != 0)
}

// Release frees the ring and the record.
func (q *CQ) Release() error {
	if q.db != nil {
		q.ctx.dbrecs.release(q.db, q.ctx.resp.CacheLineSize)
		q.db = nil
	}
	err := freeBuf(q.mem)
	q.mem, q.cqes = nil, nil
	return err
}
