package qp

import (
	"errors"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/kobj"
	"github.com/goverbs/goverbs/internal/provider"
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
		if q.sendOnlyInRTS {
			// siw flushes its send queue once, when the QP leaves
			// RTS; a WQE posted after that would never complete.
			q.sqLock.Unlock()
			return sendErrors.State()
		}
	default:
		q.sqLock.Unlock()
		return sendErrors.State()
	}
	// One interface call into the provider, which writes the list; View
	// keeps wrs off the heap (see package internal/provider). The generic
	// checks of each work request run here first, and the provider posts
	// the list up to the first work request they refuse, so that its loop
	// makes no call per work request; only a UD QP's provider calls back
	// (sendChecker), for each address handle's provider part.
	var check provider.Checker = (*sendChecker)(q)
	post := provider.View[provider.SendWR](wrs)
	var checkErr error
	if q.typ != UD {
		check = nil
		for i := range post {
			if q.plainSend(&wrs[i]) {
				continue
			}
			if _, err := (*sendChecker)(q).CheckSend(i, &post[i]); err != nil {
				post, checkErr = post[:i], err
				break
			}
		}
	}
	n, kick, err := q.sq.Post(post, check)
	if err == nil {
		err = checkErr
	}
	if q.windowOps {
		q.windowOps = false
		for i := range wrs[:n] {
			if wrs[i].Opcode == verbs.WRBindMW || wrs[i].Opcode == verbs.WRLocalInv {
				q.noteWindow(&wrs[i])
			}
		}
	}
	if !kick {
		// Nothing posted, or the provider rang its own doorbell (a
		// store to a mapped doorbell page) under the lock.
		q.sqLock.Unlock()
		return err
	}
	// Count the doorbell before unlocking, so a Close that takes the lock
	// after us waits for it; ring it outside the lock, as rdma-core does.
	// It is the kernel's POST_SEND with no work requests: rxe sends (6.1)
	// or schedules its sender (6.12) in it, siw processes its send queue
	// in it.
	q.doorbells.Add(1)
	q.sqLock.Unlock()
	derr := q.doorbell.Ring(q.rawFD)
	// siw's POST_SEND only try-locks the QP's state: a MODIFY_QP in
	// progress (ours from another goroutine, or the connection
	// manager's) makes it fail with ENOTCONN although the QP is in RTS.
	// rdma-core avoids that by holding its send lock across both; here
	// the doorbell is retried while the QP is still in RTS for us. (No
	// other driver fails a doorbell with ENOTCONN on a QP in RTS.)
	for i := 0; derr != nil && i < 1000 && errors.Is(derr, unix.ENOTCONN) && State(q.postState.Load()) == RTS; i++ {
		runtime.Gosched()
		derr = q.doorbell.Ring(q.rawFD)
	}
	q.doorbells.Add(-1)
	if derr != nil && err == nil {
		err = &verbs.PostError{Op: "qp: post send", Index: 0, Err: derr}
	}
	return err
}

// sendChecker is the QP as the provider's provider.Checker: the generic
// checks of a send work request, run by SendQueue.Post under sqLock.
type sendChecker QP

// CheckSend validates the i-th work request of a post (validateSend) and
// returns its address handle's provider part (UD).
func (c *sendChecker) CheckSend(i int, pwr *provider.SendWR) (provider.AH, error) {
	q := (*QP)(c)
	wr := (*verbs.SendWR)(unsafe.Pointer(pwr)) // the caller's own work request (provider.View)
	ah, err := q.validateSend(wr)
	if err != nil {
		return nil, &verbs.PostError{Op: "qp: post send", Index: i, Err: err}
	}
	if wr.Opcode == verbs.WRBindMW || wr.Opcode == verbs.WRLocalInv {
		q.windowOps = true
	}
	return ah, nil
}

// noteWindow tells the memory window whose rkey a bind or invalidation
// names (mr.MW registers its windows with the Context) that it was posted
// here, and remembers the window if it now holds the QP; the caller holds
// sqLock and the provider posted wr.
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

// plainSend reports, inlined, whether wr is a SEND or an RDMA WRITE (with
// or without immediate data) that fits the QP, what validateSend accepts
// of those on a QP that is not UD; for any other work request it reports
// false and the caller runs validateSend.
func (q *QP) plainSend(wr *verbs.SendWR) bool {
	if wr.Opcode > verbs.WRSendWithImm {
		return false
	}
	if wr.InlineData != nil {
		return len(wr.InlineData) <= q.caps.MaxInlineData
	}
	return len(wr.SGList) <= q.sqSGE
}

