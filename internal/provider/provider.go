// Package provider is the seam between goverbs' generic code and its
// providers: the code that knows one RDMA driver's queue formats,
// doorbells and driver data, one folder per driver below this one
// (internal/provider/rxe, internal/provider/siw). It is rdma-core's
// struct verbs_context_ops in Go. verbs.Open looks the device's driver id
// up in the registry (internal/provider/registry) and keeps the [Context]
// that provider's [Provider.Open] returns; every CQ, QP, SRQ, MR and AH
// created on that verbs.Context calls through it. The object packages (cq,
// qp, srq, mr) import this package and no provider, and never branch on a
// driver id: internal/testutil/apicheck fails if they do.
//
// # Adding a provider
//
// A new folder below internal/provider whose package exports a [Provider]
// value, and one line naming it in internal/provider/registry. Nothing
// else changes: not verbs, not the object packages.
//
// # What a provider implements
//
// [Provider.Open] returns a [Context], the provider's state for one
// verbs.Context and its table of operations. Every object is created the
// same way around its kernel command:
//
//  1. New: the Context's NewCQ, NewQP, NewSRQ or (a [KernelAHs]) NewAH
//     prepares the object. A provider whose queues live in user memory (hardware:
//     pvrdma, mlx5) allocates them here, page-aligned and off the Go heap
//     (an anonymous mmap), because the kernel pins them as umem and the
//     device writes them by DMA. If the device lays those queues out from
//     the create command's capacities, the QP or SRQ also implements
//     [QPCreateCaps] or [SRQCreateSize], and the command carries the
//     sizes the provider allocated for (pvrdma).
//  2. Udata: the object's driver data for the create command, UHW_IN (what
//     the kernel driver reads: rxe and siw send none; hardware sends the
//     queue buffers' addresses and sizes) and UHW_OUT (room for the
//     driver's response: rxe's mmap offsets, siw's mmap keys, a hardware
//     queue number). The generic code adds them to the command and issues
//     it.
//  3. Start, after the command succeeded, with what the core response
//     says: the provider reads its UHW_OUT and maps the kernel-allocated
//     queues at the offsets given there (rxe, siw), or takes over the
//     memory it handed over in UHW_IN. It returns the data-path objects
//     (QPInfo, SRQInfo) and the capacities the generic object reports.
//     An AH that reads its response implements [AHStarter].
//  4. The data path (below).
//  5. Release, once the kernel object is destroyed, and also when the
//     command or Start failed: unmap what Start mapped, free what New
//     allocated. Nothing of the object is used afterwards. Before a QP's
//     Release, a CQ whose ring lives in user memory removes the QP's
//     completions ([CQCleaner]; also after a modify to RESET).
//
// A provider's objects of one context are made by the same [Context] and
// may share its state: a hardware CQ, whose CQEs carry a QP number and a
// WQE index rather than the work request's id, finds the QP (and the ids
// it keeps per WQE) in a table its Context holds, which QP.Start (it gets
// the QP number) and QP.Release maintain.
//
// The context itself follows the same steps: [Context.GetContext] is
// GET_CONTEXT's driver data, [Context.Start] runs after it (a hardware
// provider maps its UAR, the doorbell page, here), [Context.Close] runs
// after every object of the context is closed and before the uverbs
// descriptor is. REG_MR's driver data is [Context.RegMR]'s. MODIFY_SRQ
// and RESIZE_CQ get theirs from the provider, which calls a function that
// issues the command ([SRQ.Modify], [CQ.Resize]) and holds whatever lock
// keeps its data path off a queue being replaced.
//
// # The data path
//
// Posting and polling never allocate and never make a system call the
// provider does not need. One interface call per post or poll is the cost
// of this seam (a few ns; the work request loop runs inside the provider
// method, so a list of 16 costs one call, not 16). Per call:
//
//   - [CQ.Poll] runs under the CQ's poll lock (a [Lock] held by package
//     cq, also held across [CQ.Resize] and taken for good before
//     [CQ.Release]); [CQ.Queued] and [CQ.Pending] run without it, but
//     never at the same time as Resize or Release. A provider copies its
//     device-format CQEs into [WC], which has struct ib_uverbs_wc's
//     layout: rxe's CQE is that struct, siw's and a hardware CQE (with
//     ownership bits) are translated.
//   - [CQ.Arm] requests the next completion event. It reports whether the
//     generic code must still issue the kernel's REQ_NOTIFY_CQ command
//     (rxe) or the provider armed the CQ itself, through a mapped control
//     word (siw) or a doorbell record and a UAR store (hardware). Arm must
//     be ordered before any CQE check that follows it (a full barrier), as
//     cq.Wait polls again after arming. [CQ.Event] tells the provider that
//     a completion event of the CQ was read (hardware counts them into its
//     next arm command); it may run at the same time as Poll and Arm.
//   - [SendQueue.Post] runs under the QP's send lock (held by package
//     qp), after the QP state check. It writes as many of the work
//     requests as it can, in order, and for each first asks the
//     [Checker] (the generic validation: opcode against the QP type,
//     sizes against the capacities, the UD address handle) before its own
//     limits. It returns how many it posted, whether the generic code must
//     ring the kernel's POST_SEND doorbell after unlocking (kick: rxe and
//     siw) and the error of the first work request not posted. A provider
//     with a memory-mapped doorbell (a UAR store, no system call) rings it
//     itself inside Post, under the lock, and returns kick false.
//   - [RecvQueue.Post] takes the queue's own lock (a [Lock] inside the
//     provider's ring, which [SRQ.Modify] holds across a resize) and needs
//     no doorbell on rxe and siw; a hardware provider updates its
//     doorbell record inside Post.
//   - The slices passed to Post and Poll belong to the caller for the
//     duration of the call only: a provider never keeps them or anything
//     they point to. The object packages pass them with [View], which
//     hides them from escape analysis, so a caller's work request list
//     built on the stack stays there (an interface call would otherwise
//     move it to the heap, one allocation per post).
//   - Errors: a provider returns the errors of its [Errors] table (shared,
//     not allocated on the paths a caller retries: full queue, closed
//     queue) and, for a work request it cannot carry, Errors.At with a
//     [Reason]; the generic code turns both into *verbs.PostError.
//
// # Why this package has its own work request types
//
// verbs must reach the registry when a context is opened, so verbs
// imports the registry, which imports every provider: a provider cannot
// import verbs. It sees the caller's work requests and fills the caller's
// completions through [SendWR], [RecvWR], [SGE] and [WC], which have
// exactly the memory layout of verbs.SendWR, verbs.RecvWR, verbs.SGE and
// verbs.WorkCompletion (this package's tests pin it field by field), and
// the object packages hand the caller's slices over with [View], without
// a copy. The constants (opcodes, flags, statuses) are verbs' values, and
// pinned the same way.
//
// Import graph: verbs → registry → each provider → this package → uverbs;
// internal/kobj → this package (a verbs.Context's plumbing holds its
// provider [Context]); cq, qp, srq, mr → this package and kobj.
package provider

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/goverbs/goverbs/uverbs"
)

