package cq

import (
	"testing"

	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/provider/providertest"
	"github.com/goverbs/goverbs/verbs"
)

// Polling through the provider seam allocates nothing, and a completion
// array on the caller's stack stays there (provider.View; see qp's
// TestPostThroughSeamAllocs). The CQ has a fake provider.
func TestPollThroughSeamAllocs(t *testing.T) {
	ring := &providertest.CQ{WCs: []provider.WC{{WRID: 7, Opcode: provider.WCRecv, ByteLen: 64}}}
	c := &CQ{ring: ring, ready: ring.Ready()}
	var got verbs.WorkCompletion
	if n := testing.AllocsPerRun(100, func() {
		var wc [4]verbs.WorkCompletion
		n, err := c.Poll(wc[:])
		if err != nil || n != 1 {
			t.Fatal(n, err)
		}
		got = wc[0]
	}); n != 0 {
		t.Errorf("Poll into an array on the stack: %v allocations per call", n)
	}
	if got.WRID != 7 || got.Opcode != verbs.WCRecv || got.ByteLen != 64 {
		t.Fatalf("polled %+v", got)
	}
}

// emptyCQ is a provider CQ with an emptiness test the test sets; it
// counts the Polls that reach it.
type emptyCQ struct {
	providertest.CQ
	word  uint32
	ready provider.Ready
	polls int
}

func (e *emptyCQ) Ready() *provider.Ready {
	e.ready = provider.Ready{Word: &e.word, Mask: 1}
	return &e.ready
}

func (e *emptyCQ) Poll([]provider.WC) int {
	e.polls++
	return 0
}

// An empty CQ answers from the provider's emptiness test, without the
// interface call; once the test says "pending", Poll is asked.
func TestPollEmptyAnswersFromReady(t *testing.T) {
	e := &emptyCQ{}
	c := &CQ{ring: e, ready: e.Ready()}
	var wc [2]verbs.WorkCompletion
	if n, err := c.Poll(wc[:]); n != 0 || err != nil {
		t.Fatalf("empty: %d %v", n, err)
	}
	if n := testing.AllocsPerRun(100, func() { c.Poll(wc[:]) }); n != 0 {
		t.Errorf("empty Poll: %v allocations", n)
	}
	if e.polls != 0 {
		t.Fatalf("an empty CQ reached the provider's Poll %d times", e.polls)
	}
	e.word = 1
	c.Poll(wc[:])
	if e.polls != 1 {
		t.Errorf("a pending emptiness test reached the provider's Poll %d times, want 1", e.polls)
	}
}
