package mlx5

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/uverbs"
)

// qp is mlx5's provider.QP: one buffer holding the receive queue and then
// the send queue, and a doorbell record (create_qp).
type qp struct {
	ctx  *ucontext
	attr provider.QPAttr
	mem  []byte
	db   unsafe.Pointer // [0] receive head, [1] send producer; big-endian
	cmd  createQP
	resp createQPResp
	caps uverbs.QpCap // what CREATE_QP carries (CreateCaps)
	uidx uint32
	qpn  uint32

	sq  *sendQueue
	rq  *recvQueue
	srq *srq // the SRQ receives come from, or nil

	rqSize, sqSize     uint32 // bytes
	maxInline          uint32
	sqMaxPost, sqMaxGS uint32
	started            bool
}

// sqOverhead is _sq_overhead for the operations libmlx5 assumes when the
// caller names none: the largest segments an RC or UC WQE may carry
// before its data (a UMR), or a UD WQE's datagram segment.
func sqOverhead(typ uint8) (uint32, error) {
	switch typ {
	case uverbs.IB_UVERBS_QPT_RC, uverbs.IB_UVERBS_QPT_UC:
		return mwOverhead, nil
	case uverbs.IB_UVERBS_QPT_UD:
		return ctrlSegSize + datagramSeg, nil
	}
	return 0, fmt.Errorf("%w: QP type %d", ErrNotYet, typ)
}

