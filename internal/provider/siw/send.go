package siw

import (
	"sync/atomic"
	"unsafe"

	"github.com/goverbs/goverbs/uverbs"
	"github.com/goverbs/goverbs/verbs"
)

// SendQueue is a mapped siw send queue. Its methods are called under the
// QP's send lock.
type SendQueue struct {
	r      ring
	put    uint32 // free-running producer counter
	sigAll bool
}

// NewSendQueue wraps the mapping of a send queue of num SQEs. sigAll
// marks every SQE signaled (the QP was created with sq_sig_all), as
// rdma-core does: the kernel completes only SQEs marked signaled.
func NewSendQueue(mem []byte, num uint32, sigAll bool) (*SendQueue, error) {
	r, err := newRing(mem, num, SQESize, 0)
	if err != nil {
		return nil, err
	}
	return &SendQueue{r: r, sigAll: sigAll}, nil
}

// Mem returns the mapping, for munmap.
func (s *SendQueue) Mem() []byte { return s.r.mem }

// Slots is the number of SQEs; all of them are usable.
func (s *SendQueue) Slots() uint32 { return s.r.mask + 1 }

// Put returns the producer counter: the index of the next SQE.
func (s *SendQueue) Put() uint32 { return s.put }

// CanPost reports whether the SQE at index i is free (the kernel took or
// never had it).
func (s *SendQueue) CanPost(i uint32) bool { return !s.r.valid(i) }

// Post fills the SQE at the producer counter with wr, hands it to the
// kernel (VALID set with a release store after everything else) and
// advances the counter. The caller checked CanPost(Put()) and CheckSend.
func (s *SendQueue) Post(wr *verbs.SendWR) {
	e := s.r.elem(s.put)
	sqe := (*uverbs.SiwSqe)(e)
	flags := uint16(uverbs.SIW_WQE_VALID)
	if s.sigAll || wr.Flags&verbs.SendSignaled != 0 {
		flags |= uverbs.SIW_WQE_SIGNALLED
	}
	if wr.Flags&verbs.SendSolicited != 0 {
		flags |= uverbs.SIW_WQE_SOLICITED
	}
	if wr.Flags&verbs.SendFence != 0 {
		flags |= uverbs.SIW_WQE_READ_FENCE
	}
	sqe.Id = wr.WRID
	sqe.Raddr = wr.RemoteAddr
	sqe.Rkey = wr.RKey
	var op uint8
	switch wr.Opcode {
	case verbs.WRRDMAWrite:
		op = uverbs.SIW_OP_WRITE
	case verbs.WRRDMARead:
		op = uverbs.SIW_OP_READ
	case verbs.WRSend:
		op = uverbs.SIW_OP_SEND
	case verbs.WRSendWithInv:
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
// no FLUSH or ATOMIC WRITE) with verbs.ErrNotCapable, and inline data on
// anything but SEND and RDMA WRITE (the kernel's rule) with
// verbs.ErrBadOpcode. The caller checked the rest (SGE count, inline
// size).
func CheckSend(wr *verbs.SendWR) error {
	switch wr.Opcode {
	case verbs.WRSend, verbs.WRRDMAWrite:
	case verbs.WRRDMARead, verbs.WRSendWithInv:
		if wr.InlineData != nil {
			return verbs.ErrBadOpcode
		}
	default:
		return verbs.ErrNotCapable
	}
	if wr.InlineData == nil && len(wr.SGList) > MaxSGE {
		return verbs.ErrTooManySGE
	}
	if len(wr.InlineData) > MaxInline {
		return verbs.ErrInlineTooLarge
	}
	return nil
}
