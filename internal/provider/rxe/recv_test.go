package rxe

import (
	"encoding/binary"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/provider/providertest"
	"github.com/goverbs/goverbs/uverbs"
)

func TestRecvRingFullAllocs(t *testing.T) {
	q, err := NewQueue(fakeQueue(t, 6, 4), RecvWQEHeader)
	if err != nil {
		t.Fatal(err)
	}
	r := NewRecvRing(q, 1, providertest.Errors())
	wr := []provider.RecvWR{{WRID: 1}, {WRID: 2}, {WRID: 3}, {WRID: 4}}
	if err := r.Post(wr); !providertest.Is(err, 3, provider.ReasonFull) {
		t.Fatalf("4 into 3: %v", err)
	}
	if n := testing.AllocsPerRun(100, func() {
		if !providertest.Is(r.Post(wr), -1, provider.ReasonFull) {
			t.Fatal("not full")
		}
	}); n != 0 {
		t.Fatalf("queue-full post: %v allocations", n)
	}
	r.Shut()
	if n := testing.AllocsPerRun(100, func() {
		if !providertest.Is(r.Post(wr), 0, provider.ReasonClosed) {
			t.Fatal("not closed")
		}
	}); n != 0 {
		t.Fatalf("post after Shut: %v allocations", n)
	}
}

// kernelResize does what rxe's rxe_queue_resize does to a user queue: copy
// the elements between the consumer and producer indices of the old queue
// into a new, bigger one whose producer index is their count.
func kernelResize(t *testing.T, old *Queue, log2, slots uint32) *Queue {
	nq, err := NewQueue(fakeQueue(t, log2, slots), RecvWQEHeader)
	if err != nil {
		t.Fatal(err)
	}
	c, p := atomic.LoadUint32(old.cons), atomic.LoadUint32(old.prod)
	n := uint32(0)
	for i := c; i != p; i = old.Next(i) {
		*(*uverbs.RxeRecvWqe)(nq.Elem(n)) = *(*uverbs.RxeRecvWqe)(old.Elem(i))
		n++
	}
	binary.NativeEndian.PutUint32(nq.mem[offProducer:], n)
	return nq
}

// Posts racing a resize are never lost: Resize holds the lock while the
// "kernel" copies the queue and the new one is swapped in. (Run the swap
// outside the lock and this fails: posts land in the old queue after the
// copy.)
func TestRecvRingResizeKeepsPosts(t *testing.T) {
	q, err := NewQueue(fakeQueue(t, 6, 8), RecvWQEHeader)
	if err != nil {
		t.Fatal(err)
	}
	r := NewRecvRing(q, 1, providertest.Errors())
	var (
		wg     sync.WaitGroup
		done   atomic.Bool
		posted atomic.Int64
	)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wr := []provider.RecvWR{{WRID: 7}}
			for {
				err := r.Post(wr)
				if err == nil {
					posted.Add(1)
					continue
				}
				if done.Load() {
					return
				}
				runtime.Gosched()
			}
		}()
	}
	log2, slots := uint32(6), uint32(8)
	for slots < 1<<14 {
		slots *= 2
		old, err := r.Resize(func() (*Queue, error) {
			runtime.Gosched() // the system call: let posters run if they can
			return kernelResize(t, r.q, log2, slots), nil
		})
		if err != nil || old == nil {
			t.Fatalf("resize: %v", err)
		}
	}
	done.Store(true)
	wg.Wait()
	if got := r.Posted(); int64(got) != posted.Load() {
		t.Fatalf("ring holds %d, %d posts succeeded", got, posted.Load())
	}
}