// Provider is one provider, as the registry lists it.
type Provider struct {
	// Driver is the id of the kernel driver the provider serves
	// (enum rdma_driver_id, uverbs.RDMA_DRIVER_*).
	Driver uint32
	// Open returns the provider's state for a context being opened on
	// the uverbs descriptor fd, before GET_CONTEXT. The provider keeps fd
	// to map its queues; it stays open until after Context.Close.
	Open func(fd *uverbs.FD) Context
	// InterruptibleCommands is set when the driver waits for the
	// device's answer to a command interruptibly and fails the command
	// when a signal interrupts the wait, although the device may still
	// carry it out. Every command on such a device runs with signals
	// blocked on its thread (uverbs.FD.BlockSignalsInUse), from
	// GET_CONTEXT on.
	InterruptibleCommands bool
}

// Udata is the driver-specific data of one command: In is sent as
// UHW_IN, Out receives UHW_OUT; either may be empty. Both stay valid
// until the provider has read the response (they usually point into the
// object being created).
type Udata struct {
	In  []byte
	Out []byte
	// Keep is memory an address inside In points at (taken with
	// uverbs.Addr), such as where the kernel writes a resized queue's
	// mmap information. Add hands it to the request's Ioctl.Keep, which
	// makes it escape to the heap: the address cannot go stale.
	Keep unsafe.Pointer
}

