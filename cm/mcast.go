package cm

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/uverbs"
	"github.com/goverbs/goverbs/verbs"
)

// JoinFlags says how an ID joins a multicast group (enum
// rdma_cm_mc_join_flags).
type JoinFlags uint16

// Join flags.
const (
	// JoinFullMember joins to send to the group and receive from it:
	// the ID's QP is attached to the group when the join completes.
	JoinFullMember JoinFlags = uverbs.RDMA_MC_JOIN_FLAG_FULLMEMBER
	// JoinSendOnlyFullMember joins only to send to the group: the QP
	// is not attached, and on RoCE the kernel sends no IGMP report (so
	// the port does not receive the group's traffic).
	JoinSendOnlyFullMember JoinFlags = uverbs.RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER
)

// String names the flag as librdmacm does.
func (f JoinFlags) String() string {
	switch f {
	case JoinFullMember:
		return "RDMA_MC_JOIN_FLAG_FULLMEMBER"
	case JoinSendOnlyFullMember:
		return "RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER"
	}
	return fmt.Sprintf("JoinFlags(%d)", uint16(f))
}

// UDPQKey is the Q_Key the kernel gives the multicast groups (and UD
// connections) of the UDP port space (RDMA_UDP_QKEY).
const UDPQKey = 0x01234567

// mcGroup is a multicast group an ID joined. Its uid tags its events.
type mcGroup struct {
	id     *ID
	uid    uint64
	handle uint32
	group  netip.Addr
	flags  JoinFlags
	// Set when the join completes (from the event's AH attributes), and
	// whether the ID's QP was attached then; under id.mu.
	mgid     verbs.GID
	mlid     uint16
	attached *qp.QP
}

// JoinMulticast joins the ID to the multicast group at group, as a full
// member (rdma_join_multicast) or as a send-only full member
// (rdma_join_multicast_ex with RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER), and
// waits for the result: the returned event is EventMulticastJoin, its UD
// holding what a sender needs (the group's address handle attributes in
// UD.AH, QP number 0xffffff, the group's Q_Key), and Group the group.
// The ID must be a UDP ID bound to a device (Bind to a device address,
// or ResolveAddr, typically with group as the destination). If the ID
// has a QP (CreateQP) and joins as a full member, the QP is attached to
// the group when the join completes, as librdmacm does; a QP created
// later must be attached with qp.QP.AttachMcast (the event's
// UD.AH.GRH.DGID and UD.AH.DLID).
//
// A device without multicast (iWARP: the device reports no multicast
// groups) is refused with verbs.ErrNotCapable. The kernel (6.1 and 6.12)
// joins IPv4 groups on RoCEv2 and refuses IPv6 groups there
// (ENOTSUPP); it allows send-only joins on RoCE.
//
// Other events that arrive for the ID while JoinMulticast waits stay
// queued for Event, in order.
func (id *ID) JoinMulticast(ctx context.Context, group netip.Addr, flags JoinFlags) (Event, error) {
	m, err := id.startJoin(group, flags)
	if err != nil {
		return Event{}, err
	}
	var other []Event
	defer func() {
		if len(other) > 0 {
			id.mu.Lock()
			id.queue = append(other, id.queue...)
			id.mu.Unlock()
			select {
			case id.notify <- struct{}{}:
			default:
			}
		}
	}()
	for {
		ev, err := id.Event(ctx)
		if err != nil {
			return ev, fmt.Errorf("cm: join multicast %v: %w", group, err)
		}
		if (ev.Type != EventMulticastJoin && ev.Type != EventMulticastError) || ev.mc != m {
			other = append(other, ev)
			continue
		}
		if err := ev.Err(); err != nil {
			return ev, fmt.Errorf("cm: join multicast %v: %w", group, err)
		}
		return ev, nil
	}
}

// startJoin checks the ID and sends JOIN_MCAST.
func (id *ID) startJoin(group netip.Addr, flags JoinFlags) (*mcGroup, error) {
	if err := id.check(); err != nil {
		return nil, err
	}
	if !id.ps.datagram() {
		return nil, fmt.Errorf("cm: join multicast: a %s ID: only UDP IDs join multicast groups: %w", id.ps, unix.EINVAL)
	}
	if flags != JoinFullMember && flags != JoinSendOnlyFullMember {
		return nil, fmt.Errorf("cm: join multicast: join flags %d: %w", uint16(flags), unix.EINVAL)
	}
	if !group.IsMulticast() {
		return nil, fmt.Errorf("cm: join multicast: %v is not a multicast address: %w", group, unix.EINVAL)
	}
	dev := id.Context()
	if dev == nil {
		return nil, fmt.Errorf("cm: join multicast %v: the ID is not bound to a device (Bind or ResolveAddr first): %w", group, unix.EINVAL)
	}
	if err := multicastCapable(dev); err != nil {
		return nil, fmt.Errorf("cm: join multicast %v: %w", group, err)
	}
	id.mu.Lock()
	for _, m := range id.mcs {
		if m.group == group {
			id.mu.Unlock()
			return nil, fmt.Errorf("cm: join multicast %v: already joined: %w", group, unix.EADDRINUSE)
		}
	}
	ch := id.ch
	id.mu.Unlock()
	uid, err := ch.reserveUID()
	if err != nil {
		return nil, err
	}
	ss, size, err := sockaddr(netip.AddrPortFrom(group, 0))
	if err != nil {
		return nil, err
	}
	m := &mcGroup{id: id, uid: uid, group: group, flags: flags}
	// Registered before the command: the kernel may queue the join's
	// event before the write returns.
	id.mu.Lock()
	id.mcs = append(id.mcs, m)
	id.mu.Unlock()
	ch.addGroup(m)
	resp := new(uverbs.UcmCreateIDResp)
	req := uverbs.UcmJoinMcast{Response: uverbs.Addr(unsafe.Pointer(resp)), Uid: uid, Id: id.handle,
		Addr_size: size, Join_flags: uint16(flags), Addr: ss}
	if err := ucma(id, "JOIN_MCAST", uverbs.RDMA_USER_CM_CMD_JOIN_MCAST, &req, unsafe.Pointer(resp), unsafe.Sizeof(*resp)); err != nil {
		id.dropGroup(m)
		return nil, fmt.Errorf("%w (join %v as %s)", err, group, flags)
	}
	id.mu.Lock()
	m.handle = resp.Id
	id.mu.Unlock()
	return m, nil
}

