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
	"runtime"
	"sync"
	"unsafe"

	"github.com/goverbs/goverbs/internal/kobj"
	"github.com/goverbs/goverbs/internal/provider/rxe"
	"github.com/goverbs/goverbs/internal/provider/siw"
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
	// The provider's ring, chosen at creation from the device's driver
	// id: ring (rxe) or sring (siw); PostRecv branches on sring == nil.
	ring   *rxe.RecvRing
	sring  *siw.RecvRing
	maxSGE int

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
var postErrors = rxe.NewErrors("srq: post recv")

// ErrBadAttr is returned for attributes out of the device's range.
var ErrBadAttr = errors.New("SRQ attributes out of range")

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
	var maxWR, maxSGE, srqNum uint32
	var drv uverbs.RxeCreateSrqResp
	var sdrv uverbs.SiwUrespCreateSrq
	isSIW := verbs.Driver(kobj.ContextOf(ctx).Driver) == verbs.DriverSIW
	var r uverbs.Ioctl
	r.Init("SRQ.CREATE", uverbs.UVERBS_OBJECT_SRQ, uverbs.UVERBS_METHOD_SRQ_CREATE, kobj.ContextOf(ctx).Driver)
	h := r.NewHandle(uverbs.UVERBS_ATTR_CREATE_SRQ_HANDLE)
	r.Handle(uverbs.UVERBS_ATTR_CREATE_SRQ_PD_HANDLE, pd.Handle())
	r.U64(uverbs.UVERBS_ATTR_CREATE_SRQ_USER_HANDLE, track)
	r.U32(uverbs.UVERBS_ATTR_CREATE_SRQ_MAX_WR, uint32(min(attr.MaxWR, 1<<31-1)))
	r.U32(uverbs.UVERBS_ATTR_CREATE_SRQ_MAX_SGE, uint32(min(attr.MaxSGE, 1<<31-1)))
	r.U32(uverbs.UVERBS_ATTR_CREATE_SRQ_LIMIT, uint32(min(attr.Limit, 1<<31-1)))
	r.Const(uverbs.UVERBS_ATTR_CREATE_SRQ_TYPE, uverbs.IB_UVERBS_SRQT_BASIC)
	r.Optional(r.FD(uverbs.UVERBS_ATTR_CREATE_SRQ_EVENT_FD, ctx.AsyncFD()))
	r.Out(uverbs.UVERBS_ATTR_CREATE_SRQ_RESP_MAX_WR, unsafe.Pointer(&maxWR), 4)
	r.Out(uverbs.UVERBS_ATTR_CREATE_SRQ_RESP_MAX_SGE, unsafe.Pointer(&maxSGE), 4)
	r.Optional(r.Out(uverbs.UVERBS_ATTR_CREATE_SRQ_RESP_SRQ_NUM, unsafe.Pointer(&srqNum), 4))
	if isSIW {
		r.Out(uverbs.UVERBS_ATTR_UHW_OUT, unsafe.Pointer(&sdrv), unsafe.Sizeof(sdrv))
	} else {
		r.Out(uverbs.UVERBS_ATTR_UHW_OUT, unsafe.Pointer(&drv), unsafe.Sizeof(drv))
	}
	if err := kobj.ContextOf(ctx).Do(&r); err != nil {
		kobj.ContextOf(ctx).Untrack(track)
		return nil, fmt.Errorf("srq: create %+v: %w", attr, err)
	}
	s.handle = uint32(r.Data(h))
	if isSIW {
		s.num = srqNum
		if err := s.mapSIW(ctx, sdrv, maxSGE); err != nil {
			s.destroy()
			kobj.ContextOf(ctx).Untrack(track)
			return nil, err
		}
		return s, nil
	}
	s.num = drv.Num
	q, err := mapQueue(ctx, drv.Mi)
	if err != nil {
		s.destroy()
		kobj.ContextOf(ctx).Untrack(track)
		return nil, err
	}
	s.maxSGE = min(int(maxSGE), int((q.ElemSize()-rxe.RecvWQEHeader)/unsafe.Sizeof(verbs.SGE{})))
	s.ring = rxe.NewRecvRing(q, s.maxSGE, postErrors)
	return s, nil
}

