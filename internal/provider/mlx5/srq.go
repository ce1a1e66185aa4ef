package mlx5

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/goverbs/goverbs/internal/provider"
)

// srq is mlx5's provider.SRQ (mlx5_create_srq, mlx5_alloc_srq_buf): WQEs
// of a next segment and data segments, linked into a free list by their
// next_wqe_index, from head (where posts take) to tail (where polls give
// back). When the device allows twice the WQEs asked for, the extra ones
// form a wait queue, as libmlx5 keeps them (for page faults of on-demand
// paging, which goverbs does not use).
type srq struct {
	ctx  *ucontext
	attr provider.SRQAttr
	mem  []byte
	db   unsafe.Pointer
	cmd  createSRQ
	resp createSRQResp

	maxGS     uint32
	wqeShift  uint32
	max       uint32 // WQEs in the buffer
	srqn      uint32
	lock      provider.Lock
	head      uint32
	tail      uint32
	counter   uint32
	freed     atomic.Uint32 // WQEs given back by polls, for Posted
	wrid      []uint64
	errs      *provider.Errors
	started   bool
	haveWaitQ bool
}

// NewSRQ sizes and allocates the SRQ as mlx5_create_srq, then its
// doorbell record.
func (c *ucontext) NewSRQ(attr provider.SRQAttr) (provider.SRQ, error) {
	r := &c.resp
	if attr.MaxWR > r.MaxSRQRecvWR {
		return nil, fmt.Errorf("%w: %d SRQ WRs (at most %d)", errQueueSize, attr.MaxWR, r.MaxSRQRecvWR)
	}
	if attr.MaxSGE > uint32(r.MaxRqDescSz)/dataSegSize {
		return nil, fmt.Errorf("%w: %d SRQ SGEs", errQueueSize, attr.MaxSGE)
	}
	s := &srq{ctx: c, attr: attr, errs: attr.Errors}
	maxWR := attr.MaxWR*2 + 1
	s.haveWaitQ = true
	if maxWR > r.MaxSRQRecvWR {
		maxWR = attr.MaxWR + 1
		s.haveWaitQ = false
	}
	size := pow2(max(32, srqNextSeg+attr.MaxSGE*dataSegSize))
	if size > r.MaxRecvWR { // libmlx5 compares the WQE size with max_recv_wr
		return nil, fmt.Errorf("%w: SRQ WQEs of %d bytes", errQueueSize, size)
	}
	s.maxGS = (size - srqNextSeg) / dataSegSize
	s.wqeShift = ilog32(size - 1)
	s.max = pow2(maxWR)
	var err error
	if s.mem, err = allocBuf(uintptr(s.max) * uintptr(size)); err != nil {
		return nil, err
	}
	s.head = 0
	s.tail = pow2(attr.MaxWR+1) - 1
	s.link(s.head, s.tail)
	if s.haveWaitQ {
		s.link(s.tail+1, s.max-1)
	}
	s.wrid = make([]uint64, s.max)
	if s.db, err = c.dbrecs.alloc(r.CacheLineSize); err != nil {
		freeBuf(s.mem)
		return nil, err
	}
	s.cmd = createSRQ{BufAddr: addr(unsafe.Pointer(&s.mem[0])), DBAddr: addr(s.db)}
	return s, nil
}

// link chains WQEs start..end-1 each to the next (set_srq_buf_ll).
func (s *srq) link(start, end uint32) {
	for i := start; i < end; i++ {
		putBE16(unsafe.Add(s.wqe(i), 2), uint16(i+1))
	}
}

func (s *srq) wqe(i uint32) unsafe.Pointer {
	return unsafe.Add(unsafe.Pointer(&s.mem[0]), uintptr(i)<<s.wqeShift)
}

// CreateSize is what CREATE_SRQ carries: every WQE of the buffer, wait
// queue included, less one, and the SGEs a WQE holds.
func (s *srq) CreateSize() (maxWR, maxSGE uint32) { return s.max - 1, s.maxGS }

// Udata is CREATE_SRQ's driver data.
func (s *srq) Udata() provider.Udata {
	return provider.Udata{In: provider.Bytes(&s.cmd), Out: provider.Bytes(&s.resp)}
}

// Start takes the SRQ number of the driver response.
func (s *srq) Start(_, _ uint32) (provider.SRQInfo, error) {
	s.srqn = s.resp.SRQN
	s.ctx.srqs.set(s.srqn, s)
	s.started = true
	return provider.SRQInfo{Recv: s, Num: s.srqn}, nil
}

