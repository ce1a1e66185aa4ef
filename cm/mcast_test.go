package cm_test

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cm"
	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/verbs"
)

// boundUDP is a UDP ID bound to addr, with a QP (setup).
func boundUDP(t *testing.T, ch *cm.Channel, addr string) *end {
	t.Helper()
	id, err := ch.CreateID(cm.UDP)
	if err != nil {
		t.Fatal(err)
	}
	if err := id.Bind(netip.AddrPortFrom(netip.MustParseAddr(addr), 0)); err != nil {
		t.Fatal(err)
	}
	return setup(t, id)
}

// A full member's QP receives what a send-only member sends to the group;
// the join events carry the group's address handle, QP number and Q_Key;
// after LeaveMulticast the QP receives no more. On iWARP (siw) the device
// reports no multicast groups and JoinMulticast is refused with
// verbs.ErrNotCapable.
func TestMulticastJoinSendLeave(t *testing.T) {
	for _, f := range []cm.JoinFlags{cm.JoinFullMember, cm.JoinSendOnlyFullMember} {
		t.Run(f.String(), func(t *testing.T) { testMulticastJoinSendLeave(t, f) })
	}
}

func testMulticastJoinSendLeave(t *testing.T, senderFlags cm.JoinFlags) {
	ch := channel(t)
	group := netip.MustParseAddr("239.77.1.1")
	if senderFlags == cm.JoinSendOnlyFullMember {
		group = netip.MustParseAddr("239.77.1.3")
	}
	if iwarp(t) {
		id, err := ch.CreateID(cm.UDP)
		if err != nil {
			t.Fatal(err)
		}
		if err := id.Bind(netip.AddrPortFrom(netip.MustParseAddr(testutil.Addr(t)), 0)); err != nil {
			t.Fatal(err)
		}
		a, err := id.Context().QueryDevice()
		if err != nil {
			t.Fatal(err)
		}
		if a.MaxMcastGrp != 0 {
			t.Errorf("iWARP device reports max_mcast_grp %d", a.MaxMcastGrp)
		}
		if _, err := id.JoinMulticast(timeout(t), group, cm.JoinFullMember); !errors.Is(err, verbs.ErrNotCapable) {
			t.Fatalf("JoinMulticast on iWARP: %v, want ErrNotCapable", err)
		}
		return
	}
	recv := boundUDP(t, ch, testutil.Addr(t))
	send := boundUDP(t, channel(t), testutil.MulticastPeerAddr(t))
	if err := recv.qp.PostRecv([]verbs.RecvWR{{WRID: 1, SGList: []verbs.SGE{{Addr: recv.buf.IOVA(), Length: 40 + 64, LKey: recv.buf.LKey()}}}}); err != nil {
		t.Fatal(err)
	}
	rev, err := recv.id.JoinMulticast(timeout(t), group, cm.JoinFullMember)
	if err != nil {
		t.Fatal(err)
	}
	mgid := verbs.GID(netip.AddrFrom4(group.As4()).As16()) // ::ffff:239.77.1.1 on RoCEv2
	if rev.Type != cm.EventMulticastJoin || rev.Group != group || rev.ID != recv.id || rev.UD.QPNum != 0xffffff ||
		rev.UD.QKey != cm.UDPQKey || !rev.UD.AH.IsGlobal || rev.UD.AH.GRH.DGID != mgid {
		t.Fatalf("join event %+v, want the group %v (MGID %v, QP 0xffffff, Q_Key %#x)", rev, group, mgid, cm.UDPQKey)
	}
	if _, err := recv.id.JoinMulticast(timeout(t), group, cm.JoinFullMember); !errors.Is(err, unix.EADDRINUSE) {
		t.Errorf("second join of %v: %v, want EADDRINUSE", group, err)
	}
	sev, err := send.id.JoinMulticast(timeout(t), group, senderFlags)
	if err != nil {
		t.Fatal(err)
	}
	ah, err := send.pd.CreateAH(&sev.UD.AH)
	if err != nil {
		t.Fatal(err)
	}
	defer ah.Close()
	post := func(msg string) {
		t.Helper()
		if err := send.qp.PostSend([]verbs.SendWR{{WRID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
			InlineData: []byte(msg), AH: ah, RemoteQPN: sev.UD.QPNum, RemoteQKey: sev.UD.QKey}}); err != nil {
			t.Fatal(err)
		}
		testutil.Completions(t, send.cq, 1)
	}
	post("to the group")
	wc := testutil.Completions(t, recv.cq, 1)[0]
	if wc.ByteLen != 40+12 || string(recv.buf.Bytes()[40:52]) != "to the group" || wc.SrcQP != send.qp.QPN() {
		t.Fatalf("multicast receive %+v %q", wc, recv.buf.Bytes()[40:52])
	}

	// Left, the receiver's QP is detached: the next datagram finds no one.
	if err := recv.id.LeaveMulticast(group); err != nil {
		t.Fatal(err)
	}
	if err := recv.id.LeaveMulticast(group); !errors.Is(err, unix.EADDRNOTAVAIL) {
		t.Errorf("second leave: %v, want EADDRNOTAVAIL", err)
	}
	if err := recv.qp.PostRecv([]verbs.RecvWR{{WRID: 3, SGList: []verbs.SGE{{Addr: recv.buf.IOVA(), Length: 40 + 64, LKey: recv.buf.LKey()}}}}); err != nil {
		t.Fatal(err)
	}
	post("after leaving")
	time.Sleep(500 * time.Millisecond)
	var got [1]verbs.WorkCompletion
	if n, err := recv.cq.Poll(got[:]); n != 0 || err != nil {
		t.Fatalf("after leaving: %d completions (%+v), %v", n, got[0], err)
	}
	if err := send.id.LeaveMulticast(group); err != nil {
		t.Fatal(err)
	}
}