// multicastCapable reports verbs.ErrNotCapable for a device that cannot
// join multicast groups: iWARP (no UD, no multicast: the kernel's
// rdma_join_multicast answers ENOSYS) or one that reports no groups.
func multicastCapable(dev *verbs.Context) error {
	if dev.Device().NodeType.Transport() == verbs.TransportIWARP {
		return fmt.Errorf("%s is an iWARP device (no multicast): %w", dev.Device().Name, verbs.ErrNotCapable)
	}
	a, err := dev.QueryDevice()
	if err != nil {
		return err
	}
	if a.MaxMcastGrp == 0 {
		return fmt.Errorf("%s reports no multicast groups: %w", dev.Device().Name, verbs.ErrNotCapable)
	}
	return nil
}

// LeaveMulticast leaves the group JoinMulticast joined (rdma_leave_multicast):
// it detaches the ID's QP from the group if the join attached it, and
// tells the kernel, which drops the group's events still queued. A group
// the ID has not joined is refused with unix.EADDRNOTAVAIL. Close leaves
// every group.
func (id *ID) LeaveMulticast(group netip.Addr) error {
	if err := id.check(); err != nil {
		return err
	}
	id.mu.Lock()
	var m *mcGroup
	for _, g := range id.mcs {
		if g.group == group {
			m = g
		}
	}
	id.mu.Unlock()
	if m == nil {
		return fmt.Errorf("cm: leave multicast %v: not joined: %w", group, unix.EADDRNOTAVAIL)
	}
	var detachErr error
	id.mu.Lock()
	q, mgid, mlid := m.attached, m.mgid, m.mlid
	m.attached = nil
	id.mu.Unlock()
	if q != nil {
		detachErr = q.DetachMcast(mgid, mlid)
	}
	resp := new(uverbs.UcmDestroyIDResp)
	req := uverbs.UcmDestroyID{Response: uverbs.Addr(unsafe.Pointer(resp)), Id: m.handle}
	err := ucma(id, "LEAVE_MCAST", uverbs.RDMA_USER_CM_CMD_LEAVE_MCAST, &req, unsafe.Pointer(resp), unsafe.Sizeof(*resp))
	id.dropGroup(m)
	if err != nil {
		return fmt.Errorf("%w (leave %v)", err, group)
	}
	if detachErr != nil {
		return fmt.Errorf("cm: leave multicast %v: %w", group, detachErr)
	}
	return nil
}

// dropGroup forgets m in its ID and its channel.
func (id *ID) dropGroup(m *mcGroup) {
	id.mu.Lock()
	for i, g := range id.mcs {
		if g == m {
			id.mcs = append(id.mcs[:i], id.mcs[i+1:]...)
			break
		}
	}
	ch := id.ch
	id.mu.Unlock()
	ch.mu.Lock()
	delete(ch.mcs, m.uid)
	ch.mu.Unlock()
}

// addGroup registers m's uid with the channel, so that its events reach
// its ID.
func (ch *Channel) addGroup(m *mcGroup) {
	ch.mu.Lock()
	ch.mcs[m.uid] = m
	ch.mu.Unlock()
}

// processJoin is librdmacm's ucma_process_join: it records the group's
// GID and LID from the join event and attaches the ID's QP (full members
// only). A failed attach turns the event into EventMulticastError.
func (m *mcGroup) processJoin(ev *Event) {
	id := m.id
	id.mu.Lock()
	m.mgid, m.mlid = ev.UD.AH.GRH.DGID, ev.UD.AH.DLID
	q := id.qp
	id.mu.Unlock()
	if q == nil || m.flags == JoinSendOnlyFullMember {
		return
	}
	if err := q.AttachMcast(m.mgid, m.mlid); err != nil {
		ev.Type = EventMulticastError
		ev.Status = -int(errnoOf(err))
		return
	}
	id.mu.Lock()
	m.attached = q
	id.mu.Unlock()
}

// errnoOf returns the errno err wraps, or EIO.
func errnoOf(err error) unix.Errno {
	var n unix.Errno
	if errors.As(err, &n) {
		return n
	}
	return unix.EIO
}