// NewQP sizes the queues as libmlx5's mlx5_calc_wq_size and allocates the
// buffer and then the doorbell record.
func (c *ucontext) NewQP(attr provider.QPAttr) (provider.QP, error) {
	if attr.Type != uverbs.IB_UVERBS_QPT_RC && attr.Type != uverbs.IB_UVERBS_QPT_UC && attr.Type != uverbs.IB_UVERBS_QPT_UD {
		return nil, fmt.Errorf("%w: QP type %d", ErrNotYet, attr.Type)
	}
	p := &qp{ctx: c, attr: attr, caps: attr.Cap}
	if attr.SRQ {
		s, ok := attr.SharedRQ.(*srq)
		if !ok {
			return nil, fmt.Errorf("mlx5: a QP on an SRQ of another provider (%T)", attr.SharedRQ)
		}
		p.srq = s
	}
	r := &c.resp
	a := attr.Cap
	// The send queue (mlx5_calc_sq_size).
	if a.Send_wr > 0 {
		over, err := sqOverhead(attr.Type)
		if err != nil {
			return nil, err
		}
		inl := uint32(0)
		if a.Inline_data > 0 {
			if a.Inline_data > 1<<20 {
				return nil, fmt.Errorf("%w: %d bytes inline", errQueueSize, a.Inline_data)
			}
			inl = over + uint32(align(uintptr(4+a.Inline_data), 16))
		}
		maxGather := (uint32(r.MaxSqDescSz) - over) / dataSegSize
		if uint32(r.MaxSqDescSz) < over || a.Send_sge > maxGather {
			return nil, fmt.Errorf("%w: %d send SGEs (at most %d)", errQueueSize, a.Send_sge, maxGather)
		}
		size := max(over+a.Send_sge*dataSegSize, inl)
		if size > uint32(r.MaxSqDescSz) {
			return nil, fmt.Errorf("%w: a send WQE of %d bytes", errQueueSize, size)
		}
		wqe := uint32(align(uintptr(size), sendWQEBB))
		if wqe > uint32(r.MaxSqDescSz) {
			return nil, fmt.Errorf("%w: a send WQE of %d bytes", errQueueSize, wqe)
		}
		p.maxInline = wqe - over - 4
		p.caps.Inline_data = p.maxInline
		if a.Send_wr > 0x7fffffff/uint32(r.MaxSqDescSz) {
			return nil, fmt.Errorf("%w: %d send WRs", errQueueSize, a.Send_wr)
		}
		p.sqSize = pow2(a.Send_wr * wqe)
		if p.sqSize/sendWQEBB > r.MaxSendWQEBB {
			return nil, fmt.Errorf("%w: %d send WRs", errQueueSize, a.Send_wr)
		}
		p.sqMaxPost = p.sqSize / wqe
		p.sqMaxGS = a.Send_sge
	}
	// The receive queue (mlx5_calc_rq_size).
	var rqCnt, rqShift, rqMaxGS uint32
	if a.Recv_wr > 0 && !attr.SRQ {
		if a.Recv_wr > r.MaxRecvWR {
			return nil, fmt.Errorf("%w: %d receive WRs", errQueueSize, a.Recv_wr)
		}
		if a.Recv_sge > uint32(r.MaxRqDescSz)/dataSegSize {
			return nil, fmt.Errorf("%w: %d receive SGEs", errQueueSize, a.Recv_sge)
		}
		wqe := pow2(max(a.Recv_sge, 1) * dataSegSize)
		if wqe > uint32(r.MaxRqDescSz) {
			return nil, fmt.Errorf("%w: %d receive SGEs", errQueueSize, a.Recv_sge)
		}
		p.rqSize = max(pow2(a.Recv_wr)*wqe, sendWQEBB)
		rqCnt = p.rqSize / wqe
		rqShift = ilog32(wqe - 1)
		rqMaxGS = wqe / dataSegSize
	}
	if p.sqSize+p.rqSize == 0 {
		return nil, fmt.Errorf("%w: a QP without queues", errQueueSize)
	}
	var err error
	if p.mem, err = allocBuf(uintptr(p.sqSize + p.rqSize)); err != nil {
		return nil, err
	}
	if p.db, err = c.dbrecs.alloc(r.CacheLineSize); err != nil {
		freeBuf(p.mem)
		return nil, err
	}
	base := unsafe.Pointer(&p.mem[0])
	if p.sqSize > 0 {
		p.sq = &sendQueue{qp: p, start: unsafe.Add(base, p.rqSize), wqeCnt: p.sqSize / sendWQEBB,
			maxPost: p.sqMaxPost, maxGS: p.sqMaxGS, maxInline: p.maxInline, errs: attr.SendErrors}
		p.sq.end = unsafe.Add(p.sq.start, p.sqSize)
		p.sq.slots = make([]sendSlot, p.sq.wqeCnt)
		if attr.SigAll {
			p.sq.sigBits = ctrlCQUpdate
		}
	}
	if rqCnt > 0 {
		p.rq = &recvQueue{qp: p, start: base, wqeCnt: rqCnt, shift: rqShift, maxGS: rqMaxGS,
			maxPost: rqCnt, errs: attr.RecvErrors}
		p.rq.wrid = make([]uint64, rqCnt)
	}
	if r.CQEVersion == 1 {
		if p.uidx, err = c.uidxs.alloc(); err != nil {
			p.Release()
			return nil, err
		}
	} else {
		p.uidx = 0xffffff
	}
	p.cmd = createQP{BufAddr: addr(base), DBAddr: addr(p.db), SQWQECount: p.sqSize / sendWQEBB,
		RQWQECount: rqCnt, RQWQEShift: rqShift, UIdx: p.uidx,
		// libmlx5 asks for scatter to CQE unless MLX5_SCATTER_TO_CQE=0.
		Flags: qpFlagScatterCQE}
	return p, nil
}

// CreateCaps is what CREATE_QP carries: the caller's capacities with the
// inline size libmlx5 computed (ibv_cmd_create_qp_ex sends the rewritten
// ibv_qp_cap).
func (p *qp) CreateCaps() uverbs.QpCap { return p.caps }

// Udata is CREATE_QP's driver data.
func (p *qp) Udata() provider.Udata {
	return provider.Udata{In: provider.Bytes(&p.cmd), Out: provider.Bytes(&p.resp)}
}

// Start attaches the QP to the BlueFlame register the kernel chose and
// enters it in the context's tables.
func (p *qp) Start(qpn uint32, _ uverbs.QpCap) (provider.QPInfo, error) {
	if p.resp.BfregIndex >= uint32(len(p.ctx.bfs)) {
		return provider.QPInfo{}, fmt.Errorf("%w: bfreg index %d of %d", errDevice, p.resp.BfregIndex, len(p.ctx.bfs))
	}
	p.qpn = qpn
	info := provider.QPInfo{}
	if p.sq != nil {
		p.sq.bf = &p.ctx.bfs[p.resp.BfregIndex]
		p.sq.qpn = qpn
		info.Send = p.sq
		info.Caps.MaxSendWR = int(p.sq.maxPost)
		info.Caps.MaxSendSGE = int(p.sq.maxGS)
		info.Caps.MaxInlineData = int(p.maxInline)
	} else {
		info.Send = noSend{p.attr.SendErrors}
	}
	if p.rq != nil {
		info.Recv = p.rq
		info.Caps.MaxRecvWR = int(p.rq.maxPost)
		info.Caps.MaxRecvSGE = int(p.rq.maxGS)
	}
	if p.ctx.resp.CQEVersion == 1 {
		p.ctx.byUIdx.set(p.uidx, p)
	} else {
		p.ctx.byQPN.set(qpn, p)
	}
	p.started = true
	return info, nil
}

