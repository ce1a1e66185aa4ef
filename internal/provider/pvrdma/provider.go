package pvrdma

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/uverbs"
)

// Provider is pvrdma's entry in the registry.
//
// vmw_pvrdma waits for each command's answer interruptibly
// (pvrdma_cmd_recv: wait_for_completion_interruptible_timeout) and turns
// an interrupted wait into ETIMEDOUT while the device may still create
// the object: seen on the bed as GET_CONTEXT, ALLOC_PD and CREATE_CQ
// failing with "connection timed out" when the Go runtime's preemption
// signal arrived as the command went in. So its commands run with
// signals blocked.
var Provider = provider.Provider{Driver: uverbs.RDMA_DRIVER_VMW_PVRDMA, Open: open, InterruptibleCommands: true}

// ucontext is pvrdma's provider.Context.
type ucontext struct {
	fd *uverbs.FD
	// resp is GET_CONTEXT's driver response: the size of the device's
	// QP table.
	resp uverbs.PvrdmaAllocUcontextResp
	uar  []byte // the doorbell page, mapped by Start
	qps  qpTable
	// atomics: the device reports atomic operations (QUERY_DEVICE's
	// atomic_cap), asked once in Start.
	atomics bool
}

func open(fd *uverbs.FD) provider.Context { return &ucontext{fd: fd} }

// GetContext returns room for struct pvrdma_alloc_ucontext_resp.
func (c *ucontext) GetContext() provider.Udata {
	return provider.Udata{Out: provider.Bytes(&c.resp)}
}

// Start maps the UAR page (offset 0 of the descriptor, one page: the
// kernel's pvrdma_mmap refuses anything else), makes the QP table and asks
// the device whether it has atomics.
func (c *ucontext) Start() error {
	atomics, err := queryAtomics(c.fd)
	if err != nil {
		return err
	}
	uar, err := uverbs.Mmap(c.fd, 0, int(pageSize))
	if err != nil {
		return fmt.Errorf("pvrdma: map UAR: %w", err)
	}
	c.uar, c.atomics = uar, atomics
	c.qps.init(c.resp.Tab_size)
	return nil
}

// queryAtomics issues EX_QUERY_DEVICE and reports whether atomic_cap is
// other than IB_ATOMIC_NONE.
func queryAtomics(fd *uverbs.FD) (bool, error) {
	req := uverbs.ExQueryDevice{}
	var resp uverbs.ExQueryDeviceResp
	var r uverbs.Ioctl
	r.InitInvokeWrite("EX_QUERY_DEVICE", uverbs.IB_USER_VERBS_CMD_FLAG_EXTENDED|uverbs.IB_USER_VERBS_EX_CMD_QUERY_DEVICE, uverbs.RDMA_DRIVER_VMW_PVRDMA)
	r.In(uverbs.UVERBS_ATTR_CORE_IN, unsafe.Pointer(&req), unsafe.Sizeof(req))
	r.Out(uverbs.UVERBS_ATTR_CORE_OUT, unsafe.Pointer(&resp), unsafe.Sizeof(resp))
	if err := r.Do(fd); err != nil {
		return false, fmt.Errorf("pvrdma: query device: %w", err)
	}
	return resp.Base.Atomic_cap != 0, nil // 0 is IB_ATOMIC_NONE (enum ib_atomic_cap is not UAPI)
}

// Close unmaps the UAR page.
func (c *ucontext) Close() error {
	err := uverbs.Munmap(c.uar)
	c.uar = nil
	return err
}

// doorbell returns the UAR word at off.
func (c *ucontext) doorbell(off uintptr) *uint32 {
	return (*uint32)(unsafe.Pointer(&c.uar[off]))
}

// FWVersion prints major.minor.sub with three digits of sub, as rdma-core's
// pvrdma_query_device does.
func (*ucontext) FWVersion(raw uint64) string {
	return fmt.Sprintf("%d.%d.%03d", (raw>>32)&0xffff, (raw>>16)&0xffff, raw&0xffff)
}

// RegMR has no driver data (rdma-core's pvrdma_reg_mr sends none).
func (*ucontext) RegMR() provider.Udata { return provider.Udata{} }

// AllocPD gives ALLOC_PD room for the driver response (struct
// pvrdma_alloc_pd_resp, the PD number): the kernel's pvrdma_alloc_pd
// copies it out for every user PD and fails with EFAULT without room
// (rdma-core's pvrdma_alloc_pd passes it too). verbs keeps the driver
// data with the PD; NewUserAH reads the number from it for the address
// vectors of UD sends.
func (*ucontext) AllocPD() provider.Udata {
	return provider.Udata{Out: provider.Bytes(new(uverbs.PvrdmaAllocPdResp))}
}

