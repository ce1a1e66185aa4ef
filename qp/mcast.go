package qp

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/kobj"
	"github.com/goverbs/goverbs/uverbs"
	"github.com/goverbs/goverbs/verbs"
)

// mcastGroup is a multicast group a QP is attached to.
type mcastGroup struct {
	gid  verbs.GID
	mlid uint16
}

// IsMulticastGID reports whether gid names a multicast group: an IPv6
// multicast address (ff00::/8, InfiniBand's and RoCEv1's group GIDs) or an
// IPv4-mapped IPv4 multicast address (::ffff:224.0.0.0/100, RoCEv2's), as
// the kernel's rdma_is_multicast_addr decides.
func IsMulticastGID(gid verbs.GID) bool {
	if gid[0] == 0xff {
		return true
	}
	for _, b := range gid[:10] {
		if b != 0 {
			return false
		}
	}
	return gid[10] == 0xff && gid[11] == 0xff && gid[12]&0xf0 == 0xe0
}

// AttachMcast attaches the QP to the multicast group gid, whose LID is
// mlid (0 on RoCE, where groups are addressed by GID alone), so that it
// receives the datagrams sent to the group (ibv_attach_mcast). Only UD
// QPs join groups: other types, and a gid that is not a multicast GID
// (IsMulticastGID), are refused with unix.EINVAL before they reach the
// kernel; a device that reports no multicast groups (iWARP) with
// verbs.ErrNotCapable. Attaching to a group the QP is attached to already
// does nothing. Close detaches the QP from its groups first (the kernel
// refuses to destroy an attached QP). rdma_cm's ID.JoinMulticast attaches
// the ID's QP itself.
func (q *QP) AttachMcast(gid verbs.GID, mlid uint16) error {
	return q.mcast(true, gid, mlid)
}

// DetachMcast detaches the QP from the multicast group gid with LID mlid
// (ibv_detach_mcast), as attached by AttachMcast. Detaching from a group
// the QP is not attached to fails with unix.EINVAL.
func (q *QP) DetachMcast(gid verbs.GID, mlid uint16) error {
	return q.mcast(false, gid, mlid)
}

func (q *QP) mcast(attach bool, gid verbs.GID, mlid uint16) error {
	op := "DETACH_MCAST"
	if attach {
		op = "ATTACH_MCAST"
	}
	q.mu.Lock()
	closed := q.closed
	q.mu.Unlock()
	if closed {
		return fmt.Errorf("qp: %s: %w", op, verbs.ErrClosed)
	}
	if q.typ != UD {
		return fmt.Errorf("qp: %s: a %s QP: only UD QPs join multicast groups: %w", op, q.typ, unix.EINVAL)
	}
	if !IsMulticastGID(gid) {
		return fmt.Errorf("qp: %s: %v is not a multicast GID: %w", op, gid, unix.EINVAL)
	}
	ctx := q.pd.Context()
	if attach {
		a, err := ctx.QueryDevice()
		if err != nil {
			return fmt.Errorf("qp: %s: %w", op, err)
		}
		if a.MaxMcastGrp == 0 || a.MaxMcastQPAttach == 0 {
			return fmt.Errorf("qp: %s: %s reports no multicast groups (max_mcast_grp %d, max_mcast_qp_attach %d): %w",
				op, ctx.Device().Name, a.MaxMcastGrp, a.MaxMcastQPAttach, verbs.ErrNotCapable)
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return verbs.ErrClosed
	}
	g := mcastGroup{gid, mlid}
	i := 0
	for i < len(q.mcasts) && q.mcasts[i] != g {
		i++
	}
	switch {
	case attach && i < len(q.mcasts):
		return nil // the kernel does the same (ib_uverbs_attach_mcast)
	case !attach && i == len(q.mcasts):
		return fmt.Errorf("qp: %s: the QP is not attached to %v (mlid %#x): %w", op, gid, mlid, unix.EINVAL)
	}
	if err := q.mcastCmd(attach, g); err != nil {
		return err
	}
	if attach {
		q.mcasts = append(q.mcasts, g)
	} else {
		q.mcasts = append(q.mcasts[:i], q.mcasts[i+1:]...)
	}
	return nil
}

// mcastCmd issues ATTACH_MCAST or DETACH_MCAST; the caller holds q.mu.
func (q *QP) mcastCmd(attach bool, g mcastGroup) error {
	op, cmd := "DETACH_MCAST", uint32(uverbs.IB_USER_VERBS_CMD_DETACH_MCAST)
	if attach {
		op, cmd = "ATTACH_MCAST", uverbs.IB_USER_VERBS_CMD_ATTACH_MCAST
	}
	// One layout for both (ib_uverbs_attach_mcast, ib_uverbs_detach_mcast).
	req := uverbs.AttachMcast{Gid: g.gid, Handle: q.handle, Mlid: g.mlid}
	if err := uverbs.Write(kobj.ContextOf(q.pd.Context()).FD, op, cmd, &req, nil, 0); err != nil {
		return fmt.Errorf("qp: %w", err)
	}
	return nil
}

// detachAllLocked detaches the QP from every group it is attached to; the
// caller holds q.mu.
func (q *QP) detachAllLocked() error {
	for len(q.mcasts) > 0 {
		if err := q.mcastCmd(false, q.mcasts[len(q.mcasts)-1]); err != nil {
			return err
		}
		q.mcasts = q.mcasts[:len(q.mcasts)-1]
	}
	return nil
}