// Post writes receive WQEs at the head of the free list, then the
// doorbell record with the count of all posts (mlx5_post_srq_recv).
func (s *srq) Post(wrs []provider.RecvWR) error {
	if !s.lock.Lock() {
		return s.errs.Closed()
	}
	var err error
	nreq := 0
	for ; nreq < len(wrs); nreq++ {
		wr := &wrs[nreq]
		if uint32(len(wr.SGList)) > s.maxGS {
			err = s.errs.At(nreq, provider.ReasonTooManySGE)
			break
		}
		if s.head == s.tail {
			err = s.errs.Full(nreq)
			break
		}
		s.wrid[s.head] = wr.WRID
		next := s.wqe(s.head)
		s.head = uint32(be16(unsafe.Add(next, 2)))
		scat := unsafe.Add(next, srqNextSeg)
		i := 0
		for ; i < len(wr.SGList); i++ {
			g := &wr.SGList[i]
			d := unsafe.Add(scat, uintptr(i)*dataSegSize)
			putBE32(d, g.Length)
			putBE32(unsafe.Add(d, 4), g.LKey)
			putBE64(unsafe.Add(d, 8), g.Addr)
		}
		if uint32(i) < s.maxGS {
			d := unsafe.Add(scat, uintptr(i)*dataSegSize)
			putBE32(d, 0)
			putBE32(unsafe.Add(d, 4), invalidLKey)
			putBE64(unsafe.Add(d, 8), 0)
		}
	}
	if nreq > 0 {
		s.counter += uint32(nreq)
		toDevice()
		provider.StoreRelease((*uint32)(s.db), beWord32(s.counter))
	}
	s.lock.Unlock()
	return err
}

// free gives WQE ind back to the tail of the free list
// (mlx5_free_srq_wqe); a poll calls it.
func (s *srq) free(ind uint32) {
	ind &= s.max - 1
	locked := s.lock.Lock()
	putBE16(unsafe.Add(s.wqe(s.tail), 2), uint16(ind))
	s.tail = ind
	s.freed.Add(1)
	if locked {
		s.lock.Unlock()
	}
}

// copyIn copies a scattered CQE into WQE idx's buffers
// (mlx5_copy_to_recv_srq).
func (s *srq) copyIn(idx uint32, src unsafe.Pointer, n uint32, in32 bool) provider.WCStatus {
	if !in32 || n > 32 {
		return provider.WCLocLenErr
	}
	scat := unsafe.Add(s.wqe(idx&(s.max-1)), srqNextSeg)
	for i := uint32(0); i < 1<<(s.wqeShift-4); i++ {
		d := unsafe.Add(scat, uintptr(i)*dataSegSize)
		c := min(n, be32(d))
		dst := be64(unsafe.Add(d, 8))
		copy(unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&dst))), c), unsafe.Slice((*byte)(src), c))
		src = unsafe.Add(src, c)
		n -= c
		if n == 0 {
			return provider.WCSuccess
		}
	}
	return provider.WCLocLenErr
}

// Posted returns how many posted receives the device has not consumed.
func (s *srq) Posted() int {
	if s.lock.Closed() {
		return 0
	}
	return int(atomic.LoadUint32(&s.counter) - s.freed.Load())
}

// Shut refuses later posts and waits for one in progress.
func (s *srq) Shut() {
	if s.lock.Lock() {
		s.lock.CloseUnlock()
	}
}

// CanResize reports false: libmlx5's mlx5_modify_srq passes the request
// on, but the kernel's mlx5 refuses IB_SRQ_MAX_WR.
func (s *srq) CanResize() bool { return false }

// Modify issues MODIFY_SRQ without driver data (as mlx5_modify_srq).
func (s *srq) Modify(resize bool, do func(provider.Udata) error) error {
	if resize {
		return errors.New("mlx5 cannot resize an SRQ")
	}
	return do(provider.Udata{})
}

// Release frees the buffer and the record.
func (s *srq) Release() error {
	s.Shut()
	if s.started {
		s.ctx.srqs.set(s.srqn, nil)
		s.started = false
	}
	if s.db != nil {
		s.ctx.dbrecs.release(s.db, s.ctx.resp.CacheLineSize)
		s.db = nil
	}
	err := freeBuf(s.mem)
	s.mem = nil
	return err
}

// srqTable maps SRQ numbers to SRQs (mlx5_find_srq), for CQE version 0.
type srqTable struct {
	top [1 << 12]atomic.Pointer[[1 << 12]atomic.Pointer[srq]]
}

func (t *srqTable) set(i uint32, s *srq) {
	i &= 0xffffff
	sub := t.top[i>>12].Load()
	if sub == nil {
		if s == nil {
			return
		}
		sub = new([1 << 12]atomic.Pointer[srq])
		if !t.top[i>>12].CompareAndSwap(nil, sub) {
			sub = t.top[i>>12].Load()
		}
	}
	sub[i&0xfff].Store(s)
}

func (t *srqTable) get(i uint32) *srq {
	i &= 0xffffff
	if sub := t.top[i>>12].Load(); sub != nil {
		return sub[i&0xfff].Load()
	}
	return nil
}

var (
	_ provider.SRQ           = (*srq)(nil)
	_ provider.SRQCreateSize = (*srq)(nil)
	_ provider.RecvQueue     = (*srq)(nil)
)
