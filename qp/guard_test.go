package qp_test

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/srq"
	"github.com/goverbs/goverbs/verbs"
)

// The errors a caller retries or meets in a loop cost no allocation: a
// full send or receive queue (the first one at each index is built once),
// a closed QP.
func TestErrorPathAllocs(t *testing.T) {
	p := testutil.NewPair(t, testutil.PairOptions{})
	// Fill B's receive queue: nothing consumes it.
	recv := []verbs.RecvWR{{WRID: 1, SGList: []verbs.SGE{testutil.SGE(p.B.MR, 0, 64)}}}
	t.Run("RecvQueueFull", func(t *testing.T) {
		fullQueueAllocs(t, "receive", "max_recv_wr", p.B.QP.Caps().MaxRecvWR, func() error { return p.B.QP.PostRecv(recv) })
	})
	send := []verbs.SendWR{testutil.Carry(t, p.B.QP, verbs.SendWR{WRID: 2, Opcode: verbs.WRSend}, []byte("rnr"))}
	t.Run("SendQueueFull", func(t *testing.T) {
		// Fill B's send queue: A has no receive posted and B's SENDs are
		// retried forever (RNR retry 7), so nothing completes. iWARP has
		// no receiver-not-ready retry: the SEND fails the connection.
		nt := p.Ctx.Device().NodeType
		testutil.SkipUnlessCap(t, nt.Transport() != verbs.TransportIWARP,
			fmt.Sprintf("RNR retry, to hold a send queue full, on transport %s (node type %d)", nt.Transport(), nt))
		fullQueueAllocs(t, "send", "max_send_wr", p.B.QP.Caps().MaxSendWR, func() error { return p.B.QP.PostSend(send) })
		if pe, ok := verbs.IsPostError(p.B.QP.PostSend(send)); !ok || pe.Index != 0 || !errors.Is(pe, verbs.ErrQueueFull) {
			t.Fatalf("full send queue: %v", pe)
		}
	})
	if err := p.A.QP.Close(); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() {
		if err := p.A.QP.PostSend(send); !errors.Is(err, verbs.ErrClosed) {
			t.Fatalf("PostSend after Close: %v", err)
		}
		if err := p.A.QP.PostRecv(recv); !errors.Is(err, verbs.ErrClosed) {
			t.Fatalf("PostRecv after Close: %v", err)
		}
	}); n != 0 {
		t.Errorf("posting to a closed QP: %v allocations per call", n)
	}
}

// fullQueueAllocs fills a queue of depth work requests (its QP's field)
// through post, and skips, naming that, where it never fills; a post to
// the full queue must then fail with ErrQueueFull and allocate nothing.
func fullQueueAllocs(t *testing.T, queue, field string, depth int, post func() error) {
	t.Helper()
	testutil.SkipUnlessCap(t, fillQueue(t, depth, post),
		fmt.Sprintf("a %s queue that fills (%d posts to a QP of %s %d without ErrQueueFull)", queue, fillLimit(depth), field, depth))
	if n := testing.AllocsPerRun(100, func() {
		if err := post(); !errors.Is(err, verbs.ErrQueueFull) {
			t.Fatalf("posting to a full %s queue: %v", queue, err)
		}
	}); n != 0 {
		t.Errorf("posting to a full %s queue: %v allocations per call", queue, n)
	}
}

// fillQueue posts until the queue of depth work requests is full and
// reports whether it filled within fillLimit(depth) posts: qemu's pvrdma
// device moves work requests off its rings into its backend's queues as
// they are posted (and completes with an error what the backend has no
// room for), so its rings never fill, and posting on floods the bed.
func fillQueue(t *testing.T, depth int, post func() error) bool {
	t.Helper()
	for i := 0; i < fillLimit(depth); i++ {
		err := post()
		if errors.Is(err, verbs.ErrQueueFull) {
			return true
		}
		if err != nil {
			t.Fatalf("filling a queue, post %d: %v", i, err)
		}
	}
	return false
}

