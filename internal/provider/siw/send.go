package siw

import (
	"sync/atomic"
	"unsafe"

	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/uverbs"
)

// SendQueue is siw's provider.SendQueue, a mapped siw send queue. Its
// methods are called under the QP's send lock.
type SendQueue struct {
	r      ring
	put    uint32 // free-running producer counter
	sigAll bool
	errs   *provider.Errors
}

// NewSendQueue wraps the mapping of a send queue of num SQEs. sigAll
// marks every SQE signaled (the QP was created with sq_sig_all), as
// rdma-core does: the kernel completes only SQEs marked signaled. errs
// names the post operation in its errors.
func NewSendQueue(mem []byte, num uint32, sigAll bool, errs *provider.Errors) (*SendQueue, error) {
	r, err := newRing(mem, num, SQESize, 0)
	if err != nil {
		return nil, err
	}
	return &SendQueue{r: r, sigAll: sigAll, errs: errs}, nil
}

// Mem returns the mapping, for munmap.
func (s *SendQueue) Mem() []byte { return s.r.mem }

// Slots is the number of SQEs; all of them are usable.
func (s *SendQueue) Slots() uint32 { return s.r.mask + 1 }

// Post writes wrs in order, each after check and CheckSend accepted it,
// while the SQE at the producer counter is free. siw takes an SQE when
// its VALID flag is set; the doorbell (POST_SEND with no work requests, as
// rdma-core's siw_db) makes the kernel process the queue in the system
// call, so Post asks for it (kick). rdma-core skips it when the SQE before
// the list is still VALID (the kernel is busy and will reach the new
// ones); goverbs rings it for every list, which also restarts a queue
// whose earlier doorbell failed.
func (s *SendQueue) Post(wrs []provider.SendWR, check provider.Checker) (int, bool, error) {
	var err error
	n := 0
	for i := range wrs {
		wr := &wrs[i]
		if check != nil {
			if _, cerr := check.CheckSend(i, wr); cerr != nil {
				err = cerr
				break
			}
		}
		if r := CheckSend(wr); r != 0 {
			err = s.errs.At(i, r)
			break
		}
		if !s.CanPost(s.put) {
			err = s.errs.Full(i)
			break
		}
		s.post(wr)
		n++
	}
	return n, n > 0, err
}

// Mark returns the producer counter: the index of the next SQE.
func (s *SendQueue) Mark() uint32 { return s.put }

// Reset does nothing: siw's send queue keeps no sequence state.
func (s *SendQueue) Reset() {}

// CanPost reports whether the SQE at index i is free (the kernel took or
// never had it).
func (s *SendQueue) CanPost(i uint32) bool { return !s.r.valid(i) }

// post fills the SQE at the producer counter with wr, hands it to the
// kernel (VALID set with a release store after everything else) and
// advances the counter. The caller checked CanPost and CheckSend.
func (s *SendQueue) post(wr *provider.SendWR) {
	e := s.r.elem(s.put)
	sqe := (*uverbs.SiwSqe)(e)
	flags := uint16(uverbs.SIW_WQE_VALID)
	if s.sigAll || wr.Flags&provider.SendSignaled != 0 {
		flags |= uverbs.SIW_WQE_SIGNALLED
	}
	if wr.Flags&provider.SendSolicited != 0 {
		flags |= uverbs.SIW_WQE_SOLICITED
	}
	if wr.Flags&provider.SendFence != 0 {
		flags |= uverbs.SIW_WQE_READ_FENCE
	}
	sqe.Id = wr.WRID
	sqe.Raddr = wr.RemoteAddr
	sqe.Rkey = wr.RKey
	var op uint8
	switch wr.Opcode {
	case provider.WRRDMAWrite:
		op = uverbs.SIW_OP_WRITE
	case provider.WRRDMARead:
		op = uverbs.SIW_OP_READ
	case provider.WRSend:
		op = uverbs.SIW_OP_SEND
	case provider.WRSendWithInv:
		op = uverbs.SIW_OP_SEND_REMOTE_INV
		sqe.Rkey = wr.InvalidateRKey // the kernel sends sqe.rkey as the STag to invalidate
	}
	var nsge uint8
	if wr.InlineData != nil {
		// Inline data occupies sge[1..]; sge[0].length is its size.
		flags |= uverbs.SIW_WQE_INLINE
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&sqe.Sge[1])), MaxInline), wr.InlineData)
		sqe.Sge[0] = uverbs.SiwSge{Length: uint32(len(wr.InlineData))}
		nsge = 1
	} else {
		// struct siw_sge is struct ibv_sge: laddr, length, lkey.
		for i := range wr.SGList {
			g := &wr.SGList[i]
			sqe.Sge[i] = uverbs.SiwSge{Laddr: g.Addr, Length: g.Length, Lkey: g.LKey}
		}
		nsge = uint8(len(wr.SGList))
	}
	atomic.StoreUint32((*uint32)(unsafe.Add(e, offFlags)), wqeHead{flags: flags, numSGE: nsge, opcode: op}.word())
	s.put++
}

// Transmitted reports whether the kernel has taken every SQE posted
// before producer counter p: siw takes SQEs in order, so it is enough
// that the last one is no longer VALID. (A later post that wrapped into
// the same slot makes this report false until the kernel took that one
// too: conservative.) A taken SQE is being or has been sent; siw sends a
// user QP's SQEs in the doorbell's system call unless the socket is full.
func (s *SendQueue) Transmitted(p uint32) bool {
	return p == 0 || !s.r.valid(p-1)
}

// CheckSend refuses what siw cannot carry (it has no atomics, no
// immediate data, no memory windows or local invalidation for user QPs,
// no FLUSH or ATOMIC WRITE) with ReasonNotCapable, and inline data on
// anything but SEND and RDMA WRITE (the kernel's rule) with
// ReasonBadOpcode; 0 when siw can. The generic checks ran before (SGE
// count, inline size against the QP's capacities).
func CheckSend(wr *provider.SendWR) provider.Reason {
	switch wr.Opcode {
	case provider.WRSend, provider.WRRDMAWrite:
	case provider.WRRDMARead, provider.WRSendWithInv:
		if wr.InlineData != nil {
			return provider.ReasonBadOpcode
		}
	default:
		return provider.ReasonNotCapable
	}
	if wr.InlineData == nil && len(wr.SGList) > MaxSGE {
		return provider.ReasonTooManySGE
	}
	if len(wr.InlineData) > MaxInline {
		return provider.ReasonInlineTooLarge
	}
	return 0
}