// Release removes the QP from the tables and frees its memory.
func (p *qp) Release() error {
	if p.rq != nil {
		p.rq.Shut()
	}
	if p.started {
		if p.ctx.resp.CQEVersion == 1 {
			p.ctx.byUIdx.set(p.uidx, nil)
		} else {
			p.ctx.byQPN.set(p.qpn, nil)
		}
		p.started = false
	}
	if p.ctx.resp.CQEVersion == 1 && p.uidx != 0xffffff {
		p.ctx.uidxs.free(p.uidx)
		p.uidx = 0xffffff
	}
	if p.db != nil {
		p.ctx.dbrecs.release(p.db, p.ctx.resp.CacheLineSize)
		p.db = nil
	}
	err := freeBuf(p.mem)
	p.mem, p.sq, p.rq = nil, nil, nil
	return err
}

// sendQueue is a QP's send queue (struct mlx5_wq sq and the QP's posting
// state). Its methods run under the QP's send lock.
type sendQueue struct {
	qp         *qp
	start, end unsafe.Pointer
	wqeCnt     uint32
	maxPost    uint32
	maxGS      uint32
	maxInline  uint32
	sigBits    byte
	qpn        uint32
	bf         *bf
	errs       *provider.Errors

	head, curPost uint32
	tail          uint32 // moved by the CQ's Poll (under its lock)
	fmCache       byte
	slots         []sendSlot // by WQE index
}

// sendSlot is what a send completion needs of the WQE at its index:
// libmlx5's wrid, wqe_head and wr_data, in one place.
type sendSlot struct {
	wrid uint64
	head uint32 // the work request's number (the send queue's head then)
	data uint32 // the completion opcode of a NOP-completed operation
}

func (s *sendQueue) wqe(idx uint32) unsafe.Pointer {
	return unsafe.Add(s.start, uintptr(idx)*sendWQEBB)
}