// Add adds u to the command r as its UHW_IN and UHW_OUT attributes,
// leaving out an empty one.
func (u Udata) Add(r *uverbs.Ioctl) {
	if len(u.In) > 0 {
		r.In(uverbs.UVERBS_ATTR_UHW_IN, unsafe.Pointer(&u.In[0]), uintptr(len(u.In)))
	}
	if len(u.Out) > 0 {
		r.Out(uverbs.UVERBS_ATTR_UHW_OUT, unsafe.Pointer(&u.Out[0]), uintptr(len(u.Out)))
	}
	if u.Keep != nil {
		r.Keep(u.Keep)
	}
}

// Bytes returns the memory of *p as a byte slice, for a Udata.
func Bytes[T any](p *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(p)), unsafe.Sizeof(*p))
}

// FWVersion3 formats QUERY_DEVICE's fw_ver as three 16-bit fields,
// major.minor.sub, as rdma-core's rxe and siw providers print it.
func FWVersion3(raw uint64) string {
	return fmt.Sprintf("%d.%d.%d", (raw>>32)&0xffff, (raw>>16)&0xffff, raw&0xffff)
}

// Context is a provider's state for one verbs.Context and its table of
// operations (rdma-core's verbs_context_ops). Its methods other than the
// data-path objects' are called at creation and teardown only, never on
// the data path.
type Context interface {
	// GetContext returns GET_CONTEXT's driver data.
	GetContext() Udata
	// Start finishes the context once GET_CONTEXT succeeded (its UHW_OUT
	// is filled): a hardware provider maps its doorbell page here.
	Start() error
	// Close releases what Start set up. It runs after every object of
	// the context was closed, before the uverbs descriptor is.
	Close() error
	// FWVersion formats QUERY_DEVICE's fw_ver as the provider's rdma-core
	// counterpart does.
	FWVersion(raw uint64) string

	// NewCQ prepares a CQ of at least cqe entries.
	NewCQ(cqe int) (CQ, error)
	// NewQP prepares a QP.
	NewQP(attr QPAttr) (QP, error)
	// NewSRQ prepares an SRQ.
	NewSRQ(attr SRQAttr) (SRQ, error)
	// RegMR returns REG_MR's driver data (siw's STag key request and
	// response). It is used for one command.
	RegMR() Udata
	// AllocPD returns ALLOC_PD's driver data (pvrdma's response, the PD
	// number: vmw_pvrdma fails the command with EFAULT when it has no
	// room to write it). It is used for one command.
	AllocPD() Udata
}

// DeviceCaps are the capabilities a provider reads from EX_QUERY_DEVICE's
// driver response (rdma-core's providers copy them into struct
// ibv_device_attr_ex): TSO, the RSS hash and packet pacing.
type DeviceCaps struct {
	MaxTSO                    uint32
	TSOSupportedQPTs          uint32
	RxHashFunction            uint8
	RxHashFieldsMask          uint64
	QPRateLimitMin            uint32 // kbps
	QPRateLimitMax            uint32 // kbps
	PacketPacingSupportedQPTs uint32
}

// DeviceQuerier is implemented by a Context whose EX_QUERY_DEVICE
// carries driver data (mlx5's query_device_ex).
type DeviceQuerier interface {
	// QueryDevice returns the command's driver data, and a function
	// that, once the command succeeded, reads caps from its response
	// (nil when there is none to read).
	QueryDevice() (Udata, func(caps *DeviceCaps))
}