// qpTable maps the low 16 bits of a QP handle (what a CQE's qp field
// carries, rdma-core's qp_tbl) to the QP number. CQ.Poll reads it while
// QPs are created and destroyed, so each entry is an atomic word: the QP
// number and a present bit.
type qpTable struct {
	t []atomic.Uint64
}

const qpPresent = 1 << 32

// init sizes the table from GET_CONTEXT's qp_tab_size; rdma-core takes its
// low 16 bits, which are 0 for a device with 65536 QPs, so a table that
// could not hold every 16-bit index gets all 65536 entries.
func (t *qpTable) init(size uint32) {
	if size == 0 || size > 1<<16 {
		size = 1 << 16
	}
	t.t = make([]atomic.Uint64, size)
}

func (t *qpTable) store(handle, qpn uint32) {
	if i := handle & 0xffff; i < uint32(len(t.t)) {
		t.t[i].Store(qpPresent | uint64(qpn))
	}
}

func (t *qpTable) clear(handle uint32) {
	if i := handle & 0xffff; i < uint32(len(t.t)) {
		t.t[i].Store(0)
	}
}

func (t *qpTable) lookup(handle uint32) (uint32, bool) {
	i := handle & 0xffff
	if i >= uint32(len(t.t)) {
		return 0, false
	}
	v := t.t[i].Load()
	return uint32(v), v&qpPresent != 0
}

// qp is pvrdma's provider.QP. New allocates its two buffers (rdma-core's
// pvrdma_create_qp and pvrdma_alloc_qp_buf): the send buffer [ring state
// page][send WQEs] and, without an SRQ, the receive buffer [receive WQEs].
type qp struct {
	ctx              *ucontext
	attr             provider.QPAttr
	sbuf, rbuf       []byte
	caps             uverbs.QpCap // what CREATE_QP asks for (CreateCaps)
	sendSz, recvSz   uintptr
	cmd              uverbs.PvrdmaCreateQp
	resp             uverbs.PvrdmaCreateQpResp
	handle           uint32
	started          bool
	sq               *SendQueue
	rq               *RecvRing
	sendMax, recvMax uint32
}

// NewQP sizes the queues as rdma-core does (WQE counts rounded up to powers
// of two, at least one SGE) and allocates them.
func (c *ucontext) NewQP(attr provider.QPAttr) (provider.QP, error) {
	a := attr.Cap
	if a.Send_wr > maxRingElems || a.Recv_wr > maxRingElems || a.Send_sge > 1<<16 || a.Recv_sge > 1<<16 {
		return nil, fmt.Errorf("%w: %+v", errQueueSize, a)
	}
	p := &qp{ctx: c, attr: attr}
	p.caps = uverbs.QpCap{Send_wr: pow2(max(1, a.Send_wr)), Send_sge: max(1, a.Send_sge)}
	if !attr.SRQ {
		p.caps.Recv_wr, p.caps.Recv_sge = pow2(max(1, a.Recv_wr)), max(1, a.Recv_sge)
	}
	p.sendSz = sendWQESize(p.caps.Send_sge)
	var err error
	if p.sbuf, err = allocBuf(pageSize + uintptr(p.caps.Send_wr)*p.sendSz); err != nil {
		return nil, err
	}
	if !attr.SRQ {
		p.recvSz = recvWQESize(p.caps.Recv_sge)
		if p.rbuf, err = allocBuf(uintptr(p.caps.Recv_wr) * p.recvSz); err != nil {
			freeBuf(p.sbuf)
			return nil, err
		}
	}
	p.cmd = uverbs.PvrdmaCreateQp{Sbuf_addr: addr(p.sbuf), Sbuf_size: uint32(len(p.sbuf)),
		Rbuf_addr: addr(p.rbuf), Rbuf_size: uint32(len(p.rbuf))}
	return p, nil
}

// CreateCaps returns the capacities CREATE_QP must carry: the kernel hands
// a user QP's capacities to the device unchanged, and the device lays the
// queues out from them, so they must be the rounded ones the buffers were
// allocated for (rdma-core rewrites the caller's ibv_qp_cap the same way
// before ibv_cmd_create_qp). pvrdma has no inline data.
func (p *qp) CreateCaps() uverbs.QpCap { return p.caps }

