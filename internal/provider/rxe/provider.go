package rxe

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/uverbs"
)

// Provider is rxe's entry in the registry.
var Provider = provider.Provider{Driver: uverbs.RDMA_DRIVER_RXE, Open: open}

// ucontext is rxe's provider.Context. rxe has no context driver data:
// every queue is mapped from the offset its create response gives.
type ucontext struct {
	fd *uverbs.FD
}

func open(fd *uverbs.FD) provider.Context { return &ucontext{fd: fd} }

func (*ucontext) GetContext() provider.Udata { return provider.Udata{} }
func (*ucontext) Start() error               { return nil }
func (*ucontext) Close() error               { return nil }
func (*ucontext) RegMR() provider.Udata      { return provider.Udata{} }
func (*ucontext) AllocPD() provider.Udata    { return provider.Udata{} }

// FWVersion prints the three 16-bit fields, as rdma-core's librxe does.
func (*ucontext) FWVersion(raw uint64) string { return provider.FWVersion3(raw) }

// mapQueue maps the queue the kernel described in mi and checks its
// header; minElem is the smallest element size the caller reads or
// writes.
func (c *ucontext) mapQueue(what string, mi uverbs.RxeMminfo, minElem uintptr) (*Queue, error) {
	mem, err := uverbs.Mmap(c.fd, mi.Offset, int(mi.Size))
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", what, err)
	}
	q, err := NewQueue(mem, minElem)
	if err != nil {
		uverbs.Munmap(mem)
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return q, nil
}

// cq is rxe's provider.CQ: a kernel-allocated ring of ib_uverbs_wc CQEs,
// armed by the kernel's REQ_NOTIFY_CQ command.
type cq struct {
	ctx  *ucontext
	resp uverbs.RxeCreateCqResp
	q    *Queue // replaced by Resize, under the caller's poll lock
	// ready: the kernel's producer index against our consumer index.
	ready provider.Ready
}

func (c *ucontext) NewCQ(int) (provider.CQ, error) { return &cq{ctx: c}, nil }

func (c *cq) Udata() provider.Udata { return provider.Udata{Out: provider.Bytes(&c.resp)} }

func (c *cq) Start(uint32) error {
	q, err := c.ctx.mapQueue("ring", c.resp.Mi, unsafe.Sizeof(provider.WC{}))
	if err != nil {
		return err
	}
	c.setQueue(q)
	return nil
}

// setQueue switches to ring q and points the emptiness test at it.
func (c *cq) setQueue(q *Queue) {
	c.q = q
	c.ready = provider.Ready{Word: q.prod, Mask: ^uint32(0), Idle: q.ConsumerIndex()}
}

func (c *cq) Ready() *provider.Ready { return &c.ready }

// Poll copies up to len(wc) completions from the ring, oldest first, and
// releases their slots. It never blocks.
func (c *cq) Poll(wc []provider.WC) int {
	q := c.q
	avail := q.Available()
	n := min(uint32(len(wc)), avail)
	if n == 0 {
		return 0
	}
	i := q.ConsumerIndex()
	for k := uint32(0); k < n; k++ {
		// The rxe CQE starts with struct ib_uverbs_wc, which provider.WC
		// (verbs.WorkCompletion's layout) mirrors field for field.
		wc[k] = *(*provider.WC)(q.Elem(i))
		i = q.Next(i)
	}
	q.Consume(i)
	c.ready.Idle = i
	return int(n)
}

func (c *cq) Queued() int     { return int(c.q.Available()) }
func (c *cq) Pending() bool   { return c.q.Available() > 0 }
func (c *cq) Arm(bool) bool   { return true } // REQ_NOTIFY_CQ
func (c *cq) Event()          {}
func (c *cq) CanResize() bool { return true }

// Resize maps the ring RESIZE_CQ made; the kernel copied the completions
// not yet polled into it.
func (c *cq) Resize(_ int, do func(provider.Udata) error) error {
	var resp uverbs.RxeResizeCqResp
	if err := do(provider.Udata{Out: provider.Bytes(&resp)}); err != nil {
		return err
	}
	q, err := c.ctx.mapQueue("ring", resp.Mi, unsafe.Sizeof(provider.WC{}))
	if err != nil {
		return err
	}
	old := c.q
	c.setQueue(q)
	return uverbs.Munmap(old.Mem())
}

