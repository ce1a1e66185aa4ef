package siw

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/uverbs"
)

// CQ is siw's provider.CQ: a mapped completion queue of num CQEs
// followed by the notification control word.
type CQ struct {
	ctx  *ucontext
	resp uverbs.SiwUrespCreateCq
	r    ring
	ctrl *uint32
	// get is the consumer counter. Poll moves it under the caller's
	// lock; Available and Pending read it without that lock, so it is
	// accessed atomically.
	get atomic.Uint32
	// ready: the VALID bit of the CQE at get.
	ready provider.Ready
}

// validMask is SIW_WQE_VALID at its place in a CQE's ownership word.
var validMask = func() uint32 {
	h := cqeHead{flags: uverbs.SIW_WQE_VALID}
	return *(*uint32)(unsafe.Pointer(&h))
}()

// init wraps the mapping of a CQ with num CQEs and disarms it, as
// rdma-core does at creation.
func (c *CQ) init(mem []byte, num uint32) error {
	r, err := newRing(mem, num, CQESize, ctrlSize)
	if err != nil {
		return err
	}
	c.r, c.ctrl = r, (*uint32)(unsafe.Add(r.base, uintptr(num)*CQESize))
	c.ready = provider.Ready{Word: r.head(c.get.Load()), Mask: validMask}
	atomic.StoreUint32(c.ctrl, uverbs.SIW_NOTIFY_NOT)
	return nil
}

// Udata is CREATE_CQ's driver data: room for the CQ's mmap key and size.
func (c *CQ) Udata() provider.Udata { return provider.Udata{Out: provider.Bytes(&c.resp)} }

// Start maps the CQ at the key of the create response.
func (c *CQ) Start(uint32) error {
	mem, err := uverbs.Mmap(c.ctx.fd, c.resp.Cq_key, CQLen(c.resp.Num_cqe))
	if err != nil {
		return fmt.Errorf("map ring: %w", err)
	}
	if err := c.init(mem, c.resp.Num_cqe); err != nil {
		uverbs.Munmap(mem)
		return err
	}
	return nil
}

// Release unmaps the CQ.
func (c *CQ) Release() error {
	if c.r.mem == nil {
		return nil
	}
	err := uverbs.Munmap(c.r.mem)
	c.r = ring{}
	return err
}

// Poll copies up to len(wc) completions, oldest first, and hands their
// slots back to the kernel. It never blocks; the caller serializes Polls.
func (c *CQ) Poll(wc []provider.WC) int {
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
		*w = provider.WC{WRID: cqe.Id, ByteLen: cqe.Bytes, QPNum: uint32(cqe.Qp_id)}
		if int(h.opcode) < len(wcOpcode) && int(h.status) < len(wcStatus) {
			w.Opcode = wcOpcode[h.opcode]
			w.Status = wcStatus[h.status]
		} else {
			w.Status = provider.WCGeneralErr
		}
		if h.flags&uverbs.SIW_WQE_REM_INVAL != 0 {
			w.Flags = provider.WCWithInvalidate
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
		c.ready.Word = c.r.head(get)
	}
	return n
}

// Ready returns the CQ's emptiness test: the VALID bit of the CQE at the
// consumer counter.
func (c *CQ) Ready() *provider.Ready { return &c.ready }

// Queued counts the completions waiting to be polled.
func (c *CQ) Queued() int {
	get := c.get.Load()
	var n uint32
	for n <= c.r.mask && c.r.valid(get+n) {
		n++
	}
	return int(n)
}

// Pending reports whether a completion is waiting to be polled.
func (c *CQ) Pending() bool { return c.r.valid(c.get.Load()) }

// Arm requests a completion event for the next completion (solicitedOnly:
// the next solicited one), by storing the notify flags in the CQ's mapped
// control word: no system call, so it reports false (no REQ_NOTIFY_CQ).
// The store is sequentially consistent (a full barrier), so a CQE check
// after Arm cannot miss a completion the kernel wrote before it saw the
// armed word: the kernel sets a CQE's VALID and then, after a full
// barrier, reads the word.
func (c *CQ) Arm(solicitedOnly bool) bool {
	f := uint32(uverbs.SIW_NOTIFY_SOLICITED | uverbs.SIW_NOTIFY_NEXT_COMPLETION)
	if solicitedOnly {
		f = uverbs.SIW_NOTIFY_SOLICITED
	}
	atomic.StoreUint32(c.ctrl, f)
	return false
}

// Event does nothing: the kernel disarms the CQ itself when it raises the
// event.
func (c *CQ) Event() {}

// CanResize reports false: siw has no RESIZE_CQ (the kernel driver has
// no resize_cq).
func (c *CQ) CanResize() bool { return false }

// Resize is never called (CanResize).
func (c *CQ) Resize(int, func(provider.Udata) error) error {
	return errors.New("siw cannot resize a CQ")
}