// Udata is CREATE_QP's driver data: the two buffers in, the QP number and
// handle out.
func (p *qp) Udata() provider.Udata {
	return provider.Udata{In: provider.Bytes(&p.cmd), Out: provider.Bytes(&p.resp)}
}

// Start sets up the queues over the buffers and enters the QP in the
// context's table under its handle (the response's qp_handle, or the QP
// number from a kernel that returns none, as rdma-core does).
func (p *qp) Start(qpn uint32, _ uverbs.QpCap) (provider.QPInfo, error) {
	p.handle = p.resp.Handle
	if p.handle == 0 {
		p.handle = qpn
	}
	if err := p.start(p.ctx.doorbell(uarQPOffset)); err != nil {
		return provider.QPInfo{}, err
	}
	p.ctx.qps.store(p.handle, qpn)
	p.started = true
	info := provider.QPInfo{Send: p.sq, Caps: provider.Caps{
		MaxSendWR: int(p.sq.Slots()), MaxSendSGE: p.sq.maxSGE,
	}}
	if p.rq != nil {
		info.Recv = p.rq
		info.Caps.MaxRecvWR, info.Caps.MaxRecvSGE = int(p.rq.Slots()), p.rq.maxSGE
	}
	return info, nil
}

// start builds the data path; db is the QP doorbell.
func (p *qp) start(db *uint32) error {
	base := unsafe.Pointer(unsafe.SliceData(p.sbuf))
	sq, err := newSendQueue(base, unsafe.Add(base, pageSize), p.caps.Send_wr, int(p.caps.Send_sge), p.sendSz,
		p.attr.Type == uverbs.IB_UVERBS_QPT_UD, p.ctx.atomics, db, p.handle, p.attr.SendErrors)
	if err != nil {
		return err
	}
	sq.r.reset()
	if !p.attr.SRQ {
		rq, err := newRecvRing(unsafe.Add(base, ringSize), unsafe.Pointer(unsafe.SliceData(p.rbuf)),
			p.caps.Recv_wr, int(p.caps.Recv_sge), p.recvSz, db, uarQPRecv|p.handle, p.attr.RecvErrors)
		if err != nil {
			return err
		}
		rq.r.reset()
		sq.rq, p.rq = rq, rq
	}
	p.sq = sq
	return nil
}

// Release shuts the receive queue, removes the QP from the table and frees
// the buffers (the kernel unpinned them at destroy).
func (p *qp) Release() error {
	if p.rq != nil {
		p.rq.Shut()
	}
	if p.started {
		p.ctx.qps.clear(p.handle)
		p.started = false
	}
	err := errors.Join(freeBuf(p.sbuf), freeBuf(p.rbuf))
	p.sbuf, p.rbuf, p.sq, p.rq = nil, nil, nil, nil
	return err
}

// srq is pvrdma's provider.SRQ: one buffer, [ring state page][receive
// WQEs] (rdma-core's pvrdma_create_srq and pvrdma_alloc_srq_buf).
type srq struct {
	ctx           *ucontext
	attr          provider.SRQAttr
	maxWR, maxSGE uint32
	wqeSize       uintptr
	mem           []byte
	cmd           uverbs.PvrdmaCreateSrq
	resp          uverbs.PvrdmaCreateSrqResp
	ring          *RecvRing
}

// NewSRQ sizes the SRQ as rdma-core does (max_wr rounded up to a power of
// two, at least one SGE) and allocates its buffer: a page for the ring
// state and twice the WQEs' pages, rdma-core's size.
func (c *ucontext) NewSRQ(attr provider.SRQAttr) (provider.SRQ, error) {
	if attr.MaxWR > maxRingElems || attr.MaxSGE > 1<<16 {
		return nil, fmt.Errorf("%w: %d WRs, %d SGEs", errQueueSize, attr.MaxWR, attr.MaxSGE)
	}
	s := &srq{ctx: c, attr: attr, maxWR: pow2(max(1, attr.MaxWR)), maxSGE: max(1, attr.MaxSGE)}
	s.wqeSize = recvWQESize(s.maxSGE)
	var err error
	if s.mem, err = allocBuf(pageSize + 2*align(uintptr(s.maxWR)*s.wqeSize, pageSize)); err != nil {
		return nil, err
	}
	s.cmd = uverbs.PvrdmaCreateSrq{Addr: addr(s.mem), Size: uint32(len(s.mem))}
	return s, nil
}

// CreateSize returns the max_wr and max_sge CREATE_SRQ must carry (see
// qp.CreateCaps).
func (s *srq) CreateSize() (maxWR, maxSGE uint32) { return s.maxWR, s.maxSGE }