func (c *cq) Release() error {
	if c.q == nil {
		return nil
	}
	err := uverbs.Munmap(c.q.Mem())
	c.q = nil
	return err
}

// qp is rxe's provider.QP: a send queue and, without an SRQ, a receive
// queue, both kernel-allocated and mapped.
type qp struct {
	ctx  *ucontext
	attr provider.QPAttr
	resp uverbs.RxeCreateQpResp
	sq   *sendQueue
	rq   *RecvRing
}

func (c *ucontext) NewQP(attr provider.QPAttr) (provider.QP, error) {
	return &qp{ctx: c, attr: attr}, nil
}

func (p *qp) Udata() provider.Udata { return provider.Udata{Out: provider.Bytes(&p.resp)} }

// Start maps the queues. The usable depth is one less than a ring's
// slots; the SGEs and inline data a WQE holds follow from its size.
func (p *qp) Start(_ uint32, c uverbs.QpCap) (provider.QPInfo, error) {
	sq, err := p.ctx.mapQueue("send queue", p.resp.Sq_mi, SendWQEHeader)
	if err != nil {
		return provider.QPInfo{}, err
	}
	p.sq = &sendQueue{q: sq, ud: p.attr.Type == uverbs.IB_UVERBS_QPT_UD, errs: p.attr.SendErrors}
	payload := sq.ElemSize() - SendWQEHeader
	info := provider.QPInfo{Send: p.sq, Caps: provider.Caps{
		MaxSendWR:     int(sq.Slots() - 1),
		MaxSendSGE:    min(int(c.Send_sge), int(payload/sgeSize)),
		MaxInlineData: min(int(c.Inline_data), int(payload)),
	}}
	if p.attr.SRQ {
		return info, nil
	}
	rq, err := p.ctx.mapQueue("receive queue", p.resp.Rq_mi, RecvWQEHeader)
	if err != nil {
		return provider.QPInfo{}, err
	}
	rsge := min(int(c.Recv_sge), int((rq.ElemSize()-RecvWQEHeader)/sgeSize))
	p.rq = NewRecvRing(rq, rsge, p.attr.RecvErrors)
	info.Recv = p.rq
	info.Caps.MaxRecvWR = int(rq.Slots() - 1)
	info.Caps.MaxRecvSGE = rsge
	return info, nil
}

func (p *qp) Release() error {
	var errs []error
	if p.sq != nil {
		errs = append(errs, uverbs.Munmap(p.sq.q.Mem()))
		p.sq = nil
	}
	if p.rq != nil {
		p.rq.Shut()
		errs = append(errs, uverbs.Munmap(p.rq.Queue().Mem()))
		p.rq = nil
	}
	return errors.Join(errs...)
}

// sendQueue is rxe's provider.SendQueue. Post publishes the whole list
// with one release store of the producer index; the kernel processes it
// in the POST_SEND doorbell (6.1) or schedules its sender there (6.12).
type sendQueue struct {
	q    *Queue
	ud   bool
	ssn  uint32 // the send sequence number of the next WQE
	errs *provider.Errors
}

func (s *sendQueue) Post(wrs []provider.SendWR, check provider.Checker) (int, bool, error) {
	q := s.q
	free := q.Free()
	p := q.ProducerIndex()
	var err error
	n := 0
	for i := range wrs {
		wr := &wrs[i]
		var h provider.AH
		if check != nil {
			var cerr error
			if h, cerr = check.CheckSend(i, wr); cerr != nil {
				err = cerr
				break
			}
		}
		if uint32(i) >= free {
			err = s.errs.Full(i)
			break
		}
		var ahNum uint32
		if ah, ok := h.(*addressHandle); ok {
			ahNum = ah.resp.Num
		}
		WriteSend(q.Elem(p), wr, s.ud, ahNum, s.ssn)
		s.ssn++
		p = q.Next(p)
		n++
	}
	if n > 0 {
		q.Publish(p)
	}
	return n, n > 0, err
}

