package testutil

import (
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/srq"
	"github.com/goverbs/goverbs/verbs"
)

// GIDIndex returns the GID table index of the test address on port 1 (the
// IPv4-mapped RoCEv2 GID), as ibv_rc_pingpong's -g takes it.
func GIDIndex(t testing.TB, dev *verbs.Context) (int, verbs.GID) {
	t.Helper()
	want := netip.MustParseAddr(Addr(t))
	table, err := dev.QueryGIDTable()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range table {
		if e.Port == 1 && netip.AddrFrom16(e.GID).Unmap() == want {
			return e.Index, e.GID
		}
	}
	t.Fatalf("no GID for %s on %s", want, dev.Device().Name)
	return 0, verbs.GID{}
}

// Path returns the RoCE path from the test device to itself.
func Path(t testing.TB, dev *verbs.Context) verbs.AHAttr {
	t.Helper()
	idx, gid := GIDIndex(t, dev)
	return verbs.AHAttr{IsGlobal: true, Port: 1, GRH: verbs.GlobalRoute{DGID: gid, SGIDIndex: uint8(idx), HopLimit: 1}}
}

// Side is one end of a Pair: a QP with its own CQs.
type Side struct {
	QP     *qp.QP
	SendCQ *cq.CQ
	RecvCQ *cq.CQ
	MR     *mr.MR // 64 KiB, local write + remote read/write/atomic
}

// Pair is two connected QPs on the test device, both ends on one device
// (rxe loops the traffic through its full RoCEv2 path).
type Pair struct {
	Ctx  *verbs.Context
	PD   *verbs.PD
	A, B Side
}

// PairOptions tune NewPair.
type PairOptions struct {
	Type       qp.Type
	Caps       qp.Caps  // defaults: 16 WRs, 4 SGEs, 64 bytes inline
	SRQ        *srq.SRQ // both QPs receive from it
	Channel    bool     // bind the CQs to one completion channel
	NoRNRRetry bool     // RNR retry count 0 instead of 7 (infinite)
	CQE        int      // default 64
	SendCQ     *cq.CQ   // both QPs' send CQ, instead of one each
}

// NewPair builds and connects a pair; everything is closed when the test
// ends.
func NewPair(t testing.TB, o PairOptions) *Pair {
	t.Helper()
	ctx := Open(t)
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	return NewPairIn(t, pd, o)
}

// ConnectCM creates two RC QPs in pd with the options a (active side) and
// b (passive side) and connects them through rdma_cm. It is set by
// internal/testutil/cmpair (which test packages import for it) and used
// where the device's transport connects QPs only through the connection
// manager (iWARP).
var ConnectCM func(t testing.TB, pd *verbs.PD, a, b qp.Options) (*qp.QP, *qp.QP)

// IWARP reports whether the device's transport is iWARP (node type RNIC):
// RC only, QPs connected only through rdma_cm.
func IWARP(dev *verbs.Context) bool {
	return dev.Device().NodeType.Transport() == verbs.TransportIWARP
}

// SkipUnlessQPType skips the test unless the device's transport has QPs
// of type typ: iWARP has RC only.
func SkipUnlessQPType(t testing.TB, dev *verbs.Context, typ qp.Type) {
	t.Helper()
	SkipUnlessCap(t, typ == qp.RC || !IWARP(dev),
		typ.String()+" QPs on transport "+dev.Device().NodeType.Transport().String()+" (node type "+strconv.Itoa(int(dev.Device().NodeType))+")")
}

// SkipUnlessModifyConnects skips the test unless the device's QPs can be
// connected with QP modify alone (RTR with a path and a peer QP number):
// on iWARP the connection manager drives the QP states.
func SkipUnlessModifyConnects(t testing.TB, dev *verbs.Context) {
	t.Helper()
	SkipUnlessCap(t, !IWARP(dev), "connection of QPs by QP modify (transport "+
		dev.Device().NodeType.Transport().String()+" connects QPs only through rdma_cm)")
}

// SkipIfNotCapable skips the test when err is verbs.ErrNotCapable: goverbs
// refused the work request before the queue because the device (its
// provider) cannot carry it, for example immediate data or atomics on
// siw. capability names what the device lacks.
func SkipIfNotCapable(t testing.TB, err error, capability string) {
	t.Helper()
	SkipUnlessCap(t, !errors.Is(err, verbs.ErrNotCapable), capability+" ("+fmt.Sprint(err)+")")
}

