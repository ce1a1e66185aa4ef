package qp

import (
	"errors"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/kobj"
	"github.com/goverbs/goverbs/internal/provider/rxe"
	"github.com/goverbs/goverbs/internal/provider/siw"
	"github.com/goverbs/goverbs/verbs"
)

// Work request types, for callers who only import qp.
type (
	SendWR = verbs.SendWR
	RecvWR = verbs.RecvWR
	SGE    = verbs.SGE
)

// PostSend posts send work requests in order and rings the doorbell once
// for the list. It allocates nothing. On failure the returned
// *verbs.PostError names the first work request not posted; those before
// it were posted (and the doorbell rung for them). A full send queue is
// verbs.ErrQueueFull, never an overwrite; that error, and those of a
// closed QP or a QP in the wrong state, are shared values that cost no
// allocation (do not modify them). (The one exception to "nothing": the
// first BIND_MW of a window through this QP records the window.)
//
// If only ringing the doorbell fails (Index 0 with the system call's
// error, e.g. uverbs.ErrForeignCredentials), the work requests are queued
// and go out with the next doorbell.
//
// The QP must be in RTS (or ERR, where work requests complete flushed; on
// siw, which never flushes a work request posted after the QP left RTS,
// only RTS).
// Data in InlineData is copied into the queue; SGList memory must stay
// registered and untouched until the completion.
func (q *QP) PostSend(wrs []verbs.SendWR) error {
	// The one lock of the post: it also refuses posts once Close began.
	if !q.sqLock.Lock() {
		return sendErrors.Closed()
	}
	switch State(q.postState.Load()) {
	case RTS:
	case postClosed:
		// Close stores postClosed before it takes sqLock: a post that
		// got the lock first reports the close, not a QP state.
		q.sqLock.Unlock()
		return sendErrors.Closed()
	case Error, SQD, SQE:
		if q.ssq != nil {
			// siw flushes its send queue once, when the QP leaves
			// RTS; an SQE posted after that would never complete.
			q.sqLock.Unlock()
			return sendErrors.State()
		}
	default:
		q.sqLock.Unlock()
		return sendErrors.State()
	}
	if q.ssq != nil {
		return q.postSendSIW(wrs)
	}
	sq := q.sq
	free := sq.Free()
	p := sq.ProducerIndex()
	var err error
	n := 0
	for i := range wrs {
		wr := &wrs[i]
		ahNum, verr := q.validateSend(wr)
		if verr != nil {
			err = sendErrors.At(i, verr)
			break
		}
		if uint32(i) >= free {
			err = sendErrors.Full(i)
			break
		}
		if wr.Opcode == verbs.WRBindMW || wr.Opcode == verbs.WRLocalInv {
			q.noteWindow(wr)
		}
		rxe.WriteSend(sq.Elem(p), wr, q.typ == UD, ahNum, q.ssn)
		q.ssn++
		p = sq.Next(p)
		n++
	}
	if n == 0 {
		q.sqLock.Unlock()
		return err
	}
	sq.Publish(p)
	// Count the doorbell before unlocking, so a Close that takes the lock
	// after us waits for it; ring it outside the lock, as rdma-core does.
	q.doorbells.Add(1)
	q.sqLock.Unlock()
	derr := q.doorbell.Ring(q.rawFD)
	q.doorbells.Add(-1)
	if derr != nil && err == nil {
		err = sendErrors.At(0, derr)
	}
	return err
}

// postSendSIW is PostSend on siw's send queue; the caller holds sqLock
// and checked the QP state. siw takes an SQE when its VALID flag is set;
// the doorbell (POST_SEND with no work requests, as rdma-core's siw_db)
// makes the kernel process the queue in the system call. rdma-core skips
// it when the SQE before the list is still VALID (the kernel is busy and
// will reach the new ones); goverbs rings it for every list, which also
// restarts a queue whose earlier doorbell failed.
func (q *QP) postSendSIW(wrs []verbs.SendWR) error {
	sq := q.ssq
	var err error
	n := 0
	for i := range wrs {
		wr := &wrs[i]
		_, verr := q.validateSend(wr)
		if verr == nil {
			verr = siw.CheckSend(wr)
		}
		if verr != nil {
			err = sendErrors.At(i, verr)
			break
		}
		if !sq.CanPost(sq.Put()) {
			err = sendErrors.Full(i)
			break
		}
		sq.Post(wr)
		n++
	}
	if n == 0 {
		q.sqLock.Unlock()
		return err
	}
	q.doorbells.Add(1)
	q.sqLock.Unlock()
	derr := q.doorbell.Ring(q.rawFD)
	// siw's POST_SEND only try-locks the QP's state: a MODIFY_QP in
	// progress (ours from another goroutine, or the connection
	// manager's) makes it fail with ENOTCONN although the QP is in RTS.
	// rdma-core avoids that by holding its send lock across both; here
	// the doorbell is retried while the QP is still in RTS for us.
	for i := 0; derr != nil && i < 1000 && errors.Is(derr, unix.ENOTCONN) && State(q.postState.Load()) == RTS; i++ {
		runtime.Gosched()
		derr = q.doorbell.Ring(q.rawFD)
	}
	q.doorbells.Add(-1)
	if derr != nil && err == nil {
		err = sendErrors.At(0, derr)
	}
	return err
}