func (s *sendQueue) Mark() uint32                 { return s.q.ProducerIndex() }
func (s *sendQueue) Transmitted(mark uint32) bool { return SendsTransmitted(s.q, mark) }
func (s *sendQueue) Reset()                       { s.ssn = 0 }

// srq is rxe's provider.SRQ.
type srq struct {
	ctx  *ucontext
	attr provider.SRQAttr
	resp uverbs.RxeCreateSrqResp
	ring *RecvRing
	// mi is where MODIFY_SRQ's driver data tells the kernel to write the
	// resized queue's mmap information. The command carries only its
	// address, which the garbage collector and the stack copier cannot
	// see: a local would be on the goroutine's stack (escape analysis
	// sees no pointer leave), and a stack that grows before the system
	// call moves it, so the kernel would write into the old stack and
	// the remap read zeroes (mmap EINVAL: seen in TestSRQResizeWhilePosting
	// after the seam made the call path deeper). As a field of the SRQ,
	// which is on the heap, it never moves; Modify runs under the SRQ's
	// lock, one at a time.
	mi uverbs.RxeMminfo
}

func (c *ucontext) NewSRQ(attr provider.SRQAttr) (provider.SRQ, error) {
	return &srq{ctx: c, attr: attr}, nil
}

func (s *srq) Udata() provider.Udata { return provider.Udata{Out: provider.Bytes(&s.resp)} }

// Start maps the queue; the SRQ number is rxe's (its create response).
func (s *srq) Start(maxSGE, _ uint32) (provider.SRQInfo, error) {
	q, err := s.ctx.mapQueue("queue", s.resp.Mi, RecvWQEHeader)
	if err != nil {
		return provider.SRQInfo{}, err
	}
	sge := min(int(maxSGE), int((q.ElemSize()-RecvWQEHeader)/sgeSize))
	s.ring = NewRecvRing(q, sge, s.attr.Errors)
	return provider.SRQInfo{Recv: s.ring, Num: s.resp.Num}, nil
}

func (s *srq) CanResize() bool { return true }

// Modify sends rxe's driver data, which every MODIFY_SRQ needs: the
// address where the kernel writes the new queue's mmap information on a
// resize. A resize holds the ring's lock from MODIFY_SRQ to the remap, as
// rdma-core does: the kernel copies the WQEs posted to the old queue into
// the new one, and a receive posted to the old queue after that copy
// would be lost.
func (s *srq) Modify(resize bool, do func(provider.Udata) error) error {
	s.mi = uverbs.RxeMminfo{}
	cmd := &uverbs.RxeModifySrqCmd{Info_addr: uverbs.Addr(unsafe.Pointer(&s.mi))}
	u := provider.Udata{In: provider.Bytes(cmd), Keep: unsafe.Pointer(&s.mi)}
	if !resize {
		return do(u)
	}
	old, err := s.ring.Resize(func() (*Queue, error) {
		if err := do(u); err != nil {
			return nil, err
		}
		return s.ctx.mapQueue("queue", s.mi, RecvWQEHeader)
	})
	if err != nil {
		return err
	}
	return uverbs.Munmap(old.Mem())
}

func (s *srq) Release() error {
	if s.ring == nil {
		return nil
	}
	s.ring.Shut()
	err := uverbs.Munmap(s.ring.Queue().Mem())
	s.ring = nil
	return err
}

// addressHandle is rxe's provider.AH: the kernel's number for the AH,
// which UD send WQEs carry (ah_num).
type addressHandle struct {
	resp uverbs.RxeCreateAhResp
}

func (*ucontext) NewAH(*uverbs.AhAttr) (provider.AH, error) { return new(addressHandle), nil }

func (a *addressHandle) Udata() provider.Udata { return provider.Udata{Out: provider.Bytes(&a.resp)} }

var (
	_ provider.Context   = (*ucontext)(nil)
	_ provider.KernelAHs = (*ucontext)(nil)
	_ provider.CQ        = (*cq)(nil)
	_ provider.QP        = (*qp)(nil)
	_ provider.SRQ       = (*srq)(nil)
	_ provider.AH        = (*addressHandle)(nil)
	_ provider.RecvQueue = (*RecvRing)(nil)
)
