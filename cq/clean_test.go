package cq_test

import (
	"fmt"
	"testing"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/verbs"
)

// TestQPCompletionsAfterCloseOrReset puts completions of two QPs, A and B,
// in one CQ, in a known order, then destroys A or moves it to RESET while
// they wait. A provider whose CQ ring is in user memory (pvrdma) removes
// A's completions then, as rdma-core's providers of that shape do; B's must
// come out intact and in their order, with A's gap closed, and the ring
// must stay consistent (Queued, then empty). Where the kernel owns the ring
// (rxe, siw) every completion stays and comes out in order.
func TestQPCompletionsAfterCloseOrReset(t *testing.T) {
	for _, tc := range []struct {
		name  string
		order string // which QP posts each signaled SEND, in turn
		reset bool   // ToReset instead of Close
	}{
		{"close-head", "ABB", false},
		{"close-middle", "BAB", false},
		{"close-tail-and-middle", "BABA", false},
		{"reset-middle", "BAB", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testutil.Open(t)
			x, err := cq.New(ctx, cq.Options{CQE: 16})
			if err != nil {
				t.Fatal(err)
			}
			pd, err := ctx.AllocPD()
			if err != nil {
				t.Fatal(err)
			}
			p := testutil.NewPairIn(t, pd, testutil.PairOptions{SendCQ: x})
			t.Logf("%s: the provider removes a QP's completions on close and reset: %v", ctx.Device().Name, x.Cleans())
			side := map[byte]*testutil.Side{'A': &p.A, 'B': &p.B}
			peer := map[byte]*testutil.Side{'A': &p.B, 'B': &p.A}
			for i := range tc.order {
				rwr := []verbs.RecvWR{{WRID: uint64(i), SGList: []verbs.SGE{testutil.SGE(peer[tc.order[i]].MR, 64*i, 64)}}}
				if err := peer[tc.order[i]].QP.PostRecv(rwr); err != nil {
					t.Fatal(err)
				}
			}
			// One SEND at a time, each waited for in x, so that the ring
			// holds them in tc.order.
			var want []verbs.WorkCompletion
			for i := range tc.order {
				s := side[tc.order[i]]
				wr := verbs.SendWR{WRID: uint64(0x100 + i), Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
					SGList: []verbs.SGE{testutil.SGE(s.MR, 0, 8)}}
				if err := s.QP.PostSend([]verbs.SendWR{wr}); err != nil {
					t.Fatal(err)
				}
				waitQueued(t, x, i+1)
				if q := x.Queued(); q != i+1 {
					t.Fatalf("%d completions queued after %d signaled SENDs", q, i+1)
				}
				if tc.order[i] == 'B' || !x.Cleans() {
					want = append(want, verbs.WorkCompletion{WRID: wr.WRID, QPNum: s.QP.QPN()})
				}
			}
			if tc.reset {
				err = p.A.QP.ToReset()
			} else {
				err = p.A.QP.Close()
			}
			if err != nil {
				t.Fatal(err)
			}
			if q := x.Queued(); q != len(want) {
				t.Fatalf("after %s of A: %d completions queued, want %d (provider cleans: %v)", tc.name, q, len(want), x.Cleans())
			}
			var got []verbs.WorkCompletion
			for _, wc := range testutil.Completions(t, x, len(want)) {
				got = append(got, verbs.WorkCompletion{WRID: wc.WRID, QPNum: wc.QPNum})
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("polled (WRID, QP) %v, want %v (A is QP %d, B QP %d)", got, want, p.A.QP.QPN(), p.B.QP.QPN())
			}
			if x.Queued() != 0 || x.Pending() {
				t.Fatalf("CQ not empty after every completion was polled: %d queued", x.Queued())
			}
			wc := make([]verbs.WorkCompletion, 1)
			if n, err := x.Poll(wc); n != 0 || err != nil {
				t.Fatalf("Poll of the emptied CQ: %d, %v (%+v)", n, err, wc[0])
			}
		})
	}
}
