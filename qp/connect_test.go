package qp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/verbs"
)

// connectEnv is a PD, one CQ and a 4 KiB region on the test device.
type connectEnv struct {
	dev *verbs.Context
	pd  *verbs.PD
	cq  *cq.CQ
	mem *mr.MR
}

func newConnectEnv(t *testing.T) *connectEnv {
	t.Helper()
	e := &connectEnv{dev: testutil.Open(t)}
	var err error
	if e.pd, err = e.dev.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if e.cq, err = cq.New(e.dev, cq.Options{CQE: 64}); err != nil {
		t.Fatal(err)
	}
	if e.mem, err = mr.New(e.pd, 4096, mr.LocalWrite|mr.RemoteWrite|mr.RemoteRead); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *connectEnv) newQP(t *testing.T, typ qp.Type) *qp.QP {
	t.Helper()
	q, err := qp.New(e.pd, qp.Options{Type: typ, SendCQ: e.cq, RecvCQ: e.cq,
		Caps: qp.Caps{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func peerInfo(t *testing.T, q *qp.QP) qp.PeerInfo {
	t.Helper()
	ep, err := q.PeerInfo(1)
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

func next(t *testing.T, c *cq.CQ) verbs.WorkCompletion {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	wc, err := c.Next(ctx)
	if err != nil {
		t.Fatalf("completion: %v", err)
	}
	return wc
}

// Connect with the zero options brings two QPs up with the documented
// defaults, and the immediate of a SEND_WITH_IMM, given in host order,
// travels in network order: the receiving device stores the packet's
// bytes, which read 01 02 03 04 for 0x01020304.
func TestConnectDefaultsOnDevice(t *testing.T) {
	e := newConnectEnv(t)
	a, b := e.newQP(t, qp.RC), e.newQP(t, qp.RC)
	if testutil.IWARP(e.dev) {
		if err := a.Connect(qp.PeerInfo{QPN: b.QPN()}, qp.ConnectOptions{}); !errors.Is(err, verbs.ErrNotCapable) {
			t.Fatalf("Connect on iWARP: %v, want ErrNotCapable", err)
		}
		return
	}
	ea, eb := peerInfo(t, a), peerInfo(t, b)
	if ea.QPN != a.QPN() || ea.PSN > 0xffffff || ea.GID == (verbs.GID{}) || ea.MTU == 0 {
		t.Fatalf("peer info %+v", ea)
	}
	if again := peerInfo(t, a); again != ea {
		t.Errorf("PeerInfo changed between calls: %+v, then %+v", ea, again)
	}
	gid, err := e.dev.RoutableGID(1)
	if err != nil || ea.GID != gid.GID || gid.Type != verbs.GIDTypeRoCEv2 {
		t.Errorf("peer info GID %v, RoutableGID %+v %v", ea.GID, gid, err)
	}
	if addr := testutil.Addr(t); ea.GID.Addr().String() != addr {
		t.Errorf("peer info GID %v is not the test address %s", ea.GID, addr)
	}
	if err := a.Connect(eb, qp.ConnectOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := b.Connect(ea, qp.ConnectOptions{}); err != nil {
		t.Fatal(err)
	}
	port, err := e.dev.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		q        *qp.QP
		me, peer qp.PeerInfo
	}{{a, ea, eb}, {b, eb, ea}} {
		at, err := tc.q.Query()
		if err != nil {
			t.Fatal(err)
		}
		if at.State != qp.RTS || at.Timeout != 14 || at.RetryCnt != 7 || at.RNRRetry != 7 || at.MinRNRTimer != 12 ||
			at.MaxRDAtomic != 1 || at.MaxDestRDAtomic != 1 || at.PathMTU != port.ActiveMTU ||
			at.SQPSN != tc.me.PSN || at.RQPSN != tc.peer.PSN || at.DestQPN != tc.peer.QPN ||
			at.Access != mr.RemoteWrite|mr.RemoteRead|mr.RemoteAtomic || at.Path.GRH.HopLimit != verbs.DefaultHopLimit {
			t.Errorf("QP %d after Connect: %+v", tc.q.QPN(), at)
		}
	}
	// Connect again: the QP is no longer in RESET.
	if err := a.Connect(eb, qp.ConnectOptions{}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("second Connect: %v", err)
	}

	const imm = 0x01020304
	if err := b.PostRecv([]verbs.RecvWR{{WRID: 1, SGList: []verbs.SGE{e.mem.SGE(1024, 64)}}}); err != nil {
		t.Fatal(err)
	}
	copy(e.mem.Bytes(), "hello")
	if err := a.PostSend([]verbs.SendWR{{WRID: 2, Opcode: verbs.WRSendWithImm, Imm: imm, Flags: verbs.SendSignaled,
		SGList: []verbs.SGE{e.mem.SGE(0, 5)}}}); err != nil {
		t.Fatal(err)
	}
	var recv verbs.WorkCompletion
	for range 2 {
		if wc := next(t, e.cq); wc.Opcode == verbs.WCRecv {
			recv = wc
		}
	}
	if recv.Flags&verbs.WCWithImm == 0 || recv.Imm() != imm {
		t.Fatalf("receive %+v: Imm() %#x, want %#x", recv, recv.Imm(), imm)
	}
	if wire := (*[4]byte)(unsafe.Pointer(&recv.ImmData)); *wire != [4]byte{1, 2, 3, 4} {
		t.Errorf("ImmData bytes % x, want the wire's 01 02 03 04", wire[:])
	}
	if verbs.HostToImm(imm) != recv.ImmData {
		t.Errorf("HostToImm(%#x) = %#x, the completion holds %#x", imm, verbs.HostToImm(imm), recv.ImmData)
	}
	if got := e.mem.Bytes()[1024:1029]; string(got) != "hello" {
		t.Errorf("received %q", got)
	}

	// An RDMA WRITE to the region's RemoteRegion, from an SGE of it.
	r := e.mem.Remote(2048)
	if r.Addr != e.mem.IOVA()+2048 || r.RKey != e.mem.RKey() || r.Len != 2048 {
		t.Fatalf("Remote(2048) %+v", r)
	}
	copy(e.mem.Bytes()[8:], "world")
	if err := a.PostSend([]verbs.SendWR{{WRID: 3, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		SGList: []verbs.SGE{e.mem.SGE(8, 5)}, RemoteAddr: r.Addr, RKey: r.RKey}}); err != nil {
		t.Fatal(err)
	}
	if wc := next(t, e.cq); wc.WRID != 3 || !bytes.Equal(e.mem.Bytes()[2048:2053], []byte("world")) {
		t.Fatalf("write %+v, memory %q", wc, e.mem.Bytes()[2048:2053])
	}

	// A failed completion comes back from Next with its typed error.
	if err := a.PostSend([]verbs.SendWR{{WRID: 4, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		SGList: []verbs.SGE{e.mem.SGE(0, 5)}, RemoteAddr: r.Addr, RKey: r.RKey + 1}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	wc, err := e.cq.Next(ctx)
	var werr *verbs.WCError
	if !errors.As(err, &werr) || werr.WRID != 4 || werr.QPNum != a.QPN() || wc.WRID != 4 ||
		!errors.Is(err, verbs.WCRemAccessErr) {
		t.Fatalf("write with a wrong rkey: %+v, %v", wc, err)
	}
	t.Logf("a failed write reads: %v", err)
}

// Connect refuses what it cannot do, and a failed Connect leaves the QP
// in RESET, ready for another try.
func TestConnectErrors(t *testing.T) {
	e := newConnectEnv(t)
	testutil.SkipUnlessModifyConnects(t, e.dev)
	ud := e.newQP(t, qp.UD)
	if err := ud.Connect(qp.PeerInfo{QPN: 1}, qp.ConnectOptions{}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("Connect of a UD QP: %v", err)
	}
	q := e.newQP(t, qp.RC)
	self := peerInfo(t, q)
	noGID := self
	noGID.GID = verbs.GID{}
	if err := q.Connect(noGID, qp.ConnectOptions{}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("Connect to a PeerInfo without a GID: %v", err)
	}
	if err := q.Connect(self, qp.ConnectOptions{RetryCount: 9}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("Connect with RetryCount 9: %v", err)
	}
	// An MTU the device refuses fails in RTR, after INIT: back to RESET.
	if err := q.Connect(self, qp.ConnectOptions{MTU: 7}); err == nil {
		t.Error("Connect with MTU 7 succeeded")
	}
	if s := q.State(); s != qp.Reset {
		t.Fatalf("after failed Connects the QP is in %s", s)
	}
	// The long path refuses the RTSAttr zero value on RC (timeout 0 would
	// wait forever for an ACK), in RTR as Connect would leave it.
	long := e.newQP(t, qp.RC)
	if err := long.ToInit(qp.InitAttr{Port: 1}); err != nil {
		t.Fatal(err)
	}
	if err := long.ToRTR(qp.RTRAttr{Path: testutil.Path(t, e.dev), MTU: verbs.MTU1024, DestQPN: self.QPN, MinRNRTimer: 12}); err != nil {
		t.Fatal(err)
	}
	if err := long.ToRTS(qp.RTSAttr{SQPSN: 1}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("ToRTS with RC attributes all zero: %v, want EINVAL", err)
	}
	if err := long.ToRTS(qp.RTSAttr{SQPSN: 1, Timeout: qp.AckTimeoutCode(time.Second), RetryCnt: 7}); err != nil {
		t.Errorf("ToRTS with a timeout: %v", err)
	}

	// A loopback: the QP connected to itself sends to itself.
	if err := q.Connect(self, qp.ConnectOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := q.PostRecv([]verbs.RecvWR{{WRID: 1, SGList: []verbs.SGE{e.mem.SGE(100, 10)}}}); err != nil {
		t.Fatal(err)
	}
	if err := q.PostSend([]verbs.SendWR{testutil.Carry(t, q, verbs.SendWR{WRID: 2, Opcode: verbs.WRSend}, []byte("to myself"))}); err != nil {
		t.Fatal(err)
	}
	if wc := next(t, e.cq); wc.WRID != 1 || string(e.mem.Bytes()[100:109]) != "to myself" {
		t.Fatalf("self receive %+v %q", wc, e.mem.Bytes()[100:109])
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := q.PeerInfo(1); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("PeerInfo of a closed QP: %v", err)
	}
	if err := q.Connect(self, qp.ConnectOptions{}); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("Connect of a closed QP: %v", err)
	}
}

// A PeerInfo travels as JSON, its GID as text.
func TestPeerInfoJSON(t *testing.T) {
	ep := qp.PeerInfo{QPN: 17, PSN: 0xabcdef, LID: 0, GID: verbs.GIDFromAddr(netip.MustParseAddr("169.254.77.1")), MTU: verbs.MTU1024}
	b, err := json.Marshal(ep)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"QPN":17,"PSN":11259375,"LID":0,"GID":"::ffff:169.254.77.1","MTU":3}`
	if string(b) != want {
		t.Errorf("JSON %s, want %s", b, want)
	}
	var back qp.PeerInfo
	if err := json.Unmarshal(b, &back); err != nil || back != ep {
		t.Errorf("round trip %+v %v", back, err)
	}
}
