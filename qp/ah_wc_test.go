package qp_test

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/verbs"
)

// TestUDServerRepliesFromWC is a UD server that answers whoever wrote to it:
// the client's request arrives with a GRH, the server makes its reply's
// address handle from the receive completion and that GRH
// (CreateAHFromWC: ibv_create_ah_from_wc), and the client receives the reply
// from the server's QP; the client then answers the reply the same way. On
// iWARP, which has no address handles, the call is refused with
// ErrNotCapable before UD (which iWARP lacks) is skipped.
func TestUDServerRepliesFromWC(t *testing.T) {
	ctx := testutil.Open(t)
	if testutil.IWARP(ctx) {
		pd, err := ctx.AllocPD()
		if err != nil {
			t.Fatal(err)
		}
		defer pd.Close()
		if _, err := pd.CreateAHFromWC(&verbs.WorkCompletion{}, nil, 1); !errors.Is(err, verbs.ErrNotCapable) {
			t.Fatalf("CreateAHFromWC on iWARP: %v, want ErrNotCapable", err)
		}
	}
	p := testutil.NewPair(t, testutil.PairOptions{Type: qp.UD})
	path := testutil.Path(t, p.Ctx)
	path.GRH.HopLimit, path.GRH.TrafficClass = 17, 0x20
	clientAH, err := p.PD.CreateAH(&path)
	testutil.SkipIfNotCapable(t, err, "address handles (CREATE_AH)")
	if err != nil {
		t.Fatal(err)
	}
	defer clientAH.Close()
	if testutil.HasModelBug(t, p.Ctx, testutil.QemuPvrdmaAHCache) {
		// The exchange needs this pair's PD to be the first to send UD
		// to the device's GID; TestUD is that one in this package.
		return
	}
	client, server := &p.A, &p.B

	// exchange sends msg from one side to the other through ah and returns
	// the receive completion and the receive buffer's GRH.
	exchange := func(from, to *testutil.Side, ah *verbs.AH, qpn uint32, msg string, wrid uint64) (verbs.WorkCompletion, []byte) {
		t.Helper()
		if err := to.QP.PostRecv([]verbs.RecvWR{{WRID: wrid, SGList: []verbs.SGE{testutil.SGE(to.MR, 0, verbs.GRHLen+256)}}}); err != nil {
			t.Fatal(err)
		}
		copy(from.MR.Bytes()[1024:], msg)
		if err := from.QP.PostSend([]verbs.SendWR{{WRID: wrid, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
			SGList: []verbs.SGE{testutil.SGE(from.MR, 1024, len(msg))}, AH: ah, RemoteQPN: qpn, RemoteQKey: testutil.QKey}}); err != nil {
			t.Fatal(err)
		}
		wantWC(t, testutil.Completions(t, from.SendCQ, 1)[0], verbs.WCSend, wrid, 0, from.QP.QPN())
		wc := testutil.Completions(t, to.RecvCQ, 1)[0]
		wantWC(t, wc, verbs.WCRecv, wrid, uint32(verbs.GRHLen+len(msg)), to.QP.QPN())
		if wc.SrcQP != from.QP.QPN() || wc.Flags&verbs.WCGRH == 0 {
			t.Fatalf("receive %+v: want source QP %d and a GRH", wc, from.QP.QPN())
		}
		if got := to.MR.Bytes()[verbs.GRHLen : verbs.GRHLen+len(msg)]; !bytes.Equal(got, []byte(msg)) {
			t.Fatalf("received %q, want %q", got, msg)
		}
		return wc, append([]byte(nil), to.MR.Bytes()[:verbs.GRHLen]...)
	}

	wc, grh := exchange(client, server, clientAH, server.QP.QPN(), "request", 1)
	attr, err := p.Ctx.InitAHFromWC(1, &wc, grh)
	if err != nil {
		t.Fatal(err)
	}
	// Both QPs are on one device: the sender's GID is ours, and the GRH
	// carries the client's traffic class. The hop limit is the route's:
	// creating a RoCE AH, the kernel replaces the AH's hop limit with the
	// one of the route to the destination GID (ib_resolve_eth_dmac), which
	// is the IPv4 default TTL here.
	want := path
	want.GRH.HopLimit = defaultTTL(t)
	if attr != want {
		t.Errorf("InitAHFromWC = %+v, want %+v", attr, want)
	}
	replyAH, err := p.PD.CreateAHFromWC(&wc, grh, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer replyAH.Close()
	wc2, grh2 := exchange(server, client, replyAH, wc.SrcQP, "reply", 2)
	backAH, err := p.PD.CreateAHFromWC(&wc2, grh2, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer backAH.Close()
	exchange(client, server, backAH, wc2.SrcQP, "ack", 3)
}

// defaultTTL is the IPv4 hop limit of a route without its own
// (net.ipv4.ip_default_ttl).
func defaultTTL(t *testing.T) uint8 {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_default_ttl")
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 8)
	if err != nil {
		t.Fatal(err)
	}
	return uint8(v)
}
