// Package qp implements queue pairs: reliable connected (RC), unreliable
// connected (UC) and unreliable datagram (UD).
//
// A QP is created in RESET. Connect takes an RC or UC QP to RTS in one
// call: given the peer's PeerInfo (its QP number, PSN, LID, GID and MTU,
// exchanged out of band), it moves the QP through INIT, RTR (ready to
// receive) and RTS (ready to send) with the defaults of ConnectOptions, a
// finite ACK timeout and retry count among them. The typed transitions
// ToInit, ToRTR and ToRTS take the same steps one at a time with every
// attribute in the caller's hands (UD QPs take these); ToError flushes
// the QP. Posting writes work queue elements straight into the queues the
// kernel shares with the process: PostRecv makes no system call at all,
// PostSend one (the provider's doorbell) per call, for the whole list.
// Neither allocates.
//
//	q, err := qp.New(pd, qp.Options{Type: qp.RC, SendCQ: c, RecvCQ: c,
//		Caps: qp.Caps{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1}})
//	me, err := q.PeerInfo(1) // send me to the peer, receive its own as peer
//	err = q.Connect(peer, qp.ConnectOptions{})
//	err = q.PostSend([]verbs.SendWR{{Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
//		SGList: []verbs.SGE{m.SGE(0, n)}}})
//	wc, err := c.Next(ctx)
//
// The memory a work request names must be registered (package mr) with
// the access its use needs, and no more: none for what the device only
// reads (the source of a SEND or a WRITE), mr.LocalWrite for what it
// writes (receive buffers, a READ's destination, an atomic's result), and
// the Remote* flags on the peer's side for what the peer reaches by key.
//
// # What a completion promises
//
// A send-side completion that succeeded says that the work request is
// done with its local memory: the source of a SEND or WRITE may be reused,
// the destination of a READ or an atomic holds the result. What it says of
// the peer depends on the transport:
//
//   - RC on InfiniBand and RoCE: the responder acknowledged the request.
//     Its adapter received the data and accepted it (the key, the bounds
//     and the access rights held). That is not a promise that the peer's
//     CPU can see the bytes of a WRITE yet: they may still be on their
//     way from the adapter to memory.
//   - RC on iWARP (siw): a WRITE completes once it was handed to TCP;
//     the peer may not have received it yet.
//   - UC and UD: the request was sent; nothing came back.
//
// To know that WRITEs reached the peer's memory, and are visible there,
// post a READ after them on the same QP (a few bytes of the same region;
// the peer's region needs RemoteRead) and wait for the READ's completion:
// the responder returns a READ's data only after the writes before it on
// the QP are placed. This is librpma's flush to visibility. A peer learns
// it from a message: when a SEND (or a WRITE with immediate) that was
// posted after the WRITEs completes at the receiver, the receiver can
// read what they wrote, since the responder executes an RC QP's requests
// in order. Neither makes the data persistent on a peer with persistent
// memory: that needs the peer's platform to drain what its adapter
// placed (or the peer's CPU to flush it, librpma's GPSPM), which package
// rpma handles.
package qp

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/kobj"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/srq"
	"github.com/goverbs/goverbs/uverbs"
	"github.com/goverbs/goverbs/verbs"
)

// Type is a QP transport type.
type Type uint8

// QP types.
const (
	RC Type = uverbs.IB_UVERBS_QPT_RC
	UC Type = uverbs.IB_UVERBS_QPT_UC
	UD Type = uverbs.IB_UVERBS_QPT_UD
)

func (t Type) String() string {
	switch t {
	case RC:
		return "RC"
	case UC:
		return "UC"
	case UD:
		return "UD"
	}
	return "Type(" + strconv.Itoa(int(t)) + ")"
}

// State is a QP state.
type State uint8

// QP states.
const (
	Reset State = 0
	Init  State = 1
	RTR   State = 2
	RTS   State = 3
	SQD   State = 4
	SQE   State = 5
	Error State = 6
)