// NewPairIn builds a pair in an existing PD.
func NewPairIn(t testing.TB, pd *verbs.PD, o PairOptions) *Pair {
	t.Helper()
	ctx := pd.Context()
	if o.Type == 0 {
		o.Type = qp.RC
	}
	SkipUnlessQPType(t, ctx, o.Type)
	if o.Caps == (qp.Caps{}) {
		o.Caps = qp.Caps{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInlineData: 64}
		if o.SRQ != nil {
			o.Caps.MaxRecvWR, o.Caps.MaxRecvSGE = 0, 0
		}
	}
	rnrRetry := uint8(7)
	if o.NoRNRRetry {
		rnrRetry = 0
	}
	if o.CQE == 0 {
		o.CQE = 64
	}
	var ch *verbs.CompChannel
	if o.Channel {
		var err error
		if ch, err = ctx.NewCompChannel(); err != nil {
			t.Fatal(err)
		}
	}
	p := &Pair{Ctx: ctx, PD: pd}
	iwarp := IWARP(ctx)
	mk := func(s *Side) {
		var err error
		if s.SendCQ = o.SendCQ; s.SendCQ == nil {
			if s.SendCQ, err = cq.New(ctx, cq.Options{CQE: o.CQE, Channel: ch}); err != nil {
				t.Fatal(err)
			}
		}
		if s.RecvCQ, err = cq.New(ctx, cq.Options{CQE: o.CQE, Channel: ch}); err != nil {
			t.Fatal(err)
		}
		if !iwarp {
			if s.QP, err = qp.New(pd, qp.Options{Type: o.Type, SendCQ: s.SendCQ, RecvCQ: s.RecvCQ, SRQ: o.SRQ, Caps: o.Caps}); err != nil {
				SkipIfNotCapable(t, err, o.Type.String()+" QPs (CREATE_QP)")
				t.Fatal(err)
			}
		}
		if s.MR, err = mr.New(pd, 64<<10, mr.LocalWrite|mr.RemoteWrite|mr.RemoteRead|mr.RemoteAtomic); err != nil {
			t.Fatal(err)
		}
	}
	mk(&p.A)
	mk(&p.B)
	if iwarp {
		if ConnectCM == nil {
			t.Fatal("testutil: iWARP pairs connect through rdma_cm: import _ \"github.com/goverbs/goverbs/internal/testutil/cmpair\" in the test package")
		}
		opts := func(s *Side) qp.Options {
			return qp.Options{Type: o.Type, SendCQ: s.SendCQ, RecvCQ: s.RecvCQ, SRQ: o.SRQ, Caps: o.Caps}
		}
		p.A.QP, p.B.QP = ConnectCM(t, pd, opts(&p.A), opts(&p.B))
		return p
	}
	path := Path(t, ctx)
	const qkey = 0x11111111
	connect := func(s, peer *Side, psn, peerPSN uint32) {
		access := mr.LocalWrite | mr.RemoteWrite | mr.RemoteRead | mr.RemoteAtomic
		if o.Type == qp.UC {
			access = mr.LocalWrite | mr.RemoteWrite
		}
		if err := s.QP.ToInit(qp.InitAttr{Port: 1, Access: access, QKey: qkey}); err != nil {
			t.Fatal(err)
		}
		if err := s.QP.ToRTR(qp.RTRAttr{Path: path, MTU: verbs.MTU1024, DestQPN: peer.QP.QPN(), RQPSN: peerPSN,
			MaxDestRDAtomic: 4, MinRNRTimer: 1}); err != nil {
			t.Fatal(err)
		}
		if err := s.QP.ToRTS(qp.RTSAttr{SQPSN: psn, Timeout: 14, RetryCnt: 7, RNRRetry: rnrRetry, MaxRDAtomic: 4}); err != nil {
			t.Fatal(err)
		}
	}
	connect(&p.A, &p.B, 0x1000, 0x2000)
	connect(&p.B, &p.A, 0x2000, 0x1000)
	return p
}

// QKey is the Q_Key of UD pairs.
const QKey = 0x11111111

// Completions polls c until it has n completions and fails the test
// unless every one of them succeeded: a test that posts valid work
// requests must not pass on error completions. Use CompletionsAnyStatus
// where errors are expected (and check their status).
func Completions(t testing.TB, c *cq.CQ, n int) []verbs.WorkCompletion {
	t.Helper()
	wcs := CompletionsAnyStatus(t, c, n)
	for i, wc := range wcs {
		if wc.Status != verbs.WCSuccess {
			t.Fatalf("completion %d of %d: status %v (WRID %d, vendor error %#x), want success", i+1, n, wc.Status, wc.WRID, wc.VendorErr)
		}
	}
	return wcs
}

// CompletionsAnyStatus polls c until it has n completions, whatever their
// status. It fails the test after a generous guard time (the VM is slow;
// this only stops a hang).
func CompletionsAnyStatus(t testing.TB, c *cq.CQ, n int) []verbs.WorkCompletion {
	t.Helper()
	out := make([]verbs.WorkCompletion, 0, n)
	wc := make([]verbs.WorkCompletion, n)
	deadline := time.Now().Add(60 * time.Second)
	for len(out) < n {
		got, err := c.Poll(wc[:n-len(out)])
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		out = append(out, wc[:got]...)
		if got == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("got %d of %d completions: %+v", len(out), n, out)
			}
			runtime.Gosched()
		}
	}
	return out
}

// NoCompletion checks that c stays empty for a moment.
func NoCompletion(t testing.TB, c *cq.CQ) {
	t.Helper()
	time.Sleep(50 * time.Millisecond)
	wc := make([]verbs.WorkCompletion, 1)
	if n, _ := c.Poll(wc); n != 0 {
		t.Fatalf("unexpected completion %+v", wc[0])
	}
}

// SGE returns an SGE for bytes [off, off+n) of m.
func SGE(m *mr.MR, off, n int) verbs.SGE {
	return verbs.SGE{Addr: m.IOVA() + uint64(off), Length: uint32(n), LKey: m.LKey()}
}

// QPState returns the QP's state as the kernel reports it, adopting it
// (qp.QP.SyncState); on a device whose QUERY_QP does not report the state
// (siw on 6.1: qp.ErrStateNotReported) it logs that and returns the state
// goverbs moved the QP to.
func QPState(t testing.TB, q *qp.QP) qp.State {
	t.Helper()
	s, err := q.SyncState()
	if errors.Is(err, qp.ErrStateNotReported) {
		t.Logf("the device does not report the QP state (QUERY_QP answers RESET); goverbs' state: %v", s)
		return s
	}
	if err != nil {
		t.Fatalf("QP state: %v", err)
	}
	return s
}
