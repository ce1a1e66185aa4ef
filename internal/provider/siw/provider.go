package siw

import (
	"errors"
	"fmt"

	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/uverbs"
)

// Provider is siw's entry in the registry.
var Provider = provider.Provider{Driver: uverbs.RDMA_DRIVER_SIW, Open: open}

// ucontext is siw's provider.Context.
type ucontext struct {
	fd *uverbs.FD
	// resp is GET_CONTEXT's driver response (siw's device id): siw
	// refuses a context without room for it.
	resp uverbs.SiwUrespAllocCtx
}

func open(fd *uverbs.FD) provider.Context { return &ucontext{fd: fd} }

func (c *ucontext) GetContext() provider.Udata {
	return provider.Udata{Out: provider.Bytes(&c.resp)}
}

func (*ucontext) Start() error { return nil }
func (*ucontext) Close() error { return nil }

// FWVersion prints the three 16-bit fields, as rdma-core's libsiw does.
func (*ucontext) FWVersion(raw uint64) string { return provider.FWVersion3(raw) }

// RegMR is siw's REG_MR driver data, which the kernel requires: the STag
// key byte (0, as rdma-core sends it) and room for the STag it returns,
// which is the lkey and rkey of the core response too.
func (*ucontext) AllocPD() provider.Udata { return provider.Udata{} }

func (*ucontext) RegMR() provider.Udata {
	d := new(struct {
		req  uverbs.SiwUreqRegMr
		resp uverbs.SiwUrespRegMr
	})
	return provider.Udata{In: provider.Bytes(&d.req), Out: provider.Bytes(&d.resp)}
}

func (c *ucontext) NewCQ(int) (provider.CQ, error) { return &CQ{ctx: c}, nil }

// qp is siw's provider.QP: its queues are mapped at the keys of the
// create response. Every slot of a siw queue is usable (ownership is a
// flag per element, not indices).
type qp struct {
	ctx  *ucontext
	attr provider.QPAttr
	resp uverbs.SiwUrespCreateQp
	sq   *SendQueue
	rq   *RecvRing
}

func (c *ucontext) NewQP(attr provider.QPAttr) (provider.QP, error) {
	return &qp{ctx: c, attr: attr}, nil
}

func (p *qp) Udata() provider.Udata { return provider.Udata{Out: provider.Bytes(&p.resp)} }

// Start maps the send queue and, without an SRQ and if one was asked
// for, the receive queue. Sends are refused outside RTS: siw flushes its
// send queue once, when the QP leaves RTS, and an SQE posted after that
// would never complete.
func (p *qp) Start(_ uint32, c uverbs.QpCap) (provider.QPInfo, error) {
	mem, err := uverbs.Mmap(p.ctx.fd, p.resp.Sq_key, QueueLen(p.resp.Num_sqe, SQESize))
	if err != nil {
		return provider.QPInfo{}, fmt.Errorf("map send queue: %w", err)
	}
	sq, err := NewSendQueue(mem, p.resp.Num_sqe, p.attr.SigAll, p.attr.SendErrors)
	if err != nil {
		uverbs.Munmap(mem)
		return provider.QPInfo{}, fmt.Errorf("send queue: %w", err)
	}
	p.sq = sq
	info := provider.QPInfo{Send: sq, SendOnlyInRTS: true, Caps: provider.Caps{
		MaxSendWR:     int(sq.Slots()),
		MaxSendSGE:    min(int(c.Send_sge), MaxSGE),
		MaxInlineData: min(int(c.Inline_data), MaxInline),
	}}
	if p.attr.SRQ || p.resp.Num_rqe == 0 {
		return info, nil // no receive queue (an SRQ, or MaxRecvWR 0)
	}
	mem, err = uverbs.Mmap(p.ctx.fd, p.resp.Rq_key, QueueLen(p.resp.Num_rqe, RQESize))
	if err != nil {
		return provider.QPInfo{}, fmt.Errorf("map receive queue: %w", err)
	}
	rsge := min(int(c.Recv_sge), MaxSGE)
	rq, err := NewRecvRing(mem, p.resp.Num_rqe, rsge, p.attr.RecvErrors)
	if err != nil {
		uverbs.Munmap(mem)
		return provider.QPInfo{}, fmt.Errorf("receive queue: %w", err)
	}
	p.rq = rq
	info.Recv = rq
	info.Caps.MaxRecvWR = int(rq.Slots())
	info.Caps.MaxRecvSGE = rsge
	return info, nil
}

func (p *qp) Release() error {
	var errs []error
	if p.sq != nil {
		errs = append(errs, uverbs.Munmap(p.sq.Mem()))
		p.sq = nil
	}
	if p.rq != nil {
		p.rq.Shut()
		errs = append(errs, uverbs.Munmap(p.rq.Mem()))
		p.rq = nil
	}
	return errors.Join(errs...)
}

// srq is siw's provider.SRQ.
type srq struct {
	ctx  *ucontext
	attr provider.SRQAttr
	resp uverbs.SiwUrespCreateSrq
	ring *RecvRing
}

func (c *ucontext) NewSRQ(attr provider.SRQAttr) (provider.SRQ, error) {
	return &srq{ctx: c, attr: attr}, nil
}

func (s *srq) Udata() provider.Udata { return provider.Udata{Out: provider.Bytes(&s.resp)} }

// Start maps the SRQ at the key of the create response; the SRQ number
// is the core response's.
func (s *srq) Start(maxSGE, num uint32) (provider.SRQInfo, error) {
	mem, err := uverbs.Mmap(s.ctx.fd, s.resp.Srq_key, QueueLen(s.resp.Num_rqe, RQESize))
	if err != nil {
		return provider.SRQInfo{}, fmt.Errorf("map queue: %w", err)
	}
	ring, err := NewRecvRing(mem, s.resp.Num_rqe, min(int(maxSGE), MaxSGE), s.attr.Errors)
	if err != nil {
		uverbs.Munmap(mem)
		return provider.SRQInfo{}, err
	}
	s.ring = ring
	return provider.SRQInfo{Recv: ring, Num: num}, nil
}

// CanResize reports false: siw's modify_srq refuses IB_SRQ_MAX_WR.
func (s *srq) CanResize() bool { return false }

// Modify issues MODIFY_SRQ without driver data (siw reads none).
func (s *srq) Modify(resize bool, do func(provider.Udata) error) error {
	if resize {
		return errors.New("siw cannot resize an SRQ")
	}
	return do(provider.Udata{})
}

func (s *srq) Release() error {
	if s.ring == nil {
		return nil
	}
	s.ring.Shut()
	err := uverbs.Munmap(s.ring.Mem())
	s.ring = nil
	return err
}

// noAH is the AH of a siw context: siw has no address handles (iWARP is
// connected only; the kernel refuses CREATE_AH).
type noAH struct{}

func (*ucontext) NewAH(*uverbs.AhAttr) (provider.AH, error) { return noAH{}, nil }
func (noAH) Udata() provider.Udata                          { return provider.Udata{} }

var (
	_ provider.Context   = (*ucontext)(nil)
	_ provider.KernelAHs = (*ucontext)(nil)
	_ provider.CQ        = (*CQ)(nil)
	_ provider.QP        = (*qp)(nil)
	_ provider.SendQueue = (*SendQueue)(nil)
	_ provider.SRQ       = (*srq)(nil)
	_ provider.RecvQueue = (*RecvRing)(nil)
)
