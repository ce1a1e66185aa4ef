package srq_test

import (
	"errors"
	"testing"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/srq"
	"github.com/goverbs/goverbs/verbs"
)

// PostRecv allocates nothing, neither when it posts nor when the SRQ is
// full or closed (errors a caller retries or meets in a loop).
func TestPostRecvAllocs(t *testing.T) {
	pd, s := newSRQ(t, srq.Attr{MaxWR: 64, MaxSGE: 1})
	buf, err := mr.New(pd, 64, mr.LocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	wr := []verbs.RecvWR{{WRID: 1, SGList: []verbs.SGE{testutil.SGE(buf, 0, 64)}}}
	if n := testing.AllocsPerRun(20, func() {
		if err := s.PostRecv(wr); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("PostRecv: %v allocations per call", n)
	}
	// 16 times the SRQ's size fill any ring that fills. qemu's pvrdma
	// device moves each receive off the ring into its backend's SRQ as
	// it is posted (and completes with an error what the backend has no
	// room for), so its ring never does.
	full := false
	for i := 0; i < 16*64 && !full; i++ {
		err := s.PostRecv(wr)
		full = errors.Is(err, verbs.ErrQueueFull)
		if err != nil && !full {
			t.Fatalf("filling the SRQ: %v", err)
		}
	}
	testutil.SkipUnlessCap(t, full, "an SRQ ring that fills (1024 receives posted to a 64-entry SRQ without ErrQueueFull)")
	if n := testing.AllocsPerRun(100, func() {
		if err := s.PostRecv(wr); !errors.Is(err, verbs.ErrQueueFull) {
			t.Fatalf("full SRQ: %v", err)
		}
	}); n != 0 {
		t.Errorf("PostRecv, SRQ full: %v allocations per call", n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() {
		if err := s.PostRecv(wr); !errors.Is(err, verbs.ErrClosed) {
			t.Fatalf("closed SRQ: %v", err)
		}
	}); n != 0 {
		t.Errorf("PostRecv, SRQ closed: %v allocations per call", n)
	}
}
