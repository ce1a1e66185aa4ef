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
	c := &CQ{ring: &providertest.CQ{WCs: []provider.WC{{WRID: 7, Opcode: provider.WCRecv, ByteLen: 64}}}}
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