// mapSIW maps siw's SRQ at the key of the create response.
func (s *SRQ) mapSIW(ctx *verbs.Context, drv uverbs.SiwUrespCreateSrq, maxSGE uint32) error {
	mem, err := uverbs.Mmap(kobj.ContextOf(ctx).FD, drv.Srq_key, siw.QueueLen(drv.Num_rqe, siw.RQESize))
	if err != nil {
		return fmt.Errorf("srq: map queue: %w", err)
	}
	s.maxSGE = min(int(maxSGE), siw.MaxSGE)
	ring, err := siw.NewRecvRing(mem, drv.Num_rqe, s.maxSGE, postErrors)
	if err != nil {
		uverbs.Munmap(mem)
		return fmt.Errorf("srq: %w", err)
	}
	s.sring = ring
	return nil
}

func mapQueue(ctx *verbs.Context, mi uverbs.RxeMminfo) (*rxe.Queue, error) {
	mem, err := uverbs.Mmap(kobj.ContextOf(ctx).FD, mi.Offset, int(mi.Size))
	if err != nil {
		return nil, fmt.Errorf("srq: map queue: %w", err)
	}
	q, err := rxe.NewQueue(mem, rxe.RecvWQEHeader)
	if err != nil {
		uverbs.Munmap(mem)
		return nil, fmt.Errorf("srq: %w", err)
	}
	return q, nil
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
	if s.sring != nil {
		return s.sring.Post(wrs)
	}
	return s.ring.Post(wrs)
}

// Posted returns how many posted buffers have not been consumed yet.
func (s *SRQ) Posted() int {
	if s.sring != nil {
		return s.sring.Posted()
	}
	return s.ring.Posted()
}

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
	ctx := s.pd.Context()
	req := uverbs.ModifySrq{Srq_handle: s.handle, Attr_mask: mask, Max_wr: uint32(attr.MaxWR), Srq_limit: uint32(attr.Limit)}
	// On resize the kernel writes the new queue's mminfo at this address.
	mi := new(uverbs.RxeMminfo)
	drv := uverbs.RxeModifySrqCmd{Info_addr: uverbs.Addr(unsafe.Pointer(mi))}
	var r uverbs.Ioctl
	r.InitInvokeWrite("MODIFY_SRQ", uverbs.IB_USER_VERBS_CMD_MODIFY_SRQ, kobj.ContextOf(ctx).Driver)
	r.In(uverbs.UVERBS_ATTR_CORE_IN, unsafe.Pointer(&req), unsafe.Sizeof(req))
	r.In(uverbs.UVERBS_ATTR_UHW_IN, unsafe.Pointer(&drv), unsafe.Sizeof(drv))
	if s.sring != nil && resize {
		// siw cannot resize an SRQ (its modify_srq refuses IB_SRQ_MAX_WR).
		return fmt.Errorf("srq: modify %+v: %w", attr, verbs.ErrNotCapable)
	}
	if !resize {
		err := kobj.ContextOf(ctx).Do(&r)
		runtime.KeepAlive(mi)
		if err != nil {
			return fmt.Errorf("srq: modify %+v: %w", attr, err)
		}
		return nil
	}
	// A resize holds the ring's lock from MODIFY_SRQ to the remap, as
	// rdma-core does: the kernel copies the WQEs posted to the old queue
	// into the new one, and a receive posted to the old queue after that
	// copy would be lost.
	old, err := s.ring.Resize(func() (*rxe.Queue, error) {
		err := kobj.ContextOf(ctx).Do(&r)
		runtime.KeepAlive(mi)
		if err != nil {
			return nil, fmt.Errorf("srq: modify %+v: %w", attr, err)
		}
		return mapQueue(ctx, *mi)
	})
	if err != nil {
		return err
	}
	return uverbs.Munmap(old.Mem())
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
	if s.sring != nil {
		s.sring.Shut()
		return uverbs.Munmap(s.sring.Mem())
	}
	s.ring.Shut()
	return uverbs.Munmap(s.ring.Queue().Mem())
}
