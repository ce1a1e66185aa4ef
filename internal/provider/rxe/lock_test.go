package rxe

import (
	"encoding/binary"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/goverbs/goverbs/uverbs"
	"github.com/goverbs/goverbs/verbs"
)

// The lock excludes: a plain counter incremented under it from many
// goroutines ends exact (and -race sees the synchronization).
func TestLockExcludes(t *testing.T) {
	var l Lock
	n := 0
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				if !l.Lock() {
					t.Error("open lock refused")
					return
				}
				n++
				l.Unlock()
			}
		}()
	}
	wg.Wait()
	if n != 8*2000 {
		t.Fatalf("counter %d, want %d", n, 8*2000)
	}
}

// Closing waits for the holder and refuses everyone after, including
// goroutines already waiting.
func TestLockClose(t *testing.T) {
	var l Lock
	if !l.Lock() {
		t.Fatal("zero Lock refused")
	}
	refused := make(chan bool)
	go func() { refused <- !l.Lock() }()
	runtime.Gosched()
	l.CloseUnlock()
	if !<-refused {
		t.Fatal("a waiter got a closed lock")
	}
	if l.Lock() || !l.Closed() {
		t.Fatal("closed lock acquired")
	}
}

func TestErrorsShared(t *testing.T) {
	e := NewErrors("t: post")
	a, b := e.Full(5), e.Full(5)
	if a != b {
		t.Fatal("Full(5) built twice")
	}
	pe, ok := verbs.IsPostError(a)
	if !ok || pe.Index != 5 || pe.Op != "t: post" || !errors.Is(a, verbs.ErrQueueFull) {
		t.Fatalf("Full(5) = %#v", a)
	}
	if n := testing.AllocsPerRun(100, func() { _ = e.Full(5); _ = e.Closed(); _ = e.State() }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
	if pe, _ := verbs.IsPostError(e.Full(fullCached + 3)); pe.Index != fullCached+3 {
		t.Fatalf("uncached index: %+v", pe)
	}
	if !errors.Is(e.Closed(), verbs.ErrClosed) || !errors.Is(e.State(), verbs.ErrQPState) {
		t.Fatal("Closed/State do not wrap their sentinels")
	}
}

func TestRecvRingFullAllocs(t *testing.T) {
	q, err := NewQueue(fakeQueue(t, 6, 4), RecvWQEHeader)
	if err != nil {
		t.Fatal(err)
	}
	r := NewRecvRing(q, 1, NewErrors("t"))
	wr := []verbs.RecvWR{{WRID: 1}, {WRID: 2}, {WRID: 3}, {WRID: 4}}
	if pe, _ := verbs.IsPostError(r.Post(wr)); pe == nil || pe.Index != 3 {
		t.Fatalf("4 into 3: %v", pe)
	}
	if n := testing.AllocsPerRun(100, func() {
		if !errors.Is(r.Post(wr), verbs.ErrQueueFull) {
			t.Fatal("not full")
		}
	}); n != 0 {
		t.Fatalf("queue-full post: %v allocations", n)
	}
	r.Shut()
	if n := testing.AllocsPerRun(100, func() {
		if !errors.Is(r.Post(wr), verbs.ErrClosed) {
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
	r := NewRecvRing(q, 1, NewErrors("t"))
	var (
		wg     sync.WaitGroup
		done   atomic.Bool
		posted atomic.Int64
	)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wr := []verbs.RecvWR{{WRID: 7}}
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
