// Package mr registers memory with an RDMA device: memory regions (MRs) and
// the off-heap buffers they are best made of.
//
// Registered memory must stay where it is and stay mapped for as long as the
// device may access it. The recommended way is Alloc, which maps
// page-aligned memory outside the Go heap, or New, which allocates and
// registers in one step:
//
//	m, err := mr.New(pd, 1<<20, mr.LocalWrite|mr.RemoteWrite|mr.RemoteRead)
//	...
//	defer m.Close() // deregisters, then unmaps
//	buf := m.Bytes()
//
// [MR.SGE] names part of a region in a local work request, [MR.Remote] what
// a peer needs to reach it with RDMA (address, rkey, length).
//
// Register also accepts memory the caller owns (a Go slice, an mmap): the MR
// keeps a reference to it so the garbage collector cannot free it while it
// is registered. Never register memory on a goroutine stack (stacks move as
// they grow), and never unmap or madvise(MADV_DONTNEED) a registered range:
// the device keeps the pages it pinned, and the process would see others.
//
// # Access flags
//
// An MR always allows the local device to read it: memory that is only
// sent from (the source of a SEND or of an RDMA WRITE) needs no flag at
// all, access 0. [LocalWrite] is for memory
// the device writes into: receive buffers, the destination of an RDMA
// READ, the result of an atomic. The Remote* flags let the peer reach the
// region with its rkey ([RemoteRead] for its READs, [RemoteWrite] for its
// WRITEs, [RemoteAtomic] for its atomics); the last two need LocalWrite
// as well. Give a region no more than its use needs: a key with remote
// access lets the peer touch the memory without this program's help.
//
// Memory windows (MW) hand a peer a remote key for part of a region and
// take it back with work requests (BIND_MW, LOCAL_INV) instead of
// registration system calls.
package mr

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/kobj"
	"github.com/goverbs/goverbs/uverbs"
	"github.com/goverbs/goverbs/verbs"
)

// Access is the set of operations an MR allows (IB_UVERBS_ACCESS_*).
type Access uint32

// Access flags. Remote write and remote atomic require LocalWrite.
const (
	LocalWrite      Access = uverbs.IB_UVERBS_ACCESS_LOCAL_WRITE
	RemoteWrite     Access = uverbs.IB_UVERBS_ACCESS_REMOTE_WRITE
	RemoteRead      Access = uverbs.IB_UVERBS_ACCESS_REMOTE_READ
	RemoteAtomic    Access = uverbs.IB_UVERBS_ACCESS_REMOTE_ATOMIC
	MWBind          Access = uverbs.IB_UVERBS_ACCESS_MW_BIND
	ZeroBased       Access = uverbs.IB_UVERBS_ACCESS_ZERO_BASED
	OnDemand        Access = uverbs.IB_UVERBS_ACCESS_ON_DEMAND
	HugeTLB         Access = uverbs.IB_UVERBS_ACCESS_HUGETLB
	RelaxedOrdering Access = uverbs.IB_UVERBS_ACCESS_RELAXED_ORDERING
)

// ErrInvalidAccess is returned for access flag combinations the kernel
// would reject: remote write or atomic without local write.
var ErrInvalidAccess = errors.New("remote write and remote atomic access need LocalWrite")

// Buffer is page-aligned memory mapped outside the Go heap. It never moves
// and is never touched by the garbage collector.
type Buffer struct {
	mu sync.Mutex
	b  []byte
}

// Alloc maps size bytes (rounded up to whole pages) of zeroed memory.
func Alloc(size int) (*Buffer, error) {
	if size <= 0 {
		return nil, fmt.Errorf("mr: alloc %d bytes: size must be positive", size)
	}
	page := unix.Getpagesize()
	n := (size + page - 1) &^ (page - 1)
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("mr: alloc %d bytes: %w", size, err)
	}
	return &Buffer{b: b[:size:n]}, nil
}

// Bytes returns the buffer's memory; nil after Close.
func (b *Buffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b
}

// Close unmaps the buffer. It must not be registered any more.
func (b *Buffer) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.b == nil {
		return nil
	}
	err := unix.Munmap(b.b[:cap(b.b)])
	b.b = nil
	return err
}

// MR is a registered memory region.
type MR struct {
	pd     *verbs.PD
	handle uint32
	lkey   uint32
	rkey   uint32
	iova   uint64
	access Access
	size   int
	mem    []byte  // keeps caller memory reachable while registered; guarded by mu
	owned  *Buffer // memory New allocated, freed by Close
	track  uint64

	object
}

// New allocates size bytes with Alloc and registers them.
func New(pd *verbs.PD, size int, access Access) (*MR, error) {
	buf, err := Alloc(size)
	if err != nil {
		return nil, err
	}
	m, err := Register(pd, buf.Bytes(), access)
	if err != nil {
		buf.Close()
		return nil, err
	}
	m.owned = buf
	return m, nil
}

// Register registers mem, addressed by its own virtual addresses (the
// IOVA equals the process address, as ibv_reg_mr does).
func Register(pd *verbs.PD, mem []byte, access Access) (*MR, error) {
	if len(mem) == 0 {
		return nil, fmt.Errorf("mr: register: empty buffer: %w", unix.EINVAL)
	}
	return RegisterIOVA(pd, mem, uint64(uintptr(unsafe.Pointer(&mem[0]))), access)
}

