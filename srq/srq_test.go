package srq_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/srq"
	"github.com/goverbs/goverbs/verbs"
)

func newSRQ(t *testing.T, attr srq.Attr) (*verbs.PD, *srq.SRQ) {
	ctx := testutil.Open(t)
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	s, err := srq.New(pd, attr)
	if err != nil {
		t.Fatal(err)
	}
	return pd, s
}

// Several QPs receive from one SRQ: each completion names the QP it came
// in on and the buffer it landed in, whatever the posting order was.
func TestSRQSharedByQPs(t *testing.T) {
	pd, s := newSRQ(t, srq.Attr{MaxWR: 64, MaxSGE: 1})
	buf, err := mr.New(pd, 64*128, mr.LocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	const posted = 24
	for i := 0; i < posted; i++ {
		if err := s.PostRecv([]verbs.RecvWR{{WRID: uint64(1000 + i), SGList: []verbs.SGE{testutil.SGE(buf, i*128, 128)}}}); err != nil {
			t.Fatal(err)
		}
	}
	if s.Posted() != posted {
		t.Fatalf("Posted() = %d", s.Posted())
	}
	// Two pairs whose B sides both receive from the SRQ.
	p1 := testutil.NewPairIn(t, pd, testutil.PairOptions{SRQ: s})
	p2 := testutil.NewPairIn(t, pd, testutil.PairOptions{SRQ: s})
	senders := map[uint32]*testutil.Pair{p1.B.QP.QPN(): p1, p2.B.QP.QPN(): p2}
	// p1's A sends 5 messages, p2's A sends 7; each says who sent it.
	for _, x := range []struct {
		p *testutil.Pair
		n int
	}{{p1, 5}, {p2, 7}} {
		for i := 0; i < x.n; i++ {
			msg := []byte(fmt.Sprintf("qp%d-msg%d", x.p.B.QP.QPN(), i))
			wr := testutil.Carry(t, x.p.A.QP, verbs.SendWR{WRID: uint64(i), Opcode: verbs.WRSend, Flags: verbs.SendSignaled}, msg)
			if err := x.p.A.QP.PostSend([]verbs.SendWR{wr}); err != nil {
				t.Fatal(err)
			}
			testutil.Completions(t, x.p.A.SendCQ, 1)
		}
	}
	got := map[uint32]int{}
	used := map[uint64]bool{}
	for qpn, p := range senders {
		n := 5
		if p == p2 {
			n = 7
		}
		for _, wc := range testutil.Completions(t, p.B.RecvCQ, n) {
			if wc.Status != verbs.WCSuccess || wc.QPNum != qpn || wc.Opcode != verbs.WCRecv {
				t.Fatalf("SRQ completion %+v on QP %d", wc, qpn)
			}
			if wc.WRID < 1000 || wc.WRID >= 1000+posted || used[wc.WRID] {
				t.Fatalf("wr_id %d: not a posted buffer, or used twice", wc.WRID)
			}
			used[wc.WRID] = true
			off := int(wc.WRID-1000) * 128
			data := string(buf.Bytes()[off : off+int(wc.ByteLen)])
			if want := fmt.Sprintf("qp%d-msg%d", qpn, got[qpn]); data != want {
				t.Fatalf("buffer %d holds %q, want %q (per-QP order is kept)", wc.WRID, data, want)
			}
			got[qpn]++
		}
	}
	if s.Posted() != posted-12 {
		t.Errorf("after 12 receives Posted() = %d", s.Posted())
	}
}

func TestSRQLimitEvent(t *testing.T) {
	pd, s := newSRQ(t, srq.Attr{MaxWR: 16, MaxSGE: 1})
	buf, err := mr.New(pd, 16*64, mr.LocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		if err := s.PostRecv([]verbs.RecvWR{{WRID: uint64(i), SGList: []verbs.SGE{testutil.SGE(buf, i*64, 64)}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Modify(srq.Attr{Limit: 3}, true, false); err != nil {
		t.Fatal(err)
	}
	if a, err := s.Query(); err != nil || a.Limit != 3 {
		t.Fatalf("query after arming: %+v %v", a, err)
	}
	p := testutil.NewPairIn(t, pd, testutil.PairOptions{SRQ: s})
	send := []verbs.SendWR{testutil.Carry(t, p.A.QP, verbs.SendWR{Opcode: verbs.WRSend, Flags: verbs.SendSignaled}, []byte("x"))}
	for i := 0; i < 2; i++ {
		if err := p.A.QP.PostSend(send); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Completions(t, p.B.RecvCQ, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ev, err := pd.Context().Event(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type != verbs.EventSRQLimitReached || ev.Object != s || ev.Element != s.UserHandle() {
		t.Fatalf("event %v (object %T), want SRQ limit on %d", ev, ev.Object, s.UserHandle())
	}
}

func TestSRQResizeQueryAndFull(t *testing.T) {
	pd, s := newSRQ(t, srq.Attr{MaxWR: 4, MaxSGE: 2})
	buf, err := mr.New(pd, 4096, mr.LocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.Query()
	if err != nil {
		t.Fatal(err)
	}
	// Fill the ring: one slot stays empty, so the usable depth is slots-1.
	n := 0
	for ; n < 100; n++ {
		err := s.PostRecv([]verbs.RecvWR{{WRID: uint64(n), SGList: []verbs.SGE{testutil.SGE(buf, 0, 8)}}})
		if errors.Is(err, verbs.ErrQueueFull) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// qemu's pvrdma device moves each receive off the ring into its
	// backend's SRQ as it is posted, so its ring never fills.
	full := n < 100
	if full {
		if n < a.MaxWR || n < 4 {
			t.Fatalf("only %d receives fit, query says max_wr %d", n, a.MaxWR)
		}
		pe, ok := verbs.IsPostError(s.PostRecv([]verbs.RecvWR{{SGList: []verbs.SGE{testutil.SGE(buf, 0, 8)}}}))
		if !ok || !errors.Is(pe, unix.ENOMEM) || pe.Index != 0 {
			t.Fatalf("posting to a full SRQ: %v", pe)
		}
	}
	// Too many SGEs.
	sg := make([]verbs.SGE, 40)
	if err := s.PostRecv([]verbs.RecvWR{{SGList: sg}}); !errors.Is(err, verbs.ErrTooManySGE) {
		t.Fatalf("40 SGEs: %v", err)
	}
	testutil.SkipUnlessCap(t, full, fmt.Sprintf("an SRQ ring that fills (100 receives posted to an SRQ of max_wr %d without ErrQueueFull)", a.MaxWR))
	// Grow: posted buffers survive, and more fit.
	if err := s.Modify(srq.Attr{MaxWR: 64}, false, true); err != nil {
		testutil.SkipIfNotCapable(t, err, "SRQ resize (IB_SRQ_MAX_WR)")
		t.Fatal(err)
	}
	if got := s.Posted(); got != n {
		t.Fatalf("after resize %d posted, want %d", got, n)
	}
	if a, err := s.Query(); err != nil || a.MaxWR < 64 {
		t.Fatalf("query after resize: %+v %v", a, err)
	}
	for i := 0; i < 30; i++ {
		if err := s.PostRecv([]verbs.RecvWR{{WRID: uint64(500 + i), SGList: []verbs.SGE{testutil.SGE(buf, 0, 8)}}}); err != nil {
			t.Fatalf("post %d after resize: %v", i, err)
		}
	}
	if err := s.Modify(srq.Attr{}, false, false); !errors.Is(err, srq.ErrBadAttr) {
		t.Errorf("empty modify: %v", err)
	}
}

func TestSRQBadInputAndClose(t *testing.T) {
	pd, s := newSRQ(t, srq.Attr{MaxWR: 4, MaxSGE: 1})
	for _, bad := range []srq.Attr{{MaxWR: 0, MaxSGE: 1}, {MaxWR: 1, MaxSGE: 0}, {MaxWR: 1, MaxSGE: 1, Limit: -1}} {
		if _, err := srq.New(pd, bad); !errors.Is(err, srq.ErrBadAttr) {
			t.Errorf("srq.New(%+v): %v", bad, err)
		}
	}
	if _, err := srq.New(pd, srq.Attr{MaxWR: 1 << 30, MaxSGE: 1}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("SRQ beyond max_srq_wr: %v", err)
	}
	// An SRQ in use by a QP cannot be destroyed.
	p := testutil.NewPairIn(t, pd, testutil.PairOptions{SRQ: s})
	if err := s.Close(); !errors.Is(err, unix.EBUSY) {
		t.Fatalf("closing an SRQ in use: %v", err)
	}
	p.A.QP.Close()
	p.B.QP.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.PostRecv([]verbs.RecvWR{{}}); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("PostRecv after Close: %v", err)
	}
	if _, err := s.Query(); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("Query after Close: %v", err)
	}
	if err := s.Modify(srq.Attr{Limit: 1}, true, false); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("Modify after Close: %v", err)
	}
}
