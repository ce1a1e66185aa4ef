// Package srq implements shared receive queues: one pool of receive
// buffers that many QPs consume from.
//
// The buffers posted to an SRQ form an unordered set: a message arriving on
// any attached QP takes whichever posted buffer the device picks next, so
// completions do not come back in posting order per QP. Identify the buffer
// by the completion's WRID and the connection by its QPNum.
//
// With a limit armed (Modify with a Limit), the context delivers one
// verbs.EventSRQLimitReached async event when the number of posted buffers
// drops below it; re-arm after each event.
package srq

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/goverbs/goverbs/internal/kobj"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/uverbs"
	"github.com/goverbs/goverbs/verbs"
)

// Attr are an SRQ's attributes.
type Attr struct {
	MaxWR  int // capacity in work requests
	MaxSGE int // SGEs per work request
	Limit  int // 0: not armed
}

// SRQ is a shared receive queue.
type SRQ struct {
	pd     *verbs.PD
	handle uint32
	num    uint32
	track  uint64
	// prov is the provider's SRQ (package internal/provider), made by the
	// context's provider at creation; ring is its receive queue.
	prov provider.SRQ
	ring provider.RecvQueue

	mu     sync.Mutex
	closed bool
}

// MODIFY_SRQ attribute mask bits (enum ib_srq_attr_mask, not in the UAPI
// headers; the values of libibverbs' IBV_SRQ_*).
const (
	srqMaxWR = 1 << 0
	srqLimit = 1 << 1
)

// postErrors are PostRecv's errors, shared by every SRQ.
var postErrors = kobj.PostErrors("srq: post recv")

// ErrBadAttr is returned for attributes out of the device's range.
var ErrBadAttr = errors.New("SRQ attributes out of range")

func init() { kobj.SRQOf = func(s any) provider.SRQ { return s.(*SRQ).prov } }

// New creates an SRQ in pd with room for at least attr.MaxWR work
// requests of attr.MaxSGE SGEs each, and the limit attr.Limit armed.
func New(pd *verbs.PD, attr Attr) (*SRQ, error) {
	if attr.MaxWR < 1 || attr.MaxSGE < 1 || attr.Limit < 0 {
		return nil, fmt.Errorf("srq: create %+v: %w", attr, ErrBadAttr)
	}
	if err := kobj.CheckPD(pd); err != nil {
		return nil, fmt.Errorf("srq: create: PD: %w", err)
	}
	ctx := pd.Context()
	s := &SRQ{pd: pd}
	track, err := kobj.ContextOf(ctx).Track(kobj.KindSRQ, s)
	if err != nil {
		return nil, fmt.Errorf("srq: create: %w", err)
	}
	s.track = track
	prov, err := kobj.ContextOf(ctx).Provider.NewSRQ(provider.SRQAttr{
		MaxWR: uint32(min(attr.MaxWR, 1<<31-1)), MaxSGE: uint32(min(attr.MaxSGE, 1<<31-1)), Errors: postErrors})
	if err != nil {
		kobj.ContextOf(ctx).Untrack(track)
		return nil, fmt.Errorf("srq: create %+v: %w", attr, err)
	}
	reqWR, reqSGE := uint32(min(attr.MaxWR, 1<<31-1)), uint32(min(attr.MaxSGE, 1<<31-1))
	if cs, ok := prov.(provider.SRQCreateSize); ok {
		reqWR, reqSGE = cs.CreateSize() // the queue the provider allocated (pvrdma)
	}
	var maxWR, maxSGE, srqNum uint32
	var r uverbs.Ioctl
	r.Init("SRQ.CREATE", uverbs.UVERBS_OBJECT_SRQ, uverbs.UVERBS_METHOD_SRQ_CREATE, kobj.ContextOf(ctx).Driver)
	h := r.NewHandle(uverbs.UVERBS_ATTR_CREATE_SRQ_HANDLE)
	r.Handle(uverbs.UVERBS_ATTR_CREATE_SRQ_PD_HANDLE, pd.Handle())
	r.U64(uverbs.UVERBS_ATTR_CREATE_SRQ_USER_HANDLE, track)
	r.U32(uverbs.UVERBS_ATTR_CREATE_SRQ_MAX_WR, reqWR)
	r.U32(uverbs.UVERBS_ATTR_CREATE_SRQ_MAX_SGE, reqSGE)
	r.U32(uverbs.UVERBS_ATTR_CREATE_SRQ_LIMIT, uint32(min(attr.Limit, 1<<31-1)))
	r.Const(uverbs.UVERBS_ATTR_CREATE_SRQ_TYPE, uverbs.IB_UVERBS_SRQT_BASIC)
	r.Optional(r.FD(uverbs.UVERBS_ATTR_CREATE_SRQ_EVENT_FD, ctx.AsyncFD()))
	r.Out(uverbs.UVERBS_ATTR_CREATE_SRQ_RESP_MAX_WR, unsafe.Pointer(&maxWR), 4)
	r.Out(uverbs.UVERBS_ATTR_CREATE_SRQ_RESP_MAX_SGE, unsafe.Pointer(&maxSGE), 4)
	r.Optional(r.Out(uverbs.UVERBS_ATTR_CREATE_SRQ_RESP_SRQ_NUM, unsafe.Pointer(&srqNum), 4))
	prov.Udata().Add(&r)
	if err := kobj.ContextOf(ctx).Do(&r); err != nil {
		prov.Release()
		kobj.ContextOf(ctx).Untrack(track)
		return nil, fmt.Errorf("srq: create %+v: %w", attr, err)
	}
	s.handle = uint32(r.Data(h))
	info, err := prov.Start(maxSGE, srqNum)
	if err != nil {
		s.destroy()
		prov.Release()
		kobj.ContextOf(ctx).Untrack(track)
		return nil, fmt.Errorf("srq: %w", err)
	}
	s.prov, s.ring, s.num = prov, info.Recv, info.Num
	kobj.ContextOf(ctx).SetShut(track, s.ring.Shut)
	return s, nil
}