// validateSend checks wr against the QP and returns the provider's part
// of its address handle (UD).
func (q *QP) validateSend(wr *verbs.SendWR) (provider.AH, error) {
	switch wr.Opcode {
	case verbs.WRSend, verbs.WRSendWithImm:
	case verbs.WRRDMAWrite, verbs.WRRDMAWriteWithImm:
		if q.typ == UD {
			return nil, verbs.ErrBadOpcode
		}
	case verbs.WRRDMARead, verbs.WRSendWithInv:
		if q.typ != RC {
			return nil, verbs.ErrBadOpcode
		}
	case verbs.WRAtomicCmpAndSwp, verbs.WRAtomicFetchAndAdd:
		if q.typ != RC {
			return nil, verbs.ErrBadOpcode
		}
		if wr.RemoteAddr%8 != 0 || wr.InlineData != nil || len(wr.SGList) != 1 || wr.SGList[0].Length != 8 {
			return nil, verbs.ErrBadAtomic
		}
	case verbs.WRFlush, verbs.WRAtomicWrite:
		// RC only, no local memory, and only on a device that reports
		// the capability: 6.1's rxe has no such opcodes and indexes its
		// table unchecked.
		if q.typ != RC {
			return nil, verbs.ErrBadOpcode
		}
		if wr.InlineData != nil || len(wr.SGList) != 0 {
			return nil, verbs.ErrBadOpcode
		}
		if wr.Opcode == verbs.WRAtomicWrite && wr.RemoteAddr%8 != 0 {
			return nil, verbs.ErrBadAtomic
		}
		if wr.Opcode == verbs.WRFlush && wr.FlushLevel != verbs.FlushRange && wr.FlushLevel != verbs.FlushMR {
			return nil, verbs.ErrBadOpcode
		}
		if err := q.pd.Context().CheckWR(wr.Opcode, wr.FlushPlacement); err != nil {
			return nil, err
		}
		return nil, nil
	case verbs.WRLocalInv, verbs.WRBindMW:
		// Local operations: rxe allows LOCAL_INV on RC and BIND_MW on
		// RC and UC QPs; they carry no data.
		if q.typ == UD || (q.typ == UC && wr.Opcode == verbs.WRLocalInv) {
			return nil, verbs.ErrBadOpcode
		}
		if wr.InlineData != nil || len(wr.SGList) != 0 {
			return nil, verbs.ErrBadOpcode
		}
		return nil, nil
	default:
		// Values past the provider's table must never reach the kernel,
		// which indexes it unchecked.
		return nil, verbs.ErrBadOpcode
	}
	if wr.InlineData != nil {
		if len(wr.InlineData) > q.caps.MaxInlineData {
			return nil, verbs.ErrInlineTooLarge
		}
		if wr.Opcode == verbs.WRRDMARead {
			return nil, verbs.ErrBadOpcode // reads land in local memory
		}
	} else if len(wr.SGList) > q.sqSGE {
		return nil, verbs.ErrTooManySGE
	}
	if q.typ == UD {
		if wr.AH == nil || wr.AH.PD() != q.pd {
			return nil, verbs.ErrBadAH
		}
		ah, err := kobj.AH(wr.AH)
		if err != nil {
			return nil, verbs.ErrBadAH
		}
		return ah, nil
	}
	return nil, nil
}

// PostRecv posts receive work requests without a system call. It
// allocates nothing, not even for the error of a full queue
// (verbs.ErrQueueFull), a closed QP or a QP in RESET (shared values: do
// not modify them). On failure the returned *verbs.PostError names the
// first work request not posted. A QP attached to an SRQ has no receive
// queue: post to the SRQ.
func (q *QP) PostRecv(wrs []verbs.RecvWR) error {
	if q.rq == nil {
		return errRecvOnSRQ
	}
	switch q.postState.Load() {
	case uint32(Reset):
		return recvErrors.State()
	case postClosed:
		return recvErrors.Closed()
	}
	// One interface call into the provider, whose ring takes its lock;
	// View keeps wrs off the heap (see package internal/provider).
	return q.rq.Post(provider.View[provider.RecvWR](wrs))
}

var errRecvOnSRQ = &verbs.PostError{Op: "qp: post recv", Err: verbs.ErrBadOpcode}