// Udata is CREATE_SRQ's driver data: the buffer in, the SRQ number out.
func (s *srq) Udata() provider.Udata {
	return provider.Udata{In: provider.Bytes(&s.cmd), Out: provider.Bytes(&s.resp)}
}

// Start sets up the ring; its doorbell carries the SRQ number of the
// driver response.
func (s *srq) Start(_, num uint32) (provider.SRQInfo, error) {
	return s.start(s.ctx.doorbell(uarSRQOffset), num)
}

func (s *srq) start(db *uint32, num uint32) (provider.SRQInfo, error) {
	base := unsafe.Pointer(unsafe.SliceData(s.mem))
	ring, err := newRecvRing(unsafe.Add(base, ringSize), unsafe.Add(base, pageSize), s.maxWR, int(s.maxSGE),
		s.wqeSize, db, uarSRQRecv|s.resp.Srqn, s.attr.Errors)
	if err != nil {
		return provider.SRQInfo{}, err
	}
	ring.r.reset()
	s.ring = ring
	if num == 0 {
		num = s.resp.Srqn
	}
	return provider.SRQInfo{Recv: ring, Num: num}, nil
}

// CanResize reports false: pvrdma's modify_srq takes only the limit (the
// kernel's pvrdma_modify_srq refuses a mask without IB_SRQ_LIMIT, the
// device one with IB_SRQ_MAX_WR).
func (s *srq) CanResize() bool { return false }

// Modify issues MODIFY_SRQ without driver data (rdma-core sends none).
func (s *srq) Modify(resize bool, do func(provider.Udata) error) error {
	if resize {
		return errors.New("pvrdma cannot resize an SRQ")
	}
	return do(provider.Udata{})
}

// Release shuts the ring and frees the buffer.
func (s *srq) Release() error {
	if s.ring != nil {
		s.ring.Shut()
	}
	err := freeBuf(s.mem)
	s.mem, s.ring = nil, nil
	return err
}

// addressHandle is a pvrdma address handle: the address vector (struct
// pvrdma_av) every UD send WQE carries, built in user space as rdma-core's
// pvrdma_create_ah builds it (vmw_pvrdma creates no AHs for user space).
type addressHandle struct {
	av uverbs.PvrdmaAv
}

// NewUserAH builds the address vector for attr in the PD whose ALLOC_PD
// driver data is pd (its PD number, from the kernel's answer), to dmac:
// port_pd is the PD number and the port in the top byte, src_path_bits
// has bit 7 set, the traffic class and flow label share a word, and the
// rate and SL are left 0, as rdma-core leaves them.
func (*ucontext) NewUserAH(pd provider.Udata, attr *uverbs.AhAttr, dmac [6]byte) (provider.AH, error) {
	if len(pd.Out) < int(unsafe.Sizeof(uverbs.PvrdmaAllocPdResp{})) {
		return nil, fmt.Errorf("pvrdma: the PD has no ALLOC_PD response (%d bytes)", len(pd.Out))
	}
	pdn := (*uverbs.PvrdmaAllocPdResp)(unsafe.Pointer(&pd.Out[0])).Pdn
	if pdn >= 1<<24 {
		return nil, fmt.Errorf("pvrdma: PD number %#x does not fit the address vector's 24 bits", pdn)
	}
	a := &addressHandle{av: uverbs.PvrdmaAv{
		Port_pd:             pdn | uint32(attr.Port_num)<<24,
		Sl_tclass_flowlabel: uint32(attr.Grh.Traffic_class)<<20 | attr.Grh.Flow_label&0xfffff,
		Dgid:                attr.Grh.Dgid,
		Src_path_bits:       attr.Src_path_bits | 0x80,
		Gid_index:           attr.Grh.Sgid_index,
		Hop_limit:           attr.Grh.Hop_limit,
		Dmac:                dmac,
	}}
	return a, nil
}

// Udata is empty: no command creates the handle.
func (*addressHandle) Udata() provider.Udata { return provider.Udata{} }

var (
	_ provider.Context       = (*ucontext)(nil)
	_ provider.UserAHs       = (*ucontext)(nil)
	_ provider.CQ            = (*CQ)(nil)
	_ provider.QP            = (*qp)(nil)
	_ provider.QPCreateCaps  = (*qp)(nil)
	_ provider.SendQueue     = (*SendQueue)(nil)
	_ provider.SRQ           = (*srq)(nil)
	_ provider.SRQCreateSize = (*srq)(nil)
	_ provider.RecvQueue     = (*RecvRing)(nil)
)
