package registry

import (
	"testing"

	"github.com/goverbs/goverbs/uverbs"
)

// Every listed provider serves one driver, no two the same, and opens a
// context without touching the device (Open only prepares; GET_CONTEXT
// is verbs').
func TestProviders(t *testing.T) {
	seen := map[uint32]bool{}
	for _, p := range providers {
		if seen[p.Driver] {
			t.Errorf("driver %d listed twice", p.Driver)
		}
		seen[p.Driver] = true
		if p.Open == nil || p.Open(nil) == nil {
			t.Errorf("driver %d: no context", p.Driver)
		}
		if got, ok := Lookup(p.Driver); !ok || got.Driver != p.Driver {
			t.Errorf("Lookup(%d) = %v, %v", p.Driver, got, ok)
		}
	}
	for _, d := range []uint32{uverbs.RDMA_DRIVER_RXE, uverbs.RDMA_DRIVER_SIW, uverbs.RDMA_DRIVER_VMW_PVRDMA} {
		if !seen[d] {
			t.Errorf("driver %d has no provider", d)
		}
	}
	if _, ok := Lookup(uverbs.RDMA_DRIVER_UNKNOWN); ok {
		t.Error("the unknown driver has a provider")
	}
	if len(Drivers()) != len(providers) {
		t.Errorf("Drivers() = %v", Drivers())
	}
}