// Ready is a CQ's emptiness test, published by its provider, so that the
// generic Poll answers an empty poll, the common case of a busy-polling
// loop, with one load and no call into the provider: that call cost an
// empty poll about 40 ns under the test bed's emulation (make bench: 103 ns
// through the seam against 62 with the branch per provider it replaced).
//
// The CQ holds a completion the next Poll would return exactly when the
// 32-bit Word, loaded with acquire order, masked with Mask, differs from
// Idle. Every ring format known fits:
//
//   - rxe: Word is the producer index the kernel writes, Mask all ones,
//     Idle the consumer index (moved by each Poll);
//   - pvrdma: the same with the device's prod_tail (its wrap bit
//     included) and our cons_head: its CQEs have no owner bit;
//   - siw: Word is the flags word of the CQE at the consumer index (moved
//     by each Poll), Mask the VALID bit, Idle 0;
//   - hardware rings with an owner or phase bit (mlx5): Word is the CQE
//     at the consumer index, Mask the owner bit, Idle the value that bit
//     has while the slot still belongs to the device.
type Ready struct {
	Word *uint32
	Mask uint32
	Idle uint32
}

// Pending reports whether a completion is waiting. The caller holds the
// poll lock (the provider moves Word and Idle under it).
func (r *Ready) Pending() bool { return atomic.LoadUint32(r.Word)&r.Mask != r.Idle }

// CQ is a provider's completion queue.
type CQ interface {
	// Udata returns CREATE_CQ's driver data.
	Udata() Udata
	// Start finishes the CQ once CREATE_CQ succeeded with cqe entries.
	Start(cqe uint32) error
	// Poll moves up to len(wc) completions, oldest first, into wc and
	// returns how many. It never blocks. The caller holds the poll lock.
	Poll(wc []WC) int
	// Ready returns the CQ's emptiness test (see [Ready]), valid from
	// Start on. It stays at the same address for the CQ's life; Poll and
	// Resize keep it current, under the poll lock.
	Ready() *Ready
	// Queued returns how many completions are waiting to be polled.
	Queued() int
	// Pending reports whether a completion is waiting to be polled.
	Pending() bool
	// Arm requests an event for the next completion (solicitedOnly: the
	// next solicited or error one) and reports whether the caller must
	// still issue the kernel's REQ_NOTIFY_CQ command for it.
	Arm(solicitedOnly bool) (kernel bool)
	// Event records that a completion event of the CQ was read.
	Event()
	// CanResize reports whether Resize is possible at all (siw has no
	// RESIZE_CQ).
	CanResize() bool
	// Resize replaces the ring by one of at least cqe entries: it calls
	// do, which issues RESIZE_CQ with the driver data it is given, and
	// then switches to the new ring. The caller holds the poll lock.
	Resize(cqe int, do func(Udata) error) error
	// Release unmaps and frees the CQ's memory.
	Release() error
}

// BadCQEs is implemented by a CQ whose ring may hold a CQE it cannot turn
// into a completion: a hardware ring, where a device or kernel fault, or
// a CQE left over from an object long gone, may name no QP of the context
// or carry an opcode the provider does not know. Poll consumes such a CQE,
// returns the completions before it and counts it; BadCQE returns the
// count since the last call and what the last one was, and clears the
// count. The generic Poll asks only when Poll returned fewer completions
// than there was room for, and turns a count into an error.
type BadCQEs interface {
	BadCQE() (n int, last string)
}

// CQCleaner is implemented by a provider CQ whose ring lives in user
// memory and that removes a QP's completions from it when the QP is
// destroyed or moved back to RESET, as rdma-core's providers of that
// shape do (pvrdma_cq_clean, mlx5_cq_clean). A completion left behind
// would come out of a later Poll under a QP that no longer exists, whose
// handle or number the device may by then have given to another QP, or
// under the same QP after RESET, with a work request id from before it.
// Package qp calls Clean with the provider's own QP (as its Context's
// NewQP made it), holding the CQ's poll lock, once for each CQ of the QP,
// after DESTROY_QP and after a MODIFY_QP to RESET succeeded. Providers
// whose kernel owns the CQ ring (rxe, siw) do not implement it.
type CQCleaner interface {
	Clean(qp QP)
}

