package rdmaconn

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"syscall"
	"time"

	"github.com/goverbs/goverbs/cm"
	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/verbs"
)

// OpError is the *net.OpError of a connection's call op on network,
// naming the connection's addresses where it has them (a nil laddr or
// raddr is left out, not put in as a typed nil).
func OpError[A any, P interface {
	*A
	net.Addr
}](op, network string, laddr, raddr P, err error) error {
	var src, dst net.Addr
	if laddr != nil {
		src = laddr
	}
	if raddr != nil {
		dst = raddr
	}
	return &net.OpError{Op: op, Net: network, Source: src, Addr: dst, Err: err}
}

// SetDeadline sets c's read and write deadlines, as net.Conn's
// SetDeadline does.
func SetDeadline(c interface {
	SetReadDeadline(time.Time) error
	SetWriteDeadline(time.Time) error
}, t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

// WatchDisconnect reads id's events until ctx ends, and calls
// disconnected for each DISCONNECTED (removal false) and each
// DEVICE_REMOVAL (removal true): the peer closed, its host's CM gave up
// on it, or the device went away.
func WatchDisconnect(ctx context.Context, id *cm.ID, disconnected func(removal bool)) {
	for {
		ev, err := id.Event(ctx)
		if err != nil {
			return
		}
		if ev.Type == cm.EventDisconnected || ev.Type == cm.EventDeviceRemoval {
			disconnected(ev.Type == cm.EventDeviceRemoval)
		}
	}
}

// Repost posts n of a ring of receives again, starting at *next and
// wrapping round, and advances *next past them: receives complete in
// the order they were posted, so the slot of each is posted again only
// once what arrived in it has been read. It allocates nothing.
func Repost(q *qp.QP, ring []verbs.RecvWR, next *int, n int) error {
	for n > 0 {
		k := min(n, len(ring)-*next)
		if err := q.PostRecv(ring[*next : *next+k]); err != nil {
			return err
		}
		*next = (*next + k) % len(ring)
		n -= k
	}
	return nil
}

// Addrs returns the source and destination addresses of id, or zero ones
// if the kernel does not say.
func Addrs(id *cm.ID) (src, dst netip.AddrPort) {
	if info, err := id.Query(); err == nil {
		return info.Src, info.Dst
	}
	return netip.AddrPort{}, netip.AddrPort{}
}

// StatusErrno is the errno a socket would report for a work request
// that completed with st: ECONNRESET when the peer's side refused the
// request, ETIMEDOUT when it stopped answering (retries exceeded), EIO
// otherwise.
func StatusErrno(st verbs.WCStatus) error {
	switch st {
	case verbs.WCRemAccessErr, verbs.WCRemOpErr, verbs.WCRemInvReqErr, verbs.WCRemAbortErr:
		return syscall.ECONNRESET
	case verbs.WCRetryExcErr, verbs.WCRNRRetryExcErr, verbs.WCRespTimeoutErr:
		return syscall.ETIMEDOUT
	}
	return syscall.EIO
}

// Free ends the connection's background work (stop, if not nil, cancels
// its context) and destroys its verbs objects, QP first, then its memory
// regions in order, the CQ, the completion channel, the PD, and the CM
// ID and channel. A nil object is skipped, and one already closed
// (verbs.ErrClosed) is no error.
func Free(stop context.CancelFunc, ch *cm.Channel, id *cm.ID, pd *verbs.PD, cch *verbs.CompChannel, q *cq.CQ, qpair *qp.QP, mrs ...*mr.MR) error {
	if stop != nil {
		stop()
	}
	var errs []error
	closeIt := func(x io.Closer) {
		if err := x.Close(); err != nil && !errors.Is(err, verbs.ErrClosed) {
			errs = append(errs, err)
		}
	}
	if qpair != nil {
		closeIt(qpair)
	}
	for _, m := range mrs {
		if m != nil {
			closeIt(m)
		}
	}
	if q != nil {
		closeIt(q)
	}
	if cch != nil {
		closeIt(cch)
	}
	if pd != nil {
		closeIt(pd)
	}
	if id != nil {
		closeIt(id)
	}
	if ch != nil {
		closeIt(ch)
	}
	return errors.Join(errs...)
}
