package srq

import (
	"testing"

	"github.com/goverbs/goverbs/internal/provider/providertest"
	"github.com/goverbs/goverbs/verbs"
)

// Posting through the provider seam allocates nothing, and a list on the
// caller's stack stays there (provider.View; see qp's
// TestPostThroughSeamAllocs). The SRQ has a fake provider.
func TestPostThroughSeamAllocs(t *testing.T) {
	rq := new(providertest.RecvQueue)
	s := &SRQ{ring: rq}
	if n := testing.AllocsPerRun(100, func() {
		if err := s.PostRecv([]verbs.RecvWR{{WRID: 2, SGList: []verbs.SGE{{Addr: 0x2000, Length: 64, LKey: 7}}}}); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("PostRecv of a list on the stack: %v allocations per call", n)
	}
	if rq.Posts != 101 {
		t.Fatalf("the provider saw %d receives, want 101", rq.Posts)
	}
}