// fillLimit is the number of posts that fill any ring of depth work
// requests that fills.
func fillLimit(depth int) int { return 16*depth + 16 }

// Many goroutines post sends and receives on one QP while others poll its
// CQs, query and modify it, resize its send CQ, and finally close it: every
// post either succeeds or fails with ErrQueueFull, until Close, after which
// every post fails with ErrClosed. Run under -race; a post into a ring
// Close unmapped would crash the test.
func TestPostWhileModifyResizeClose(t *testing.T) {
	p := testutil.NewPair(t, testutil.PairOptions{Caps: deepCaps, CQE: 1024})
	const senders, receivers = 4, 2
	var (
		wg     sync.WaitGroup
		closed atomic.Bool
		posts  atomic.Int64
		errc   = make(chan error, 16)
	)
	report := func(err error) {
		select {
		case errc <- err:
		default:
		}
	}
	// post runs f until the QP is closed; f must then fail with ErrClosed.
	post := func(f func() error) {
		defer wg.Done()
		for {
			wasClosed := closed.Load()
			err := f()
			switch {
			case err == nil:
				if wasClosed {
					report(errors.New("a post succeeded after Close returned"))
					return
				}
				posts.Add(1)
			case errors.Is(err, verbs.ErrClosed):
				return
			case errors.Is(err, verbs.ErrQueueFull):
				runtime.Gosched()
			default:
				report(err)
				return
			}
		}
	}
	for g := 0; g < senders; g++ {
		wg.Add(1)
		go func() {
			wrs := make([]verbs.SendWR, 4)
			for i := range wrs {
				wrs[i] = verbs.SendWR{Opcode: verbs.WRRDMAWrite, SGList: []verbs.SGE{testutil.SGE(p.A.MR, g*64, 64)},
					RemoteAddr: p.B.MR.IOVA() + uint64(g*64), RKey: p.B.MR.RKey()}
			}
			wrs[3].Flags = verbs.SendSignaled
			post(func() error { return p.A.QP.PostSend(wrs) })
		}()
	}
	for g := 0; g < receivers; g++ {
		wg.Add(1)
		go func() {
			wr := []verbs.RecvWR{{SGList: []verbs.SGE{testutil.SGE(p.A.MR, 4096, 64)}}}
			post(func() error { return p.A.QP.PostRecv(wr) })
		}()
	}
	// Poll the send CQ (and resize it) until the QP is gone.
	stop := make(chan struct{})
	var polls atomic.Int64 // non-empty polls
	var side sync.WaitGroup
	side.Add(3)
	go func() {
		defer side.Done()
		wc := make([]verbs.WorkCompletion, 16)
		for {
			select {
			case <-stop:
				return
			default:
			}
			n, err := p.A.SendCQ.Poll(wc)
			if err != nil {
				report(err)
				return
			}
			for _, w := range wc[:n] {
				if w.Status != verbs.WCSuccess && w.Status != verbs.WCWRFlushErr {
					report(errors.New("send completion: " + w.Status.String()))
				}
			}
			if n == 0 {
				runtime.Gosched()
			} else {
				polls.Add(1)
			}
		}
	}()
	go func() {
		defer side.Done()
		for i := 0; ; i++ {
			// Resize again only after the poller got a turn: a resize
			// holds the poll lock, and back-to-back resizes would
			// starve the poller until the CQ overflows.
			for seen := polls.Load(); polls.Load() == seen; runtime.Gosched() {
				select {
				case <-stop:
					return
				default:
				}
			}
			if err := p.A.SendCQ.Resize(2048 + (i%2)*2048); err != nil {
				if errors.Is(err, verbs.ErrNotCapable) {
					return // the device cannot resize CQs (siw)
				}
				report(err)
				return
			}
		}
	}()
	go func() {
		defer side.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			a, err := p.A.QP.Query()
			if err == nil {
				err = p.A.QP.Modify(&qp.Attr{Access: a.Access}, qp.MaskAccessFlags)
			}
			if errors.Is(err, verbs.ErrClosed) {
				return
			}
			if err != nil {
				report(err)
				return
			}
		}
	}()
	// Close once the posters made progress (a count, not a time). A send
	// queue that stops moving is a failure, except the one siw stall below.
	const stuck = 20 * time.Second // no post succeeded for this long
	last, lastMoved := posts.Load(), time.Now()
	for posts.Load() < 2000 {
		select {
		case err := <-errc:
			t.Fatal(err)
		default:
		}
		if n := posts.Load(); n != last {
			last, lastMoved = n, time.Now()
		} else if time.Since(lastMoved) > stuck {
			// siw strands a send queue that a MODIFY_QP races: as we read
			// it, its transmit worker resumes a flow-controlled queue with
			// a try-lock of the QP's state lock and drops the resume when
			// a MODIFY_QP holds the lock (siw_sq_resume, "Resume SQ while
			// QP locked"), and later doorbells do not restart a queue
			// whose WQE is in progress (docs/providers.md). Without the
			// modifying goroutine siw passes 2000 posts in under a
			// second. The test goes on to close the QP under the posters.
			if p.Ctx.Device().Driver != verbs.DriverSIW {
				t.Fatalf("no post succeeded for %v (%d posts)", stuck, n)
			}
			t.Logf("siw stranded the send queue under the concurrent MODIFY_QP after %d posts (a kernel limitation, docs/providers.md)", n)
			break
		}
		runtime.Gosched()
	}
	if err := p.A.QP.Close(); err != nil {
		t.Fatal(err)
	}
	closed.Store(true)
	wg.Wait()
	close(stop)
	side.Wait()
	select {
	case err := <-errc:
		t.Fatal(err)
	default:
	}
	t.Logf("%d posts before Close", posts.Load())
}