// Post writes the work requests as _mlx5_post_send, then rings the
// doorbell (post_send_db). It needs no kernel doorbell.
func (s *sendQueue) Post(wrs []provider.SendWR, check provider.Checker) (int, bool, error) {
	var ctrl unsafe.Pointer
	var err error
	nreq := 0
	inl := false
	size := uint32(0)
	nextFence := s.fmCache
	typ := s.qp.attr.Type
	for ; nreq < len(wrs); nreq++ {
		wr := &wrs[nreq]
		var ah provider.AH
		if check != nil {
			if ah, err = check.CheckSend(nreq, wr); err != nil {
				break
			}
		}
		var op byte
		switch wr.Opcode {
		case provider.WRSend:
			op = opSend
		case provider.WRSendWithImm:
			op = opSendImm
		case provider.WRSendWithInv:
			op = opSendInval
		case provider.WRRDMAWrite:
			op = opRDMAWrite
		case provider.WRRDMAWriteWithImm:
			op = opRDMAWriteImm
		case provider.WRRDMARead:
			op = opRDMARead
		case provider.WRAtomicCmpAndSwp:
			op = opAtomicCS
		case provider.WRAtomicFetchAndAdd:
			op = opAtomicFA
		default:
			err = s.errs.At(nreq, provider.ReasonNotCapable)
		}
		if err != nil {
			break
		}
		// mlx5_wq_overflow: the CQ's Poll moves tail.
		if s.head+uint32(nreq)-atomic.LoadUint32(&s.tail) >= s.maxPost {
			err = s.errs.Full(nreq)
			break
		}
		if uint32(len(wr.SGList)) > s.maxGS && wr.InlineData == nil {
			err = s.errs.At(nreq, provider.ReasonTooManySGE)
			break
		}
		fence := nextFence
		if wr.Flags&provider.SendFence != 0 {
			fence = ctrlFence
		}
		nextFence = 0
		idx := s.curPost & (s.wqeCnt - 1)
		ctrl = s.wqe(idx)
		seg := ctrl
		*(*uint32)(unsafe.Add(seg, 8)) = 0
		var imm uint32
		switch wr.Opcode {
		case provider.WRSendWithImm, provider.WRRDMAWriteWithImm:
			imm = beWord32(wr.Imm)
		case provider.WRSendWithInv:
			imm = beWord32(wr.InvalidateRKey)
		}
		*(*uint32)(unsafe.Add(seg, 12)) = imm
		fm := s.sigBits | fence
		if wr.Flags&provider.SendSignaled != 0 {
			fm |= ctrlCQUpdate
		}
		if wr.Flags&provider.SendSolicited != 0 {
			fm |= ctrlSolicited
		}
		*(*byte)(unsafe.Add(seg, 11)) = fm
		seg = unsafe.Add(seg, ctrlSegSize)
		size = ctrlSegSize / 16
		slot := &s.slots[idx]
		slot.data = 0
		atomic := false
		switch wr.Opcode {
		case provider.WRRDMARead, provider.WRRDMAWrite, provider.WRRDMAWriteWithImm:
			if typ == uverbs.IB_UVERBS_QPT_UD ||
				wr.Opcode == provider.WRRDMARead && typ == uverbs.IB_UVERBS_QPT_UC {
				break
			}
			setRaddr(seg, wr.RemoteAddr, wr.RKey)
			seg = unsafe.Add(seg, raddrSegSize)
			size += raddrSegSize / 16
		case provider.WRAtomicCmpAndSwp, provider.WRAtomicFetchAndAdd:
			if typ != uverbs.IB_UVERBS_QPT_RC {
				break
			}
			if !s.qp.ctx.atomics {
				err = s.errs.At(nreq, provider.ReasonNotCapable)
				break
			}
			setRaddr(seg, wr.RemoteAddr, wr.RKey)
			seg = unsafe.Add(seg, raddrSegSize)
			if wr.Opcode == provider.WRAtomicCmpAndSwp {
				putBE64(seg, wr.Swap)
				putBE64(unsafe.Add(seg, 8), wr.CompareAdd)
			} else {
				putBE64(seg, wr.CompareAdd) // compare is left as it was
			}
			seg = unsafe.Add(seg, atomSegSize)
			size += (raddrSegSize + atomSegSize) / 16
			atomic = true
		}
		if err != nil {
			break
		}
		if typ == uverbs.IB_UVERBS_QPT_UD {
			a, ok := ah.(*addressHandle)
			if !ok {
				err = s.errs.At(nreq, provider.ReasonNotCapable)
				break
			}
			setDatagram(seg, a, wr.RemoteQPN, wr.RemoteQKey)
			seg = unsafe.Add(seg, datagramSeg)
			size += datagramSeg / 16
			if seg == s.end {
				seg = s.start
			}
		}
		if wr.Flags&provider.SendInline != 0 && (wr.InlineData != nil || len(wr.SGList) > 0) {
			sz, ok := s.setInline(seg, wr)
			if !ok {
				err = s.errs.At(nreq, provider.ReasonInlineTooLarge)
				break
			}
			inl = true
			size += sz
		} else {
			d := seg
			for i := range wr.SGList {
				g := &wr.SGList[i]
				if d == s.end {
					d = s.start
				}
				if g.Length == 0 {
					continue
				}
				n := g.Length
				if atomic {
					n = atomicSize
				}
				putBE32(d, n)
				putBE32(unsafe.Add(d, 4), g.LKey)
				putBE64(unsafe.Add(d, 8), g.Addr)
				d = unsafe.Add(d, dataSegSize)
				size += dataSegSize / 16
			}
		}
		putBE32(ctrl, (s.curPost&0xffff)<<8|uint32(op))
		putBE32(unsafe.Add(ctrl, 4), size|s.qpn<<8)
		slot.wrid = wr.WRID
		slot.head = s.head + uint32(nreq)
		s.curPost += (size*16 + sendWQEBB - 1) / sendWQEBB
	}
	s.fmCache = nextFence
	s.doorbell(nreq, inl, size, ctrl)
	return nreq, false, err
}