// Handle is the kernel handle of the SRQ.
func (s *SRQ) Handle() uint32 { return s.handle }

// Num is the SRQ number.
func (s *SRQ) Num() uint32 { return s.num }

// UserHandle is the value async events carry for this SRQ.
func (s *SRQ) UserHandle() uint64 { return s.track }

// PD returns the protection domain of the SRQ.
func (s *SRQ) PD() *verbs.PD { return s.pd }

// check returns ErrClosed after Close.
func (s *SRQ) check() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return verbs.ErrClosed
	}
	return nil
}

// PostRecv adds receive buffers to the shared pool, without a system call.
// On failure the returned *verbs.PostError says which work request failed;
// the ones before it were posted. It allocates nothing, not even for the
// error of a full queue (verbs.ErrQueueFull) or a closed SRQ: those error
// values are shared and must not be modified.
func (s *SRQ) PostRecv(wrs []verbs.RecvWR) error {
	// One interface call into the provider, whose ring takes its lock;
	// View keeps wrs off the heap (see package internal/provider).
	return s.ring.Post(provider.View[provider.RecvWR](wrs))
}

// Posted returns how many posted buffers have not been consumed yet.
func (s *SRQ) Posted() int { return s.ring.Posted() }

// Modify arms the limit (attr.Limit, when limit is set) and/or resizes the
// SRQ (attr.MaxWR, when resize is set). Posted buffers survive a resize.
func (s *SRQ) Modify(attr Attr, limit, resize bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return verbs.ErrClosed
	}
	var mask uint32
	if resize {
		mask |= srqMaxWR
	}
	if limit {
		mask |= srqLimit
	}
	if mask == 0 || attr.MaxWR < 0 || attr.Limit < 0 || (resize && attr.MaxWR == 0) {
		return fmt.Errorf("srq: modify %+v: %w", attr, ErrBadAttr)
	}
	if resize && !s.prov.CanResize() {
		// siw cannot resize an SRQ (its modify_srq refuses IB_SRQ_MAX_WR).
		return fmt.Errorf("srq: modify %+v: %w", attr, verbs.ErrNotCapable)
	}
	ctx := s.pd.Context()
	// The provider adds its driver data and, on a resize, holds its
	// ring's lock from MODIFY_SRQ until it switched to the new queue.
	err := s.prov.Modify(resize, func(u provider.Udata) error {
		req := uverbs.ModifySrq{Srq_handle: s.handle, Attr_mask: mask, Max_wr: uint32(attr.MaxWR), Srq_limit: uint32(attr.Limit)}
		var r uverbs.Ioctl
		r.InitInvokeWrite("MODIFY_SRQ", uverbs.IB_USER_VERBS_CMD_MODIFY_SRQ, kobj.ContextOf(ctx).Driver)
		r.In(uverbs.UVERBS_ATTR_CORE_IN, unsafe.Pointer(&req), unsafe.Sizeof(req))
		u.Add(&r)
		return kobj.ContextOf(ctx).Do(&r)
	})
	if err != nil {
		return fmt.Errorf("srq: modify %+v: %w", attr, err)
	}
	return nil
}

// Query returns the SRQ's attributes as the kernel reports them.
func (s *SRQ) Query() (Attr, error) {
	if err := s.check(); err != nil {
		return Attr{}, err
	}
	ctx := s.pd.Context()
	req := uverbs.QuerySrq{Handle: s.handle}
	var resp uverbs.QuerySrqResp
	var r uverbs.Ioctl
	r.InitInvokeWrite("QUERY_SRQ", uverbs.IB_USER_VERBS_CMD_QUERY_SRQ, kobj.ContextOf(ctx).Driver)
	r.In(uverbs.UVERBS_ATTR_CORE_IN, unsafe.Pointer(&req), unsafe.Sizeof(req))
	r.Out(uverbs.UVERBS_ATTR_CORE_OUT, unsafe.Pointer(&resp), unsafe.Sizeof(resp))
	if err := kobj.ContextOf(ctx).Do(&r); err != nil {
		return Attr{}, fmt.Errorf("srq: query: %w", err)
	}
	return Attr{MaxWR: int(resp.Max_wr), MaxSGE: int(resp.Max_sge), Limit: int(resp.Srq_limit)}, nil
}

func (s *SRQ) destroy() error {
	var events uint32
	var r uverbs.Ioctl
	ctx := s.pd.Context()
	r.Init("SRQ.DESTROY", uverbs.UVERBS_OBJECT_SRQ, uverbs.UVERBS_METHOD_SRQ_DESTROY, kobj.ContextOf(ctx).Driver)
	r.Handle(uverbs.UVERBS_ATTR_DESTROY_SRQ_HANDLE, s.handle)
	r.Out(uverbs.UVERBS_ATTR_DESTROY_SRQ_RESP, unsafe.Pointer(&events), 4)
	return kobj.ContextOf(ctx).Do(&r)
}

// Close destroys the SRQ (EBUSY while QPs use it) and unmaps its queue.
func (s *SRQ) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	if err := s.destroy(); err != nil {
		return fmt.Errorf("srq: destroy: %w", err)
	}
	s.closed = true
	kobj.ContextOf(s.pd.Context()).Untrack(s.track)
	s.ring.Shut()
	return s.prov.Release()
}