func (s State) String() string {
	names := [...]string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"}
	if int(s) < len(names) {
		return names[s]
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// Caps are a QP's queue capacities. At creation they are minimums; the QP
// reports what it got.
type Caps struct {
	MaxSendWR     int
	MaxRecvWR     int
	MaxSendSGE    int
	MaxRecvSGE    int
	MaxInlineData int
}

// Options configure a new QP.
type Options struct {
	Type   Type
	SendCQ *cq.CQ
	RecvCQ *cq.CQ
	// SRQ, if set, supplies the receive buffers; the QP then has no
	// receive queue of its own (Caps.MaxRecvWR must be 0).
	SRQ  *srq.SRQ
	Caps Caps
	// SigAll makes every send work request generate a completion, as if
	// each had SendSignaled.
	SigAll bool
}

// QP is a queue pair. PostSend and PostRecv may be called concurrently with
// each other, with polling and with Modify and Close. Posts to one QP's
// send queue take turns, as do posts to its receive queue; posts to
// different QPs never wait for each other.
type QP struct {
	// Locking: each queue has one lock (a provider.Lock, a spin lock that
	// is also the queue's close guard), and a post takes only that one:
	// the QP state is an atomic word, and nothing on the data path touches
	// a lock shared with other QPs of the Context. The send queue's lock
	// is sqLock, a receive queue's is inside the provider's ring. PostSend
	// rings a kernel doorbell after releasing the send queue's lock, so
	// other posters on the QP do not wait for the kernel's inline
	// processing; a per-QP count of doorbells in flight lets Close wait
	// for them before the Context's descriptor (which the doorbell writes
	// to) can be closed and reused.

	pd     *verbs.PD
	typ    Type
	sendCQ *cq.CQ
	recvCQ *cq.CQ
	srq    *srq.SRQ
	handle uint32
	qpn    uint32
	track  uint64
	caps   Caps

	sqLock provider.Lock // the send queue's lock and close guard
	// prov is the provider's QP (package internal/provider), made by the
	// context's provider at creation; sq and rq are its queues.
	prov          provider.QP
	sq            provider.SendQueue // under sqLock
	sendOnlyInRTS bool               // the provider never completes sends posted outside RTS
	sqSGE         int
	windowOps     bool                     // the post under way has a BIND_MW or LOCAL_INV; under sqLock
	windows       map[kobj.Window]struct{} // type 2 windows bound through this QP; under sqLock
	doorbell      *uverbs.Doorbell
	rawFD         int          // the Context's uverbs descriptor, for the doorbell
	doorbells     atomic.Int32 // doorbells rung and not yet returned

	rq provider.RecvQueue // nil with an SRQ, or without a receive queue

	// postState mirrors state for the posting paths: an atomic load (a
	// plain MOV on amd64) instead of a lock. After Close it is
	// postClosed.
	postState atomic.Uint32

	mu     sync.Mutex // guards state, closed and mcasts
	state  State
	closed bool
	mcasts []mcastGroup // multicast groups attached (AttachMcast); detached by Close
}

// postClosed is postState once Close began: no QP state, so every posting
// path refuses, and PostRecv can tell a closed QP from one in RESET.
const postClosed = 0xff

// Post errors, shared by every QP (see provider.Errors).
var (
	sendErrors = kobj.PostErrors("qp: post send")
	recvErrors = kobj.PostErrors("qp: post recv")
)

// setState records the state Modify moved the QP to; the caller holds
// q.mu. Back in RESET the kernel emptied the send queue, and the
// provider's per-queue sequence state (rxe's send sequence numbers)
// starts over.
func (q *QP) setState(s State) {
	q.state = s
	q.postState.Store(uint32(s))
	if s == Reset {
		if q.sqLock.Lock() {
			q.sq.Reset()
			q.sqLock.Unlock()
		}
		q.cleanCQs()
	}
}

// cleanCQs removes the QP's completions from its CQs where the provider
// keeps them in user memory (provider.CQCleaner): after DESTROY_QP, and
// after a MODIFY_QP to RESET, the device writes none of them again, and
// rdma-core's providers of that shape drop those still queued.
func (q *QP) cleanCQs() {
	kobj.CleanCQ(q.sendCQ, q.prov)
	if q.recvCQ != q.sendCQ {
		kobj.CleanCQ(q.recvCQ, q.prov)
	}
}

// New creates a QP in RESET. A QP type the kernel driver does not create
// (CREATE_QP answers EOPNOTSUPP: vmw_pvrdma has no UC) fails with an error
// matching both verbs.ErrNotCapable and unix.EOPNOTSUPP.
func New(pd *verbs.PD, opts Options) (*QP, error) {
	if err := validateOptions(pd, &opts); err != nil {
		return nil, err
	}
	ctx := pd.Context()
	q := &QP{pd: pd, typ: opts.Type, sendCQ: opts.SendCQ, recvCQ: opts.RecvCQ, srq: opts.SRQ}
	track, err := kobj.ContextOf(ctx).Track(kobj.KindQP, q)
	if err != nil {
		return nil, fmt.Errorf("qp: create: %w", err)
	}
	q.track = track
	if err := q.create(opts); err != nil {
		kobj.ContextOf(ctx).Untrack(track)
		return nil, err
	}
	kobj.ContextOf(ctx).SetShut(track, q.shutPosting)
	return q, nil
}

func validateOptions(pd *verbs.PD, o *Options) error {
	if o.Type != RC && o.Type != UC && o.Type != UD {
		return fmt.Errorf("qp: create: unsupported QP type %s", o.Type)
	}
	if o.SendCQ == nil || o.RecvCQ == nil {
		return errors.New("qp: create: a send CQ and a receive CQ are required (they may be the same)")
	}
	c := o.Caps
	if c.MaxSendWR < 0 || c.MaxRecvWR < 0 || c.MaxSendSGE < 0 || c.MaxRecvSGE < 0 || c.MaxInlineData < 0 {
		return fmt.Errorf("qp: create: negative capability in %+v", c)
	}
	if o.SRQ != nil && (c.MaxRecvWR != 0 || c.MaxRecvSGE != 0) {
		return errors.New("qp: create: a QP on an SRQ has no receive queue: leave MaxRecvWR and MaxRecvSGE 0")
	}
	if err := kobj.CheckPD(pd); err != nil {
		return fmt.Errorf("qp: create: PD: %w", err)
	}
	ctx := pd.Context()
	if o.SendCQ.Context() != ctx || o.RecvCQ.Context() != ctx {
		return errors.New("qp: create: CQs belong to another context")
	}
	if o.SRQ != nil && o.SRQ.PD() != pd {
		return errors.New("qp: create: the SRQ belongs to another PD")
	}
	return nil
}

func (q *QP) create(opts Options) error {
	ctx := q.pd.Context()
	c := opts.Caps
	capIn := uverbs.QpCap{
		Send_wr: uint32(min(c.MaxSendWR, 1<<31-1)), Recv_wr: uint32(min(c.MaxRecvWR, 1<<31-1)),
		Send_sge: uint32(min(c.MaxSendSGE, 1<<31-1)), Recv_sge: uint32(min(c.MaxRecvSGE, 1<<31-1)),
		Inline_data: uint32(min(c.MaxInlineData, 1<<31-1)),
	}
	attr := provider.QPAttr{
		Type: uint8(opts.Type), Cap: capIn, SigAll: opts.SigAll, SRQ: opts.SRQ != nil,
		SendErrors: sendErrors, RecvErrors: recvErrors,
	}
	if opts.SRQ != nil {
		attr.SharedRQ = kobj.SRQOf(opts.SRQ)
	}
	prov, err := kobj.ContextOf(ctx).Provider.NewQP(attr)
	if err != nil {
		return fmt.Errorf("qp: create %s QP with %+v: %w", opts.Type, c, err)
	}
	if cc, ok := prov.(provider.QPCreateCaps); ok {
		capIn = cc.CreateCaps() // the queues the provider allocated (pvrdma)
	}
	var capOut uverbs.QpCap
	var qpn uint32
	var r uverbs.Ioctl
	r.Init("QP.CREATE", uverbs.UVERBS_OBJECT_QP, uverbs.UVERBS_METHOD_QP_CREATE, kobj.ContextOf(ctx).Driver)
	h := r.NewHandle(uverbs.UVERBS_ATTR_CREATE_QP_HANDLE)
	r.Handle(uverbs.UVERBS_ATTR_CREATE_QP_PD_HANDLE, q.pd.Handle())
	r.Handle(uverbs.UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE, opts.SendCQ.Handle())
	r.Handle(uverbs.UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE, opts.RecvCQ.Handle())
	if opts.SRQ != nil {
		r.Handle(uverbs.UVERBS_ATTR_CREATE_QP_SRQ_HANDLE, opts.SRQ.Handle())
	}
	r.U64(uverbs.UVERBS_ATTR_CREATE_QP_USER_HANDLE, q.track)
	r.In(uverbs.UVERBS_ATTR_CREATE_QP_CAP, unsafe.Pointer(&capIn), unsafe.Sizeof(capIn))
	r.Const(uverbs.UVERBS_ATTR_CREATE_QP_TYPE, uint64(opts.Type))
	if opts.SigAll {
		r.U32(uverbs.UVERBS_ATTR_CREATE_QP_FLAGS, uverbs.IB_UVERBS_QP_CREATE_SQ_SIG_ALL)
	}
	r.Optional(r.FD(uverbs.UVERBS_ATTR_CREATE_QP_EVENT_FD, ctx.AsyncFD()))
	r.Out(uverbs.UVERBS_ATTR_CREATE_QP_RESP_CAP, unsafe.Pointer(&capOut), unsafe.Sizeof(capOut))
	r.Out(uverbs.UVERBS_ATTR_CREATE_QP_RESP_QP_NUM, unsafe.Pointer(&qpn), 4)
	prov.Udata().Add(&r)
	if err := kobj.ContextOf(ctx).Do(&r); err != nil {
		prov.Release()
		if errors.Is(err, uverbs.ErrClosed) {
			return fmt.Errorf("qp: create: %w", verbs.ErrClosed)
		}
		return fmt.Errorf("qp: create %s QP with %+v: %w", opts.Type, c, err)
	}
	q.handle = uint32(r.Data(h))
	q.qpn = qpn
	q.doorbell = uverbs.NewDoorbell(q.handle)
	// The descriptor stays open until Context.Close, which closes this QP
	// (and so waits for its doorbells) before it closes the descriptor.
	q.rawFD = kobj.ContextOf(ctx).FD.Int()
	info, err := prov.Start(qpn, capOut)
	if err != nil {
		q.destroy()
		prov.Release()
		return fmt.Errorf("qp: %w", err)
	}
	q.prov, q.sq, q.rq = prov, info.Send, info.Recv
	q.sendOnlyInRTS = info.SendOnlyInRTS
	q.caps = Caps(info.Caps)
	q.sqSGE = info.Caps.MaxSendSGE
	return nil
}

// QPN is the QP number peers address.
func (q *QP) QPN() uint32 { return q.qpn }

// Handle is the kernel handle of the QP.
func (q *QP) Handle() uint32 { return q.handle }

// UserHandle is the value async events carry for this QP.
func (q *QP) UserHandle() uint64 { return q.track }

// Type is the QP's transport type.
func (q *QP) Type() Type { return q.typ }

// Caps are the QP's actual capacities.
func (q *QP) Caps() Caps { return q.caps }

// PD returns the QP's protection domain.
func (q *QP) PD() *verbs.PD { return q.pd }

// SendCQ and RecvCQ return the QP's completion queues; SRQ its SRQ or nil.
func (q *QP) SendCQ() *cq.CQ { return q.sendCQ }

// RecvCQ returns the CQ receive completions go to.
func (q *QP) RecvCQ() *cq.CQ { return q.recvCQ }

// SRQ returns the QP's shared receive queue, or nil.
func (q *QP) SRQ() *srq.SRQ { return q.srq }

// State returns the state goverbs last moved the QP to. The device may
// have moved it to Error since; Query asks the kernel.
func (q *QP) State() State {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.state
}

// ErrStateNotReported is the error of SyncState when the kernel's QUERY_QP
// answer carries no QP state. It is recognised by an answer no QP goverbs
// drives can be in: RESET for a QP goverbs moved out of RESET (only a
// modify from user space brings a QP back to RESET). siw on Linux 6.1
// leaves the state out of its query (uverbs zeroes the buffer it answers
// from, so the state reads as RESET); siw on 6.12 reports it.
var ErrStateNotReported = errors.New("qp: the device's QUERY_QP does not report the QP state")

// SyncState asks the kernel for the QP's state (QUERY_QP) and adopts it as
// the state posting checks. It is for transports where the kernel moves
// the QP itself: on iWARP the connection manager moves it to RTS when the
// connection is established, with no modify from user space (INIT_QP_ATTR
// for RTS returns an empty mask there). When the device does not report
// the state, SyncState keeps goverbs' state and returns it with
// ErrStateNotReported.
func (q *QP) SyncState() (State, error) {
	a, err := q.Query()
	if err != nil {
		return 0, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return 0, verbs.ErrClosed
	}
	if a.State == Reset && q.state != Reset {
		return q.state, ErrStateNotReported
	}
	q.setState(a.State)
	return a.State, nil
}

// SyncEstablished adopts the state of a QP whose connection the connection
// manager has just established and moved to RTS itself (iWARP). It asks
// the kernel (SyncState), so a QP the kernel has moved on since (the peer
// closed already: SQD or ERR) is seen as such; when the device does not
// report the state (ErrStateNotReported), a QP goverbs left in INIT or RTR
// takes RTS, where the connection manager put it.
func (q *QP) SyncEstablished() (State, error) {
	s, err := q.SyncState()
	if !errors.Is(err, ErrStateNotReported) {
		return s, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return 0, verbs.ErrClosed
	}
	if q.state == Init || q.state == RTR {
		q.setState(RTS)
	}
	return q.state, nil
}

func (q *QP) destroy() error {
	var events uint32
	ctx := q.pd.Context()
	var r uverbs.Ioctl
	r.Init("QP.DESTROY", uverbs.UVERBS_OBJECT_QP, uverbs.UVERBS_METHOD_QP_DESTROY, kobj.ContextOf(ctx).Driver)
	r.Handle(uverbs.UVERBS_ATTR_DESTROY_QP_HANDLE, q.handle)
	r.Out(uverbs.UVERBS_ATTR_DESTROY_QP_RESP, unsafe.Pointer(&events), 4)
	return kobj.ContextOf(ctx).Do(&r)
}

// Close destroys the QP and unmaps its queues. Work requests still queued
// are dropped without completions. Type 2 memory windows bound through the
// QP (with mr.MW.BindWR) and not invalidated through it are deallocated
// first: rxe cannot destroy a QP a bound window holds.
//
// Posting stops for good when Close starts (later posts fail with
// verbs.ErrClosed), even if the kernel then refuses to destroy the QP;
// Close waits for posts and doorbells in progress.
func (q *QP) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil
	}
	q.shutPosting()
	// The kernel refuses to destroy a QP still attached to a multicast
	// group (EBUSY, uverbs_free_qp).
	if err := q.detachAllLocked(); err != nil {
		return fmt.Errorf("qp: destroy: %w", err)
	}
	if err := q.releaseWindows(); err != nil {
		return fmt.Errorf("qp: destroy: %w", err)
	}
	if err := q.destroy(); err != nil {
		return fmt.Errorf("qp: destroy: %w", err)
	}
	q.closed = true
	kobj.ContextOf(q.pd.Context()).Untrack(q.track)
	q.cleanCQs()
	return q.prov.Release()
}

// shutPosting refuses every later post and waits for the posts and
// doorbells in progress. A poster increments doorbells while it holds
// sqLock, so once Close has held sqLock every doorbell it must wait for is
// counted.
func (q *QP) shutPosting() {
	q.postState.Store(postClosed)
	if q.sqLock.Lock() {
		q.sqLock.CloseUnlock()
	}
	if q.rq != nil {
		q.rq.Shut()
	}
	for q.doorbells.Load() != 0 {
		runtime.Gosched()
	}
}

// releaseWindows deallocates the type 2 memory windows still bound
// through the QP (as far as the QP saw: binds and invalidations posted
// with mr.MW's work requests). rxe holds a QP while such a window is
// bound; destroying the QP first stalls the kernel for about a minute and
// ends in a warning. Posting is shut: nothing else touches q.windows.
func (q *QP) releaseWindows() error {
	ws := q.windows
	q.windows = nil
	var errs []error
	for w := range ws {
		if qpn, ok := w.HeldQP(); ok && qpn == q.qpn {
			errs = append(errs, w.Close())
		}
	}
	return errors.Join(errs...)
}