// QPAttr is what a provider needs to prepare a QP.
type QPAttr struct {
	Type   uint8        // uverbs.IB_UVERBS_QPT_*
	Cap    uverbs.QpCap // the capacities asked for
	SigAll bool         // every send work request is signaled
	SRQ    bool         // receives come from an SRQ: no receive queue
	// SharedRQ is the provider's SRQ the receives come from (as its
	// Context's NewSRQ made it) when SRQ is set, else nil: a hardware CQE
	// of the QP names the SRQ's WQE, which mlx5 finds through the QP.
	SharedRQ SRQ
	// Errors of the send and receive queues' posts.
	SendErrors, RecvErrors *Errors
}

// QP is a provider's queue pair, as created; QPInfo holds its queues.
type QP interface {
	// Udata returns CREATE_QP's driver data.
	Udata() Udata
	// Start finishes the QP once CREATE_QP succeeded with QP number qpn
	// and the capacities the kernel granted.
	Start(qpn uint32, granted uverbs.QpCap) (QPInfo, error)
	// Release unmaps and frees the QP's queues; both are shut.
	Release() error
}

// QPCreateCaps is implemented by a provider QP whose device takes
// CREATE_QP's capacities as the geometry of the queues the provider
// allocated in New (pvrdma: the kernel hands a user QP's capacities to the
// device unchanged). The generic code sends what CreateCaps returns
// instead of the capacities asked for, as rdma-core's providers rewrite
// the caller's ibv_qp_cap before the command. Providers whose kernel sizes
// the queues itself (rxe, siw) do not implement it.
type QPCreateCaps interface {
	CreateCaps() uverbs.QpCap
}

// QPInfo is a started QP's data path and what the generic QP reports.
type QPInfo struct {
	Send SendQueue
	// Recv is nil when the QP has no receive queue (an SRQ, or none
	// asked for).
	Recv RecvQueue
	// Caps are the capacities usable through Send and Recv.
	Caps Caps
	// SendOnlyInRTS: work requests posted after the QP left RTS would
	// never complete (siw flushes its send queue once, on the
	// transition), so posting is refused outside RTS.
	SendOnlyInRTS bool
}

// Caps are a QP's usable capacities.
type Caps struct {
	MaxSendWR     int
	MaxRecvWR     int
	MaxSendSGE    int
	MaxRecvSGE    int
	MaxInlineData int
}

// SendQueue is a QP's send queue. Its methods run under the QP's send
// lock.
type SendQueue interface {
	// Post writes wrs in order, each after check accepted it, and
	// returns how many it posted, whether the kernel's POST_SEND
	// doorbell must follow (rung by the caller after unlocking) and the
	// error of the first work request not posted.
	Post(wrs []SendWR, check Checker) (n int, kick bool, err error)
	// Mark returns a position in the send queue: everything posted so
	// far is before it.
	Mark() uint32
	// Transmitted reports whether the device has sent (or retired)
	// everything posted before mark.
	Transmitted(mark uint32) bool
	// Reset forgets per-queue sequence state after the QP went back to
	// RESET.
	Reset()
}

// Checker is the generic validation of a send work request, which
// SendQueue.Post applies to each before anything of its own. Post gets a
// nil Checker when the caller validated every work request of the list
// already (every QP type but UD, whose address handles come from the
// Checker): then it checks nothing generic.
type Checker interface {
	// CheckSend returns the address handle of wr, the i-th of the list
	// (nil unless the QP is UD), or the error to return for it.
	CheckSend(i int, wr *SendWR) (AH, error)
}

// RecvQueue is a receive queue of a QP or an SRQ.
type RecvQueue interface {
	// Post writes wrs in order and returns the error of the first one
	// not posted. It takes the queue's lock.
	Post(wrs []RecvWR) error
	// Posted returns how many posted receives the device has not
	// consumed yet (0 once shut).
	Posted() int
	// Shut refuses every later Post (with the Errors' closed error) and
	// waits for a Post in progress.
	Shut()
}