// noteWindow tells the memory window whose rkey a bind or invalidation
// names (mr.MW registers its windows with the Context) that it was posted
// here, and remembers the window if it now holds the QP; the caller holds
// sqLock.
func (q *QP) noteWindow(wr *verbs.SendWR) {
	bind := wr.Opcode == verbs.WRBindMW
	rkey := wr.InvalidateRKey
	if bind {
		rkey = wr.Bind.MWRKey
	}
	w := kobj.ContextOf(q.pd.Context()).Window(rkey)
	if w == nil || !w.Posted(bind, q.qpn) {
		return
	}
	if q.windows == nil {
		q.windows = make(map[kobj.Window]struct{})
	}
	q.windows[w] = struct{}{}
}

// validateSend checks wr against the QP and returns the provider number of
// its address handle (UD).
func (q *QP) validateSend(wr *verbs.SendWR) (uint32, error) {
	switch wr.Opcode {
	case verbs.WRSend, verbs.WRSendWithImm:
	case verbs.WRRDMAWrite, verbs.WRRDMAWriteWithImm:
		if q.typ == UD {
			return 0, verbs.ErrBadOpcode
		}
	case verbs.WRRDMARead, verbs.WRSendWithInv:
		if q.typ != RC {
			return 0, verbs.ErrBadOpcode
		}
	case verbs.WRAtomicCmpAndSwp, verbs.WRAtomicFetchAndAdd:
		if q.typ != RC {
			return 0, verbs.ErrBadOpcode
		}
		if wr.RemoteAddr%8 != 0 || wr.InlineData != nil || len(wr.SGList) != 1 || wr.SGList[0].Length != 8 {
			return 0, verbs.ErrBadAtomic
		}
	case verbs.WRFlush, verbs.WRAtomicWrite:
		// RC only, no local memory, and only on a device that reports
		// the capability: 6.1's rxe has no such opcodes and indexes its
		// table unchecked.
		if q.typ != RC {
			return 0, verbs.ErrBadOpcode
		}
		if wr.InlineData != nil || len(wr.SGList) != 0 {
			return 0, verbs.ErrBadOpcode
		}
		if wr.Opcode == verbs.WRAtomicWrite && wr.RemoteAddr%8 != 0 {
			return 0, verbs.ErrBadAtomic
		}
		if wr.Opcode == verbs.WRFlush && wr.FlushLevel != verbs.FlushRange && wr.FlushLevel != verbs.FlushMR {
			return 0, verbs.ErrBadOpcode
		}
		if err := q.pd.Context().CheckWR(wr.Opcode, wr.FlushPlacement); err != nil {
			return 0, err
		}
		return 0, nil
	case verbs.WRLocalInv, verbs.WRBindMW:
		// Local operations: rxe allows LOCAL_INV on RC and BIND_MW on
		// RC and UC QPs; they carry no data.
		if q.typ == UD || (q.typ == UC && wr.Opcode == verbs.WRLocalInv) {
			return 0, verbs.ErrBadOpcode
		}
		if wr.InlineData != nil || len(wr.SGList) != 0 {
			return 0, verbs.ErrBadOpcode
		}
		return 0, nil
	default:
		// Values past the provider's table must never reach the kernel,
		// which indexes it unchecked.
		return 0, verbs.ErrBadOpcode
	}
	if wr.InlineData != nil {
		if len(wr.InlineData) > q.caps.MaxInlineData {
			return 0, verbs.ErrInlineTooLarge
		}
		if wr.Opcode == verbs.WRRDMARead {
			return 0, verbs.ErrBadOpcode // reads land in local memory
		}
	} else if len(wr.SGList) > q.sqSGE {
		return 0, verbs.ErrTooManySGE
	}
	if q.typ == UD {
		if wr.AH == nil || wr.AH.PD() != q.pd {
			return 0, verbs.ErrBadAH
		}
		num, err := kobj.AHNum(wr.AH)
		if err != nil {
			return 0, verbs.ErrBadAH
		}
		return num, nil
	}
	return 0, nil
}

// PostRecv posts receive work requests without a system call. It
// allocates nothing, not even for the error of a full queue
// (verbs.ErrQueueFull), a closed QP or a QP in RESET (shared values: do
// not modify them). On failure the returned *verbs.PostError names the
// first work request not posted. A QP attached to an SRQ has no receive
// queue: post to the SRQ.
func (q *QP) PostRecv(wrs []verbs.RecvWR) error {
	if q.rq == nil && q.srq0 == nil {
		return errRecvOnSRQ
	}
	switch q.postState.Load() {
	case uint32(Reset):
		return recvErrors.State()
	case postClosed:
		return recvErrors.Closed()
	}
	if q.srq0 != nil {
		return q.srq0.Post(wrs)
	}
	return q.rq.Post(wrs)
}

var errRecvOnSRQ = &verbs.PostError{Op: "qp: post recv", Err: verbs.ErrBadOpcode}
