package pvrdma

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/uverbs"
)

// Offsets in struct pvrdma_sq_wqe_hdr's wr union (vmw_pvrdma-abi.h): the
// rdma and atomic members; uverbs.PvrdmaSqWqeHdr.Wr is the union's bytes.
const (
	offRDMARemoteAddr   = 0  // wr.rdma.remote_addr
	offRDMARKey         = 8  // wr.rdma.rkey
	offAtomicRemoteAddr = 0  // wr.atomic.remote_addr
	offAtomicCompareAdd = 8  // wr.atomic.compare_add
	offAtomicSwap       = 16 // wr.atomic.swap
	offAtomicRKey       = 24 // wr.atomic.rkey
	offUDRemoteQPN      = 0  // wr.ud.remote_qpn
	offUDRemoteQKey     = 4  // wr.ud.remote_qkey
	offUDAV             = 8  // wr.ud.av, a struct pvrdma_av
)

// sendFlagsMask are the send flags the WQE carries: rdma-core passes
// ibv_send_flags through (its pvrdma_send_flags are the same bits); INLINE
// is left out, as pvrdma has no inline data (the kernel grants
// max_inline_data 0).
const sendFlagsMask = provider.SendFence | provider.SendSignaled | provider.SendSolicited

// SendQueue is pvrdma's provider.SendQueue: send WQEs (struct
// pvrdma_sq_wqe_hdr and num_sge struct pvrdma_sge) after the ring state
// page of the QP's send buffer (rdma-core's pvrdma_post_send). Its methods
// run under the QP's send lock. Post rings the QP doorbell itself (a UAR
// store, no system call) and never asks for the kernel's.
type SendQueue struct {
	r       ring
	wqes    unsafe.Pointer
	wqeSize uintptr
	maxSGE  int
	ud      bool // a UD QP: its sends need an address vector
	atomics bool // the device reports atomic operations
	db      *uint32
	dbVal   uint32 // SEND and the QP handle
	posted  uint32 // free-running count of posted WQEs, for Mark
	rq      *RecvRing
	errs    *provider.Errors
}

// sendWQESize is the size of a send WQE with maxSGE SGEs, a power of two
// (rdma-core: align_next_power2(sizeof hdr + maxSGE * sizeof sge)).
func sendWQESize(maxSGE uint32) uintptr {
	return uintptr(pow2(uint32(SendHdrSize) + maxSGE*uint32(SGESize)))
}

// newSendQueue sets up a send queue of n WQEs of wqeSize bytes for up to
// maxSGE SGEs at wqes, indexed by the pvrdma_ring at state.
func newSendQueue(state, wqes unsafe.Pointer, n uint32, maxSGE int, wqeSize uintptr, ud, atomics bool,
	db *uint32, handle uint32, errs *provider.Errors) (*SendQueue, error) {
	if n == 0 || n&(n-1) != 0 || n > maxRingElems || wqeSize < SendHdrSize+uintptr(maxSGE)*SGESize {
		return nil, fmt.Errorf("%w: %d send WQEs of %d bytes, %d SGEs", errQueueSize, n, wqeSize, maxSGE)
	}
	return &SendQueue{r: newRing(state, n), wqes: wqes, wqeSize: wqeSize, maxSGE: maxSGE, ud: ud,
		atomics: atomics, db: db, dbVal: uarQPSend | handle, errs: errs}, nil
}

// Slots is the number of WQEs; every one is usable.
func (s *SendQueue) Slots() uint32 { return s.r.n }

// Post writes wrs in order, each after check and the provider's own
// limits (CheckSend) accepted it, and rings the QP doorbell once if it
// wrote any. A full queue returns the shared error; an invalid ring state
// the state error (rdma-core: EINVAL).
func (s *SendQueue) Post(wrs []provider.SendWR, check provider.Checker) (int, bool, error) {
	var err error
	n := 0
	for i := range wrs {
		wr := &wrs[i]
		var ah provider.AH
		if check != nil {
			var cerr error
			if ah, cerr = check.CheckSend(i, wr); cerr != nil {
				err = cerr
				break
			}
		}
		if r := s.CheckSend(wr); r != 0 {
			err = s.errs.At(i, r)
			break
		}
		var av *uverbs.PvrdmaAv
		if s.ud {
			a, ok := ah.(*addressHandle)
			if !ok { // the check passes only this context's AHs
				err = s.errs.At(i, provider.ReasonNotCapable)
				break
			}
			av = &a.av
		}
		slot, free, valid := s.r.space()
		if !valid {
			err = s.errs.State()
			break
		}
		if !free {
			err = s.errs.Full(i)
			break
		}
		s.write(unsafe.Add(s.wqes, uintptr(slot)*s.wqeSize), wr, av)
		s.r.produce()
		n++
	}
	if n > 0 {
		s.posted += uint32(n)
		ringDoorbell(s.db, s.dbVal)
	}
	return n, false, err
}

