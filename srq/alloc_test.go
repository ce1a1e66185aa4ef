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
	for i := 0; ; i++ {
		err := s.PostRecv(wr)
		if errors.Is(err, verbs.ErrQueueFull) {
			break
		}
		if err != nil || i > 1<<16 {
			t.Fatalf("filling the SRQ: %v", err)
		}
	}
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