// Closing the Context while goroutines post on its QPs and SRQ: the posts
// end with ErrClosed, nothing crashes, and no doorbell is rung on a
// descriptor the Context closed (Close waits for doorbells in flight).
func TestPostWhileContextCloses(t *testing.T) {
	dev := testutil.Device(t)
	ctx, err := verbs.OpenDevice(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	s, err := srq.New(pd, srq.Attr{MaxWR: 64, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	pairs := []*testutil.Pair{
		testutil.NewPairIn(t, pd, testutil.PairOptions{Caps: deepCaps, CQE: 1024}),
		testutil.NewPairIn(t, pd, testutil.PairOptions{SRQ: s}),
	}
	buf, err := mr.New(pd, 4096, mr.LocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		posts atomic.Int64
		errc  = make(chan error, 16)
	)
	loop := func(f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				err := f()
				switch {
				case err == nil:
					posts.Add(1)
				case errors.Is(err, verbs.ErrClosed):
					return
				case errors.Is(err, verbs.ErrQueueFull):
					runtime.Gosched()
				default:
					errc <- err
					return
				}
			}
		}()
	}
	for _, p := range pairs {
		for _, side := range []*testutil.Side{&p.A, &p.B} {
			q, m := side.QP, side.MR
			wr := []verbs.SendWR{{Opcode: verbs.WRRDMAWrite, SGList: []verbs.SGE{testutil.SGE(m, 0, 64)}, RemoteAddr: m.IOVA(), RKey: m.RKey()}}
			loop(func() error { return q.PostSend(wr) })
			if q.SRQ() == nil {
				rwr := []verbs.RecvWR{{SGList: []verbs.SGE{testutil.SGE(m, 0, 64)}}}
				loop(func() error { return q.PostRecv(rwr) })
			}
		}
	}
	rwr := []verbs.RecvWR{{SGList: []verbs.SGE{testutil.SGE(buf, 0, 64)}}}
	loop(func() error { return s.PostRecv(rwr) })
	guard := time.Now().Add(5 * time.Minute)
	for posts.Load() < 1000 && time.Now().Before(guard) {
		runtime.Gosched()
	}
	if err := ctx.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	select {
	case err := <-errc:
		t.Fatal(err)
	default:
	}
	t.Logf("%d posts before Context.Close", posts.Load())
}