// RegisterIOVA registers mem so that the device addresses it as
// [iova, iova+len(mem)): remote peers use these addresses with the rkey,
// and local SGEs must use them too.
func RegisterIOVA(pd *verbs.PD, mem []byte, iova uint64, access Access) (*MR, error) {
	if len(mem) == 0 {
		return nil, fmt.Errorf("mr: register: empty buffer: %w", unix.EINVAL)
	}
	if access&(RemoteWrite|RemoteAtomic) != 0 && access&LocalWrite == 0 {
		return nil, fmt.Errorf("mr: register: %w", ErrInvalidAccess)
	}
	if err := kobj.CheckPD(pd); err != nil {
		return nil, fmt.Errorf("mr: register: PD: %w", err)
	}
	ctx := pd.Context()
	req := uverbs.RegMr{
		Start:        uint64(uintptr(unsafe.Pointer(&mem[0]))),
		Length:       uint64(len(mem)),
		Hca_va:       iova,
		Pd_handle:    pd.Handle(),
		Access_flags: uint32(access),
	}
	var resp uverbs.RegMrResp
	var r uverbs.Ioctl
	r.InitInvokeWrite("REG_MR", uverbs.IB_USER_VERBS_CMD_REG_MR, kobj.ContextOf(ctx).Driver)
	r.In(uverbs.UVERBS_ATTR_CORE_IN, unsafe.Pointer(&req), unsafe.Sizeof(req))
	r.Out(uverbs.UVERBS_ATTR_CORE_OUT, unsafe.Pointer(&resp), unsafe.Sizeof(resp))
	// The provider's driver data, if it wants any (siw: the STag key
	// byte, and room for the STag it returns, which is the lkey/rkey of
	// the core response too).
	kobj.ContextOf(ctx).Provider.RegMR().Add(&r)
	if err := kobj.ContextOf(ctx).Do(&r); err != nil {
		return nil, explain(err, len(mem))
	}
	m := &MR{pd: pd, handle: resp.Handle, lkey: resp.Lkey, rkey: resp.Rkey, iova: iova, access: access, size: len(mem), mem: mem}
	t, err := kobj.ContextOf(ctx).Track(kobj.KindMR, m)
	if err != nil {
		m.dereg()
		return nil, fmt.Errorf("mr: register: %w", err)
	}
	m.track = t
	return m, nil
}

// explain turns the errnos of a failed registration into advice.
func explain(err error, n int) error {
	switch {
	case errors.Is(err, unix.EFAULT):
		return fmt.Errorf("mr: register %d bytes: the range is not mapped memory: %w", n, err)
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.ENOMEM):
		var lim unix.Rlimit
		unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim)
		return fmt.Errorf("mr: register %d bytes: pinning the memory failed; RLIMIT_MEMLOCK is %d bytes: "+
			"raise it (ulimit -l, LimitMEMLOCK= in systemd) or grant CAP_IPC_LOCK: %w", n, lim.Cur, err)
	}
	return fmt.Errorf("mr: register %d bytes: %w", n, err)
}

func (m *MR) dereg() error {
	var r uverbs.Ioctl
	ctx := m.pd.Context()
	r.Init("MR.DESTROY", uverbs.UVERBS_OBJECT_MR, uverbs.UVERBS_METHOD_MR_DESTROY, kobj.ContextOf(ctx).Driver)
	r.Handle(uverbs.UVERBS_ATTR_DESTROY_MR_HANDLE, m.handle)
	return kobj.ContextOf(ctx).Do(&r)
}

// LKey is the local key, for SGEs of local work requests.
func (m *MR) LKey() uint32 { return m.lkey }

// RKey is the remote key a peer uses for RDMA to this MR. Without a remote
// access flag it may be 0 or not (rxe on Linux 6.12 reports the lkey); the
// device refuses remote access to such an MR either way.
func (m *MR) RKey() uint32 { return m.rkey }

// IOVA is the address of the first byte as the device sees it.
func (m *MR) IOVA() uint64 { return m.iova }

// Access is the set of operations the region was registered for.
func (m *MR) Access() Access { return m.access }

// Len is the length of the region.
func (m *MR) Len() int { return m.size }

// Bytes returns the registered memory, or nil after Close. It is safe to
// call concurrently with Close, but memory New allocated is unmapped by
// Close: do not use a slice Bytes returned once Close may have run.
func (m *MR) Bytes() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mem
}

// Handle is the kernel handle of the MR.
func (m *MR) Handle() uint32 { return m.handle }

// PD returns the protection domain of the MR.
func (m *MR) PD() *verbs.PD { return m.pd }

// Close deregisters the MR and, for an MR made by New, unmaps its memory.
func (m *MR) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if done, err := m.close(m.pd.Context(), m.track, "mr: deregister", m.dereg); done || err != nil {
		return err
	}
	m.mem = nil
	if m.owned != nil {
		return m.owned.Close()
	}
	return nil
}

// object is the closed-state bookkeeping MRs and memory windows share; mu
// also guards the owner's other mutable fields.
type object struct {
	mu     sync.Mutex
	closed bool
}

func (o *object) check() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return verbs.ErrClosed
	}
	return nil
}

// close destroys the kernel object once; the caller holds mu. It reports
// done when the object was already closed, or the destroy's error.
func (o *object) close(dev *verbs.Context, track uint64, op string, destroy func() error) (done bool, err error) {
	if o.closed {
		return true, nil
	}
	if err := destroy(); err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	o.closed = true
	kobj.ContextOf(dev).Untrack(track)
	return false, nil
}