// SRQAttr is what a provider needs to prepare an SRQ.
type SRQAttr struct {
	MaxWR, MaxSGE uint32
	Errors        *Errors
}

// SRQ is a provider's shared receive queue, as created.
type SRQ interface {
	// Udata returns CREATE_SRQ's driver data.
	Udata() Udata
	// Start finishes the SRQ once CREATE_SRQ succeeded with the given
	// maximum SGE count and SRQ number (0 if the kernel did not report
	// one).
	Start(maxSGE, num uint32) (SRQInfo, error)
	// CanResize reports whether Modify can resize.
	CanResize() bool
	// Modify calls do, which issues MODIFY_SRQ with the driver data it
	// is given. With resize, posts are held off from before do until the
	// provider switched to the kernel's new queue.
	Modify(resize bool, do func(Udata) error) error
	// Release unmaps and frees the SRQ's queue; it is shut.
	Release() error
}

// SRQCreateSize is QPCreateCaps for an SRQ: CREATE_SRQ carries the
// max_wr and max_sge it returns instead of the ones asked for.
type SRQCreateSize interface {
	CreateSize() (maxWR, maxSGE uint32)
}

// SRQInfo is a started SRQ's data path.
type SRQInfo struct {
	Recv RecvQueue
	Num  uint32 // the SRQ number
}

// AH is a provider's part of an address handle: what a UD send work
// request needs of it.
type AH interface {
	// Udata returns CREATE_AH's driver data.
	Udata() Udata
}

// KernelAHs is a Context whose address handles are kernel objects, made
// by CREATE_AH (rxe: the kernel's AH number goes into each UD work
// request; siw: the kernel refuses the command, and says so). A Context
// is a KernelAHs or a [UserAHs], or both when it is a [UserAHsOnIB]: then
// its address handles on InfiniBand ports are built in user space and
// those on other ports are kernel objects (mlx5 on RoCE). verbs refuses
// address handles (unix.EOPNOTSUPP) on a Context that is neither.
type KernelAHs interface {
	// NewAH prepares an address handle for attr, the attributes
	// CREATE_AH sends. An error (attributes the provider refuses, as its
	// rdma-core counterpart refuses them before the command) fails the
	// creation; no command is issued.
	NewAH(attr *uverbs.AhAttr) (AH, error)
}

// AHStarter is implemented by a kernel-made AH that reads CREATE_AH's
// response: verbs calls Start once the command succeeded (its UHW_OUT is
// filled) and before the AH is used; an error destroys the AH again (mlx5
// on RoCE copies the destination MAC the kernel resolved into its address
// vector here). AHs that need nothing of the response (rxe reads its AH
// number at each post, siw has none) do not implement it.
type AHStarter interface {
	Start() error
}

// UserAHsOnIB is a UserAHs whose address handles also serve InfiniBand
// ports, where an address vector names the destination by LID (mlx5: on
// InfiniBand libmlx5 builds the AV in user space and asks the kernel
// nothing). For a port OnIB reports as InfiniBand (from what the context
// learned at Start, as libmlx5 caches it), verbs calls NewUserAH with a
// zero MAC at once: no query, nothing to resolve.
type UserAHsOnIB interface {
	UserAHs
	// OnIB reports whether port's link layer is InfiniBand.
	OnIB(port uint8) bool
}

// UserAHs is a Context whose address handles live in user space, as
// rdma-core's provider for the device builds them: its kernel driver
// creates none for user space (CREATE_AH is EOPNOTSUPP), and each UD work
// request carries the whole address vector, destination MAC included.
// verbs resolves the MAC (package neigh) and issues no command; the AH
// is not a kernel object.
type UserAHs interface {
	// NewUserAH builds the address handle for attr in the PD whose
	// ALLOC_PD driver data (as AllocPD gave it, the kernel's answer in
	// it) is pd, for frames to the Ethernet address dmac.
	NewUserAH(pd Udata, attr *uverbs.AhAttr, dmac [6]byte) (AH, error)
}