// setInline copies the work request's data into the WQE after a 4-byte
// inline header, wrapping at the end of the queue (set_data_inl_seg), and
// returns its size in 16-byte units.
func (s *sendQueue) setInline(seg unsafe.Pointer, wr *provider.SendWR) (uint32, bool) {
	hdr := seg
	dst := unsafe.Add(seg, 4)
	total := uint32(0)
	put := func(src []byte) bool {
		total += uint32(len(src))
		if total > s.maxInline {
			return false
		}
		if room := uintptr(s.end) - uintptr(dst); uintptr(len(src)) > room {
			copy(unsafe.Slice((*byte)(dst), room), src[:room])
			src = src[room:]
			dst = s.start
		}
		copy(unsafe.Slice((*byte)(dst), len(src)), src)
		dst = unsafe.Add(dst, len(src))
		return true
	}
	if wr.InlineData != nil {
		if !put(wr.InlineData) {
			return 0, false
		}
	} else {
		for i := range wr.SGList {
			g := &wr.SGList[i]
			// The caller's address, as libmlx5 reads it (the SGE names
			// memory the caller registered and keeps).
			if !put(unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&g.Addr))), g.Length)) {
				return 0, false
			}
		}
	}
	if total == 0 {
		return 0, true
	}
	putBE32(hdr, total|inlineSeg)
	return uint32(align(uintptr(total+4), 16) / 16), true
}

func setRaddr(seg unsafe.Pointer, raddr uint64, rkey uint32) {
	putBE64(seg, raddr)
	putBE32(unsafe.Add(seg, 8), rkey)
	*(*uint32)(unsafe.Add(seg, 12)) = 0
}

// doorbell is post_send_db: the send doorbell record, then through the
// BlueFlame register either the whole WQE (one small WQE) or its first 8
// bytes.
func (s *sendQueue) doorbell(nreq int, inl bool, size uint32, ctrl unsafe.Pointer) {
	if nreq == 0 {
		return
	}
	s.head += uint32(nreq)
	toDevice()
	provider.StoreRelease((*uint32)(unsafe.Add(s.qp.db, 4*sndDBR)), beWord32(s.curPost&0xffff))
	b := s.bf
	if b.needLock {
		b.lock.Lock()
		wcStartLocked()
	} else {
		wcStart()
	}
	reg := unsafe.Add(b.reg, b.offset)
	if nreq == 1 && b.uuarn != 0 && size > 1 && size <= b.bufSize/16 {
		// mlx5_bf_copy: 64-byte blocks (copy64), wrapping the source at
		// the end of the queue. (prefer_bf is libmlx5's
		// default, so inline or not makes no difference here.)
		_ = inl
		n := align(uintptr(size)*16, 64)
		if n <= uintptr(s.end)-uintptr(ctrl) {
			copyFlush(reg, ctrl, n) // the WQE does not wrap: one call
		} else {
			src := ctrl
			for ; n > 0; n -= 64 {
				copy64(reg, src)
				reg = unsafe.Add(reg, 64)
				src = unsafe.Add(src, 64)
				if src == s.end {
					src = s.start
				}
			}
			wcFlush()
		}
	} else {
		store64((*uint64)(reg), *(*uint64)(ctrl))
		wcFlush()
	}
	b.offset ^= b.bufSize
	if b.needLock {
		b.lock.Unlock()
	}
}

// Mark returns the send queue's producer count.
func (s *sendQueue) Mark() uint32 { return s.head }

// Transmitted reports whether the completions polled cover everything
// posted before mark.
func (s *sendQueue) Transmitted(mark uint32) bool {
	return int32(atomic.LoadUint32(&s.tail)-mark) >= 0
}

// Reset forgets the QP's indices after it went back to RESET
// (mlx5_init_qp_indices, and both doorbell records cleared), the receive
// queue's too: the seam resets a QP through its send queue. The fence
// cache stays, as in libmlx5.
func (s *sendQueue) Reset() {
	s.head, s.curPost = 0, 0
	atomic.StoreUint32(&s.tail, 0)
	atomic.StoreUint32((*uint32)(unsafe.Add(s.qp.db, 4*sndDBR)), 0)
	if r := s.qp.rq; r != nil {
		r.reset()
	} else {
		atomic.StoreUint32((*uint32)(unsafe.Add(s.qp.db, 4*rcvDBR)), 0)
	}
}