// write encodes wr into the WQE at e, with the address vector av on a UD
// QP; CheckSend accepted it.
func (s *SendQueue) write(e unsafe.Pointer, wr *provider.SendWR, av *uverbs.PvrdmaAv) {
	h := (*uverbs.PvrdmaSqWqeHdr)(e)
	*h = uverbs.PvrdmaSqWqeHdr{
		Wr_id: wr.WRID, Num_sge: uint32(len(wr.SGList)),
		Opcode:     uint32(wr.Opcode), // verbs' and pvrdma's values agree up to FETCH_AND_ADD (CheckSend)
		Send_flags: uint32(wr.Flags & sendFlagsMask),
	}
	switch wr.Opcode {
	case provider.WRSendWithImm, provider.WRRDMAWriteWithImm:
		binary.BigEndian.PutUint32(h.Ex[:], wr.Imm) // ex.imm_data is __be32
	}
	u := unsafe.Pointer(&h.Wr)
	if av != nil {
		*(*uint32)(unsafe.Add(u, offUDRemoteQPN)) = wr.RemoteQPN
		*(*uint32)(unsafe.Add(u, offUDRemoteQKey)) = wr.RemoteQKey
		*(*uverbs.PvrdmaAv)(unsafe.Add(u, offUDAV)) = *av
	}
	switch wr.Opcode {
	case provider.WRRDMAWrite, provider.WRRDMAWriteWithImm, provider.WRRDMARead:
		*(*uint64)(unsafe.Add(u, offRDMARemoteAddr)) = wr.RemoteAddr
		*(*uint32)(unsafe.Add(u, offRDMARKey)) = wr.RKey
	case provider.WRAtomicCmpAndSwp, provider.WRAtomicFetchAndAdd:
		*(*uint64)(unsafe.Add(u, offAtomicRemoteAddr)) = wr.RemoteAddr
		*(*uint64)(unsafe.Add(u, offAtomicCompareAdd)) = wr.CompareAdd
		if wr.Opcode == provider.WRAtomicCmpAndSwp {
			*(*uint64)(unsafe.Add(u, offAtomicSwap)) = wr.Swap
		}
		*(*uint32)(unsafe.Add(u, offAtomicRKey)) = wr.RKey
	}
	writeSGEs(unsafe.Add(e, SendHdrSize), wr.SGList)
}

// CheckSend refuses what this provider cannot carry, 0 when it can:
//   - inline data (pvrdma has none): ReasonNotCapable;
//   - atomics on a device that reports no atomic capability:
//     ReasonNotCapable;
//   - any opcode past RDMA READ and the two atomics (SEND_WITH_INV,
//     LOCAL_INV, BIND_MW, FLUSH, ATOMIC_WRITE: no user-space path in
//     rdma-core's pvrdma): ReasonNotCapable;
//   - more SGEs than the queue has room for: ReasonTooManySGE.
func (s *SendQueue) CheckSend(wr *provider.SendWR) provider.Reason {
	switch wr.Opcode {
	case provider.WRSend, provider.WRSendWithImm, provider.WRRDMAWrite, provider.WRRDMAWriteWithImm, provider.WRRDMARead:
	case provider.WRAtomicCmpAndSwp, provider.WRAtomicFetchAndAdd:
		if !s.atomics {
			return provider.ReasonNotCapable
		}
	default:
		return provider.ReasonNotCapable
	}
	if wr.InlineData != nil {
		return provider.ReasonNotCapable
	}
	if len(wr.SGList) > s.maxSGE {
		return provider.ReasonTooManySGE
	}
	return 0
}

// Mark returns the number of WQEs posted so far.
func (s *SendQueue) Mark() uint32 { return s.posted }

// Transmitted reports whether the device has taken every WQE posted
// before mark: the WQEs between its consumer and our producer index are
// the last ones posted.
func (s *SendQueue) Transmitted(mark uint32) bool {
	return int32(s.posted-s.r.count()-mark) >= 0
}

// Reset empties the send queue and the receive queue after the QP went
// back to RESET, as rdma-core's pvrdma_modify_qp does
// (pvrdma_init_qp_queue): the device starts both from index 0.
func (s *SendQueue) Reset() {
	s.r.reset()
	if s.rq != nil {
		s.rq.reset()
	}
}
