package qp

import (
	"testing"

	"github.com/goverbs/goverbs/internal/provider/providertest"
	"github.com/goverbs/goverbs/verbs"
)

// Posting through the provider seam allocates nothing, and a work request
// list built on the caller's stack stays there: PostSend and PostRecv hand
// the list to the provider (an interface call, which escape analysis
// assumes keeps its arguments) through provider.View. The QP has a fake
// provider (no device), so this runs on any host; escape analysis is
// static, so a list that escaped anywhere in PostSend or PostRecv would
// be allocated here too.
func TestPostThroughSeamAllocs(t *testing.T) {
	sq, rq := new(providertest.SendQueue), new(providertest.RecvQueue)
	q := &QP{typ: RC, sq: sq, rq: rq, sqSGE: 1, caps: Caps{MaxSendSGE: 1}}
	q.postState.Store(uint32(RTS))
	if n := testing.AllocsPerRun(100, func() {
		err := q.PostSend([]verbs.SendWR{{WRID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
			SGList: []verbs.SGE{{Addr: 0x1000, Length: 64, LKey: 7}}}})
		if err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("PostSend of a list on the stack: %v allocations per call", n)
	}
	if n := testing.AllocsPerRun(100, func() {
		if err := q.PostRecv([]verbs.RecvWR{{WRID: 2, SGList: []verbs.SGE{{Addr: 0x2000, Length: 64, LKey: 7}}}}); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("PostRecv of a list on the stack: %v allocations per call", n)
	}
	if sq.Posts != 101 || rq.Posts != 101 {
		t.Fatalf("the provider saw %d sends and %d receives, want 101 each", sq.Posts, rq.Posts)
	}
	// The generic checks run for each work request, inside the
	// provider's Post, with the index of the list.
	err := q.PostSend([]verbs.SendWR{{Opcode: verbs.WRSend}, {Opcode: verbs.WRSend, SGList: make([]verbs.SGE, 2)}})
	if pe, ok := verbs.IsPostError(err); !ok || pe.Index != 1 || pe.Err != verbs.ErrTooManySGE || sq.Posts != 102 {
		t.Fatalf("second of two with too many SGEs: %v (%d posted)", err, sq.Posts)
	}
}

// BenchmarkPostRecvSeam: PostRecv's generic part and the interface call
// into a provider that does nothing, a single-WR list built per call.
func BenchmarkPostRecvSeam(b *testing.B) {
	q := &QP{typ: RC, rq: new(providertest.RecvQueue)}
	q.postState.Store(uint32(RTS))
	b.ReportAllocs()
	for b.Loop() {
		q.PostRecv([]verbs.RecvWR{{WRID: 2, SGList: []verbs.SGE{{Addr: 0x2000, Length: 64, LKey: 7}}}})
	}
}