// noSend is the send queue of a QP created without one.
type noSend struct{ errs *provider.Errors }

func (n noSend) Post(wrs []provider.SendWR, _ provider.Checker) (int, bool, error) {
	if len(wrs) == 0 {
		return 0, false, nil
	}
	return 0, false, n.errs.Full(0)
}
func (noSend) Mark() uint32            { return 0 }
func (noSend) Transmitted(uint32) bool { return true }
func (noSend) Reset()                  {}

// recvQueue is a QP's receive queue.
type recvQueue struct {
	qp      *qp
	start   unsafe.Pointer
	wqeCnt  uint32
	shift   uint32
	maxGS   uint32
	maxPost uint32
	errs    *provider.Errors
	lock    provider.Lock

	head uint32
	tail uint32 // moved by the CQ's Poll
	wrid []uint64
}

// Post writes receive WQEs (data segments, an invalid-lkey terminator
// when there is room) and then the receive doorbell record
// (mlx5_post_recv).
func (r *recvQueue) Post(wrs []provider.RecvWR) error {
	if !r.lock.Lock() {
		return r.errs.Closed()
	}
	var err error
	ind := r.head & (r.wqeCnt - 1)
	nreq := 0
	for ; nreq < len(wrs); nreq++ {
		wr := &wrs[nreq]
		if r.head+uint32(nreq)-atomic.LoadUint32(&r.tail) >= r.maxPost {
			err = r.errs.Full(nreq)
			break
		}
		if uint32(len(wr.SGList)) > r.maxGS {
			err = r.errs.At(nreq, provider.ReasonTooManySGE)
			break
		}
		scat := unsafe.Add(r.start, uintptr(ind)<<r.shift)
		j := uint32(0)
		for i := range wr.SGList {
			g := &wr.SGList[i]
			if g.Length == 0 {
				continue
			}
			d := unsafe.Add(scat, uintptr(j)*dataSegSize)
			putBE32(d, g.Length)
			putBE32(unsafe.Add(d, 4), g.LKey)
			putBE64(unsafe.Add(d, 8), g.Addr)
			j++
		}
		if j < r.maxGS {
			d := unsafe.Add(scat, uintptr(j)*dataSegSize)
			putBE32(d, 0)
			putBE32(unsafe.Add(d, 4), invalidLKey)
			putBE64(unsafe.Add(d, 8), 0)
		}
		r.wrid[ind] = wr.WRID
		ind = (ind + 1) & (r.wqeCnt - 1)
	}
	if nreq > 0 {
		r.head += uint32(nreq)
		toDevice()
		provider.StoreRelease((*uint32)(unsafe.Add(r.qp.db, 4*rcvDBR)), beWord32(r.head&0xffff))
	}
	r.lock.Unlock()
	return err
}

// reset zeroes the receive queue's indices and doorbell record, under its
// lock (a closed queue stays closed).
func (r *recvQueue) reset() {
	locked := r.lock.Lock()
	r.head = 0
	atomic.StoreUint32(&r.tail, 0)
	atomic.StoreUint32((*uint32)(unsafe.Add(r.qp.db, 4*rcvDBR)), 0)
	if locked {
		r.lock.Unlock()
	}
}

// Posted returns how many receives the device has not consumed.
func (r *recvQueue) Posted() int {
	if r.lock.Closed() {
		return 0
	}
	return int(r.head - atomic.LoadUint32(&r.tail))
}

// Shut refuses later posts and waits for one in progress.
func (r *recvQueue) Shut() {
	if r.lock.Lock() {
		r.lock.CloseUnlock()
	}
}

var (
	_ provider.Context       = (*ucontext)(nil)
	_ provider.DeviceQuerier = (*ucontext)(nil)
	_ provider.CQ            = (*CQ)(nil)
	_ provider.CQCleaner     = (*CQ)(nil)
	_ provider.BadCQEs       = (*CQ)(nil)
	_ provider.QP            = (*qp)(nil)
	_ provider.SendQueue     = (*sendQueue)(nil)
	_ provider.RecvQueue     = (*recvQueue)(nil)
)
