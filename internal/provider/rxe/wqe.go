package rxe

import (
	"encoding/binary"
	"unsafe"

	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/uverbs"
)

// Sizes of the fixed parts of the work queue elements.
const (
	SendWQEHeader = unsafe.Sizeof(uverbs.RxeSendWqe{}) // 208; SGEs or inline data follow
	RecvWQEHeader = unsafe.Sizeof(uverbs.RxeRecvWqe{}) // 40; SGEs follow
	sgeSize       = unsafe.Sizeof(provider.SGE{})
)

// Byte offsets inside struct rxe_send_wr's union wr (at offset 24 of the
// WQE), from rdma_user_rxe.h and pinned by uverbs' ABI test.
const (
	offWR          = unsafe.Offsetof(uverbs.RxeSendWr{}.Wr)
	offRemoteAddr  = offWR + 0  // wr.rdma.remote_addr, wr.atomic.remote_addr
	offRDMARKey    = offWR + 8  // wr.rdma.rkey
	offCompareAdd  = offWR + 8  // wr.atomic.compare_add
	offSwap        = offWR + 16 // wr.atomic.swap
	offAtomicRKey  = offWR + 24 // wr.atomic.rkey
	offUDRemoteQPN = offWR + 0  // wr.ud.remote_qpn
	offUDQKey      = offWR + 4  // wr.ud.remote_qkey
	offUDAHNum     = offWR + 12 // wr.ud.ah_num
	offMWAddr      = offWR + 0  // wr.mw.addr
	offMWLength    = offWR + 8  // wr.mw.length
	offMWMRLKey    = offWR + 16 // wr.mw.mr_lkey
	offMWRKey      = offWR + 20 // wr.mw.mw_rkey
	offMWNewRKey   = offWR + 24 // wr.mw.rkey
	offMWAccess    = offWR + 28 // wr.mw.access
	offFlushLength = offWR + 8  // wr.flush.length
	offFlushRKey   = offWR + 12 // wr.flush.rkey
	offFlushType   = offWR + 16 // wr.flush.type (u8)
	offFlushLevel  = offWR + 17 // wr.flush.level (u8)
)

// SendWQESize is the element size the kernel uses for a send queue with
// the given capabilities: room for max(sge*16, inline) bytes after the
// header, rounded to a power of two of at least 64.
func SendWQESize(maxSGE, maxInline uint32) uintptr {
	return roundPow2(SendWQEHeader + max(uintptr(maxSGE)*sgeSize, uintptr(maxInline)))
}

// RecvWQESize is the element size of a receive queue or SRQ.
func RecvWQESize(maxSGE uint32) uintptr { return roundPow2(RecvWQEHeader + uintptr(maxSGE)*sgeSize) }

func roundPow2(n uintptr) uintptr {
	p := uintptr(64)
	for p < n {
		p <<= 1
	}
	return p
}

// WriteRecv fills a receive WQE at elem. The caller has checked the SGE
// count against the element size. Like rdma-core it writes the fields the
// kernel reads (id, the DMA state, the SGEs) and clears nothing else.
func WriteRecv(elem unsafe.Pointer, wr *provider.RecvWR) {
	w := (*uverbs.RxeRecvWqe)(elem)
	var length uint32
	for i := range wr.SGList {
		length += wr.SGList[i].Length
	}
	w.Id = wr.WRID
	w.Dma.Length = length
	w.Dma.Resid = length
	w.Dma.Cur_sge = 0
	w.Dma.Num_sge = uint32(len(wr.SGList))
	w.Dma.Sge_offset = 0
	if len(wr.SGList) > 0 {
		copy(unsafe.Slice((*provider.SGE)(unsafe.Add(elem, RecvWQEHeader)), len(wr.SGList)), wr.SGList)
	}
}

// writeRecv1 is WriteRecv for a work request with exactly one SGE, the
// common case: plain stores, without the runtime.memmove call copy makes
// (which under TCG costs more than the stores). It is separate from
// WriteRecv so that both stay small enough to be inlined into
// RecvRing.Post.
func writeRecv1(elem unsafe.Pointer, wr *provider.RecvWR) {
	w := (*uverbs.RxeRecvWqe)(elem)
	s := &wr.SGList[0]
	w.Id = wr.WRID
	w.Dma.Length = s.Length
	w.Dma.Resid = s.Length
	w.Dma.Cur_sge = 0
	w.Dma.Num_sge = 1
	w.Dma.Sge_offset = 0
	*(*provider.SGE)(unsafe.Add(elem, RecvWQEHeader)) = *s
}

// putSGEs copies sges to dst, the SGE array of a send WQE. One SGE, the
// common case, is a plain 16-byte store: copy would call runtime.memmove,
// a call and a size dispatch that cost more than the store (under TCG,
// much more).
func putSGEs(dst unsafe.Pointer, sges []provider.SGE) {
	switch len(sges) {
	case 0:
	case 1:
		*(*provider.SGE)(dst) = sges[0]
	default:
		copy(unsafe.Slice((*provider.SGE)(dst), len(sges)), sges)
	}
}