// What JoinMulticast refuses before the kernel, and QP attachments
// (AttachMcast/DetachMcast) on their own: UD only, multicast GIDs only,
// detaching what is not attached; and a QP still attached closes (Close
// detaches it first: the kernel refuses to destroy an attached QP).
func TestMulticastMisuse(t *testing.T) {
	ch := channel(t)
	tcp, err := ch.CreateID(cm.TCP)
	if err != nil {
		t.Fatal(err)
	}
	group := netip.MustParseAddr("239.77.1.2")
	if _, err := tcp.JoinMulticast(timeout(t), group, cm.JoinFullMember); !errors.Is(err, unix.EINVAL) {
		t.Errorf("join on a TCP ID: %v, want EINVAL", err)
	}
	udp, err := ch.CreateID(cm.UDP)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := udp.JoinMulticast(timeout(t), group, cm.JoinFullMember); !errors.Is(err, unix.EINVAL) {
		t.Errorf("join on an unbound ID: %v, want EINVAL", err)
	}
	if err := udp.Bind(netip.AddrPortFrom(netip.MustParseAddr(testutil.Addr(t)), 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := udp.JoinMulticast(timeout(t), netip.MustParseAddr(testutil.Addr(t)), cm.JoinFullMember); !errors.Is(err, unix.EINVAL) {
		t.Errorf("join of a unicast address: %v, want EINVAL", err)
	}
	if _, err := udp.JoinMulticast(timeout(t), group, 2); !errors.Is(err, unix.EINVAL) {
		t.Errorf("join flags 2: %v, want EINVAL", err)
	}
	if err := udp.LeaveMulticast(group); !errors.Is(err, unix.EADDRNOTAVAIL) {
		t.Errorf("leave without a join: %v, want EADDRNOTAVAIL", err)
	}

	dev := testutil.Open(t)
	pd, err := dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Close()
	c, err := cq.New(dev, cq.Options{CQE: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mgid := verbs.GID(netip.AddrFrom4(group.As4()).As16())
	rc, err := qp.New(pd, qp.Options{Type: qp.RC, SendCQ: c, RecvCQ: c, Caps: qp.Caps{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if err := rc.AttachMcast(mgid, 0); !errors.Is(err, unix.EINVAL) {
		t.Errorf("AttachMcast on an RC QP: %v, want EINVAL", err)
	}
	if iwarp(t) {
		return // no UD QPs
	}
	ud, err := qp.New(pd, qp.Options{Type: qp.UD, SendCQ: c, RecvCQ: c, Caps: qp.Caps{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ud.AttachMcast(verbs.GID(netip.MustParseAddr(testutil.Addr(t)).As16()), 0); !errors.Is(err, unix.EINVAL) {
		t.Errorf("AttachMcast of a unicast GID: %v, want EINVAL", err)
	}
	if err := ud.DetachMcast(mgid, 0); !errors.Is(err, unix.EINVAL) {
		t.Errorf("DetachMcast without an attach: %v, want EINVAL", err)
	}
	for range 2 { // the second attach does nothing
		if err := ud.AttachMcast(mgid, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := ud.Close(); err != nil {
		t.Fatalf("close of an attached QP: %v", err)
	}
	if err := ud.AttachMcast(mgid, 0); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("AttachMcast after Close: %v, want ErrClosed", err)
	}
}
