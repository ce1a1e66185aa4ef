package siw

import (
	"sync/atomic"
	"unsafe"

	"github.com/goverbs/goverbs/uverbs"
	"github.com/goverbs/goverbs/verbs"
)

// CQ is a mapped siw completion queue: num CQEs followed by the
// notification control word.
type CQ struct {
	r    ring
	ctrl *uint32
	// get is the consumer counter. Poll moves it under the caller's
	// lock; Available and Pending read it without that lock, so it is
	// accessed atomically.
	get atomic.Uint32
}

// NewCQ wraps the mapping of a CQ with num CQEs and disarms it, as
// rdma-core does at creation.
func NewCQ(mem []byte, num uint32) (*CQ, error) {
	r, err := newRing(mem, num, CQESize, ctrlSize)
	if err != nil {
		return nil, err
	}
	c := &CQ{r: r, ctrl: (*uint32)(unsafe.Add(r.base, uintptr(num)*CQESize))}
	atomic.StoreUint32(c.ctrl, uverbs.SIW_NOTIFY_NOT)
	return c, nil
}

// Mem returns the mapping, for munmap.
func (c *CQ) Mem() []byte { return c.r.mem }

// Poll copies up to len(wc) completions, oldest first, and hands their
// slots back to the kernel. It never blocks; the caller serializes Polls.
func (c *CQ) Poll(wc []verbs.WorkCompletion) int {
	get := c.get.Load()
	n := 0
	for n < len(wc) {
		e := c.r.elem(get)
		hw := (*uint32)(unsafe.Add(e, offFlags))
		h := cqeHeadOf(atomic.LoadUint32(hw)) // acquire: the CQE is written
		if h.flags&uverbs.SIW_WQE_VALID == 0 {
			break
		}
		cqe := (*uverbs.SiwCqe)(e)
		w := &wc[n]
		*w = verbs.WorkCompletion{WRID: cqe.Id, ByteLen: cqe.Bytes, QPNum: uint32(cqe.Qp_id)}
		if int(h.opcode) < len(wcOpcode) && int(h.status) < len(wcStatus) {
			w.Opcode = wcOpcode[h.opcode]
			w.Status = wcStatus[h.status]
		} else {
			w.Status = verbs.WCGeneralErr
		}
		if h.flags&uverbs.SIW_WQE_REM_INVAL != 0 {
			w.Flags = verbs.WCWithInvalidate
			w.ImmData = uint32(cqe.Imm_data)
		}
		// Release: the copy above completes before the kernel may
		// reuse the slot.
		atomic.StoreUint32(hw, 0)
		get++
		n++
	}
	if n > 0 {
		c.get.Store(get)
	}
	return n
}

// Available counts the completions waiting to be polled.
func (c *CQ) Available() uint32 {
	get := c.get.Load()
	var n uint32
	for n <= c.r.mask && c.r.valid(get+n) {
		n++
	}
	return n
}

// Pending reports whether a completion is waiting to be polled.
func (c *CQ) Pending() bool { return c.r.valid(c.get.Load()) }

// Arm requests a completion event for the next completion (solicitedOnly:
// the next solicited one), by storing the notify flags in the CQ's mapped
// control word: no system call. The store is sequentially consistent (a
// full barrier), so a CQE check after Arm cannot miss a completion the
// kernel wrote before it saw the armed word: the kernel sets a CQE's VALID
// and then, after a full barrier, reads the word.
func (c *CQ) Arm(solicitedOnly bool) {
	f := uint32(uverbs.SIW_NOTIFY_SOLICITED | uverbs.SIW_NOTIFY_NEXT_COMPLETION)
	if solicitedOnly {
		f = uverbs.SIW_NOTIFY_SOLICITED
	}
	atomic.StoreUint32(c.ctrl, f)
}