// WriteSend fills a send WQE at elem for wr, with ssn as the send sequence
// number. ahNum is the provider number of wr.AH for UD QPs (0 otherwise).
// The caller has validated wr against the QP (opcode, SGE count, inline
// size, atomic alignment).
func WriteSend(elem unsafe.Pointer, wr *provider.SendWR, ud bool, ahNum uint32, ssn uint32) {
	w := (*uverbs.RxeSendWqe)(elem)
	// Clear what rdma-core clears (struct rxe_send_wr, 144 of the 208
	// header bytes) and set the rest of what the kernel reads below
	// (iova, state, the DMA state, ssn). status, mask, the PSNs,
	// ack_length and has_rd_atomic belong to the kernel: it sets them
	// when it takes the WQE and resets has_rd_atomic when it retires one.
	w.Wr = uverbs.RxeSendWr{}
	w.State = 0
	w.Iova = 0
	w.Wr.Wr_id = wr.WRID
	w.Wr.Opcode = uint32(wr.Opcode)
	flags := wr.Flags
	if wr.InlineData != nil {
		flags |= provider.SendInline
	} else {
		flags &^= provider.SendInline
	}
	w.Wr.Send_flags = uint32(flags)
	switch wr.Opcode {
	case provider.WRSendWithImm, provider.WRRDMAWriteWithImm:
		binary.BigEndian.PutUint32(w.Wr.Ex[:], wr.Imm)
	case provider.WRSendWithInv, provider.WRLocalInv:
		binary.NativeEndian.PutUint32(w.Wr.Ex[:], wr.InvalidateRKey)
	}
	put64 := func(off uintptr, v uint64) { *(*uint64)(unsafe.Add(elem, off)) = v }
	put32 := func(off uintptr, v uint32) { *(*uint32)(unsafe.Add(elem, off)) = v }
	switch wr.Opcode {
	case provider.WRRDMAWrite, provider.WRRDMAWriteWithImm, provider.WRRDMARead:
		put64(offRemoteAddr, wr.RemoteAddr)
		put32(offRDMARKey, wr.RKey)
		// The 6.1 requester builds the RETH from iova, not remote_addr.
		w.Iova = wr.RemoteAddr
	case provider.WRAtomicCmpAndSwp, provider.WRAtomicFetchAndAdd:
		put64(offRemoteAddr, wr.RemoteAddr)
		put64(offCompareAdd, wr.CompareAdd)
		put64(offSwap, wr.Swap)
		put32(offAtomicRKey, wr.RKey)
		w.Iova = wr.RemoteAddr
	case provider.WRFlush:
		put64(offRemoteAddr, wr.RemoteAddr)
		put32(offFlushLength, wr.FlushLength)
		put32(offFlushRKey, wr.RKey)
		*(*uint8)(unsafe.Add(elem, offFlushType)) = uint8(wr.FlushPlacement)
		*(*uint8)(unsafe.Add(elem, offFlushLevel)) = uint8(wr.FlushLevel)
		w.Iova = wr.RemoteAddr
	case provider.WRAtomicWrite:
		put64(offRemoteAddr, wr.RemoteAddr)
		put32(offRDMARKey, wr.RKey)
		w.Iova = wr.RemoteAddr
	case provider.WRBindMW:
		put64(offMWAddr, wr.Bind.Addr)
		put64(offMWLength, wr.Bind.Length)
		put32(offMWMRLKey, wr.Bind.MRLKey)
		put32(offMWRKey, wr.Bind.MWRKey)
		put32(offMWNewRKey, wr.Bind.NewRKey)
		put32(offMWAccess, wr.Bind.Access)
	case provider.WRSend, provider.WRSendWithImm, provider.WRSendWithInv:
		if ud {
			put32(offUDRemoteQPN, wr.RemoteQPN)
			put32(offUDQKey, wr.RemoteQKey)
			put32(offUDAHNum, ahNum)
		}
	}
	var length uint32
	if wr.InlineData != nil {
		length = uint32(len(wr.InlineData))
		copy(unsafe.Slice((*byte)(unsafe.Add(elem, SendWQEHeader)), len(wr.InlineData)), wr.InlineData)
		w.Dma.Num_sge = 1
	} else {
		for i := range wr.SGList {
			length += wr.SGList[i].Length
		}
		putSGEs(unsafe.Add(elem, SendWQEHeader), wr.SGList)
		w.Dma.Num_sge = uint32(len(wr.SGList))
	}
	switch wr.Opcode {
	case provider.WRFlush:
		length = wr.FlushLength // no local memory: the remote length
	case provider.WRAtomicWrite:
		// The 8 bytes travel in dma.atomic_wr, where inline data goes.
		*(*[8]byte)(unsafe.Add(elem, SendWQEHeader)) = wr.AtomicData
		length = 8
	}
	w.Dma.Length = length
	w.Dma.Resid = length
	w.Dma.Cur_sge = 0
	w.Dma.Sge_offset = 0
	w.Ssn = ssn
}

// PollCQ copies up to len(wc) completions from the CQ ring, oldest first,
// and releases their slots. It never blocks. It is the CQ's Poll (the
// method has the loop, so the seam's one interface call reaches it
// directly).
func PollCQ(q *Queue, wc []provider.WC) int {
	c := cq{q: q}
	return c.Poll(wc)
}
