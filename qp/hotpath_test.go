package qp_test

import (
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/kobj"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/srq"
	"github.com/goverbs/goverbs/uverbs"
	"github.com/goverbs/goverbs/verbs"
)

var deepCaps = qp.Caps{MaxSendWR: 512, MaxRecvWR: 512, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInlineData: 64}

// Post and poll allocate nothing.
func TestHotPathAllocs(t *testing.T) {
	p := testutil.NewPair(t, testutil.PairOptions{Caps: deepCaps, CQE: 1024})
	recv := []verbs.RecvWR{{WRID: 1, SGList: []verbs.SGE{testutil.SGE(p.B.MR, 0, 64)}}}
	if n := testing.AllocsPerRun(100, func() {
		if err := p.B.QP.PostRecv(recv); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("PostRecv: %v allocations per call", n)
	}

	send := []verbs.SendWR{{WRID: 2, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		SGList: []verbs.SGE{testutil.SGE(p.A.MR, 0, 64)}, RemoteAddr: p.B.MR.IOVA(), RKey: p.B.MR.RKey()}}
	if n := testing.AllocsPerRun(100, func() {
		if err := p.A.QP.PostSend(send); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("PostSend: %v allocations per call", n)
	}
	t.Run("inline", func(t *testing.T) {
		inline := []verbs.SendWR{{WRID: 3, Opcode: verbs.WRSendWithImm, Imm: 9, InlineData: []byte("inline")}}
		testutil.SkipUnlessInline(t, p.A.QP, len(inline[0].InlineData))
		if testutil.IWARP(p.Ctx) {
			inline[0].Opcode = verbs.WRSend // iWARP carries no immediate data
		}
		if n := testing.AllocsPerRun(50, func() {
			if err := p.A.QP.PostSend(inline); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("PostSend inline: %v allocations per call", n)
		}
	})

	// Wait until the 101 signaled writes have completed, then poll them
	// one by one.
	for deadline := time.Now().Add(60 * time.Second); p.A.SendCQ.Queued() < 101 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	// Else the measurement below would poll an empty CQ.
	if q := p.A.SendCQ.Queued(); q < 101 {
		t.Fatalf("%d of 101 signaled writes completed", q)
	}
	wc := make([]verbs.WorkCompletion, 1)
	if n := testing.AllocsPerRun(100, func() {
		if _, err := p.A.SendCQ.Poll(wc); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Poll: %v allocations per call", n)
	}
	if n := testing.AllocsPerRun(100, func() { p.A.SendCQ.Poll(wc) }); n != 0 {
		t.Errorf("Poll (empty): %v allocations per call", n)
	}
}

func TestPostValidation(t *testing.T) {
	p := testutil.NewPair(t, testutil.PairOptions{Caps: qp.Caps{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 2, MaxRecvSGE: 1, MaxInlineData: 32}})
	caps := p.A.QP.Caps()
	// The inline size asked for is a minimum the device may not grant
	// (the pvrdma device model grants 0): the cases below take the size
	// the QP got.
	if caps.MaxSendWR < 4 || caps.MaxRecvWR < 4 || caps.MaxSendSGE < 2 {
		t.Fatalf("caps %+v", caps)
	}
	sge := testutil.SGE(p.A.MR, 0, 8)
	// One byte of inline data is too large for a QP granted none, which
	// qp checks before it looks at the opcode's use of it.
	inlineRead := verbs.ErrBadOpcode
	if caps.MaxInlineData < 1 {
		inlineRead = verbs.ErrInlineTooLarge
	}
	good := testutil.Carry(t, p.A.QP, verbs.SendWR{Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		RemoteAddr: p.B.MR.IOVA(), RKey: p.B.MR.RKey()}, []byte("ok"))
	for _, tc := range []struct {
		name string
		wr   verbs.SendWR
		want error
	}{
		{"too many SGEs", verbs.SendWR{Opcode: verbs.WRSend, SGList: make([]verbs.SGE, caps.MaxSendSGE+1)}, verbs.ErrTooManySGE},
		{"inline too large", verbs.SendWR{Opcode: verbs.WRSend, InlineData: make([]byte, caps.MaxInlineData+1)}, verbs.ErrInlineTooLarge},
		{"unaligned atomic", verbs.SendWR{Opcode: verbs.WRAtomicFetchAndAdd, SGList: []verbs.SGE{sge}, RemoteAddr: p.B.MR.IOVA() + 4}, verbs.ErrBadAtomic},
		{"atomic of 16 bytes", verbs.SendWR{Opcode: verbs.WRAtomicCmpAndSwp, SGList: []verbs.SGE{testutil.SGE(p.A.MR, 0, 16)}}, verbs.ErrBadAtomic},
		{"memory window bind with data", verbs.SendWR{Opcode: verbs.WRBindMW, SGList: []verbs.SGE{sge}}, verbs.ErrBadOpcode},
		{"local invalidate with inline data", verbs.SendWR{Opcode: verbs.WRLocalInv, InlineData: []byte("x")}, verbs.ErrBadOpcode},
		{"RDMA FLUSH (kernel 6.2+)", verbs.SendWR{Opcode: 14}, verbs.ErrBadOpcode},
		{"ATOMIC WRITE with local memory", verbs.SendWR{Opcode: 15, SGList: []verbs.SGE{sge}}, verbs.ErrBadOpcode},
		{"garbage opcode", verbs.SendWR{Opcode: 0xdead}, verbs.ErrBadOpcode},
		{"inline read", verbs.SendWR{Opcode: verbs.WRRDMARead, InlineData: []byte("x")}, inlineRead},
	} {
		err := p.A.QP.PostSend([]verbs.SendWR{good, tc.wr})
		pe, isPE := verbs.IsPostError(err)
		// Without the capability (siw) FLUSH and ATOMIC WRITE are refused
		// as such.
		notCapable := (tc.wr.Opcode == verbs.WRFlush || tc.wr.Opcode == verbs.WRAtomicWrite) && errors.Is(err, verbs.ErrNotCapable)
		if !isPE || pe.Index != 1 || !(notCapable || errors.Is(err, tc.want) && errors.Is(err, unix.EINVAL)) {
			t.Errorf("%s: %v, want %v at index 1", tc.name, err, tc.want)
		}
		// The valid first work request was posted.
		testutil.Completions(t, p.A.SendCQ, 1)
	}

	// A full receive queue is an error, not an overwrite.
	var wrs []verbs.RecvWR
	for i := 0; i <= caps.MaxRecvWR; i++ {
		wrs = append(wrs, verbs.RecvWR{WRID: uint64(i), SGList: []verbs.SGE{testutil.SGE(p.B.MR, 0, 8)}})
	}
	err := p.B.QP.PostRecv(wrs)
	pe, ok := verbs.IsPostError(err)
	if !ok || pe.Index != caps.MaxRecvWR || !errors.Is(err, verbs.ErrQueueFull) || !errors.Is(err, unix.ENOMEM) {
		t.Fatalf("posting %d receives to a %d-deep RQ: %v", len(wrs), caps.MaxRecvWR, err)
	}
	// A full send queue likewise: more than the depth in one list.
	big := make([]verbs.SendWR, caps.MaxSendWR+1)
	for i := range big {
		big[i] = verbs.SendWR{WRID: uint64(i), Opcode: verbs.WRRDMAWrite, SGList: []verbs.SGE{sge}, RemoteAddr: p.B.MR.IOVA(), RKey: p.B.MR.RKey()}
	}
	fresh := testutil.NewPair(t, testutil.PairOptions{Caps: qp.Caps{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 2, MaxRecvSGE: 1}})
	big[0].SGList = []verbs.SGE{testutil.SGE(fresh.A.MR, 0, 8)}
	for i := range big {
		big[i].SGList, big[i].RemoteAddr, big[i].RKey = []verbs.SGE{testutil.SGE(fresh.A.MR, 0, 8)}, fresh.B.MR.IOVA(), fresh.B.MR.RKey()
	}
	err = fresh.A.QP.PostSend(big)
	if pe, ok := verbs.IsPostError(err); !ok || pe.Index != fresh.A.QP.Caps().MaxSendWR || !errors.Is(err, verbs.ErrQueueFull) {
		t.Fatalf("posting %d sends to a %d-deep SQ: %v", len(big), fresh.A.QP.Caps().MaxSendWR, err)
	}
}

func TestStateChecks(t *testing.T) {
	ctx := testutil.Open(t)
	testutil.SkipUnlessModifyConnects(t, ctx)
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	c, err := cq.New(ctx, cq.Options{CQE: 4})
	if err != nil {
		t.Fatal(err)
	}
	q, err := qp.New(pd, qp.Options{Type: qp.RC, SendCQ: c, RecvCQ: c, Caps: qp.Caps{MaxSendWR: 2, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.PostRecv([]verbs.RecvWR{{}}); !errors.Is(err, verbs.ErrQPState) {
		t.Errorf("PostRecv in RESET: %v", err)
	}
	if err := q.PostSend([]verbs.SendWR{{Opcode: verbs.WRSend}}); !errors.Is(err, verbs.ErrQPState) {
		t.Errorf("PostSend in RESET: %v", err)
	}
	// Skipping INIT is refused by the kernel.
	if err := q.ToRTR(qp.RTRAttr{Path: testutil.Path(t, ctx), MTU: verbs.MTU1024, DestQPN: q.QPN()}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("RESET→RTR: %v", err)
	}
	if err := q.ToInit(qp.InitAttr{Port: 1}); err != nil {
		t.Fatal(err)
	}
	if err := q.ToRTR(qp.RTRAttr{MTU: 9}); err == nil {
		t.Error("RTR with MTU 9 accepted")
	}
	if err := q.Modify(&qp.Attr{}, 1<<25); err == nil {
		t.Error("unknown mask bit accepted")
	}
	attr, err := q.Query()
	if err != nil {
		t.Fatal(err)
	}
	if attr.State != qp.Init || attr.Port != 1 || attr.Caps.MaxSendWR != q.Caps().MaxSendWR {
		t.Errorf("query: %+v, caps %+v", attr, q.Caps())
	}
	if _, err := qp.New(pd, qp.Options{Type: 9, SendCQ: c, RecvCQ: c}); err == nil {
		t.Error("QP type 9 accepted")
	}
	if _, err := qp.New(pd, qp.Options{Type: qp.RC}); err == nil {
		t.Error("QP without CQs accepted")
	}
	if _, err := qp.New(pd, qp.Options{Type: qp.RC, SendCQ: c, RecvCQ: c, Caps: qp.Caps{MaxSendWR: 1 << 30}}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("QP deeper than max_qp_wr: %v", err)
	}
}

// Posting from one goroutine while others poll, on both sides.
func TestConcurrentPostAndPoll(t *testing.T) {
	p := testutil.NewPair(t, testutil.PairOptions{Caps: deepCaps, CQE: 1024})
	msg := testutil.Carry(t, p.A.QP, verbs.SendWR{Opcode: verbs.WRSend, Flags: verbs.SendSignaled}, []byte("concurrent"))
	const n = 400
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	// Receiver: keep receives posted from one goroutine...
	posted := make(chan struct{}, n)
	wg.Add(4)
	go func() {
		defer wg.Done()
		for i := 0; i < n; i++ {
			for {
				err := p.B.QP.PostRecv([]verbs.RecvWR{{WRID: uint64(i), SGList: []verbs.SGE{testutil.SGE(p.B.MR, (i%64)*64, 64)}}})
				if err == nil {
					break
				}
				if !errors.Is(err, verbs.ErrQueueFull) {
					errs <- err
					return
				}
				runtime.Gosched()
			}
			posted <- struct{}{}
		}
	}()
	// ...and reap them from another.
	go func() {
		defer wg.Done()
		wc := make([]verbs.WorkCompletion, 16)
		for got := 0; got < n; {
			k, err := p.B.RecvCQ.Poll(wc)
			if err != nil {
				errs <- err
				return
			}
			for _, w := range wc[:k] {
				if w.Status != verbs.WCSuccess || w.WRID != uint64(got) {
					errs <- errors.New("receive out of order or failed: " + w.Status.String())
					return
				}
				got++
			}
			runtime.Gosched()
		}
	}()
	// Sender posts (only what the receiver has posted, RNR aside)...
	go func() {
		defer wg.Done()
		for i := 0; i < n; i++ {
			<-posted
			for {
				wr := msg
				wr.WRID = uint64(i)
				err := p.A.QP.PostSend([]verbs.SendWR{wr})
				if err == nil {
					break
				}
				if !errors.Is(err, verbs.ErrQueueFull) {
					errs <- err
					return
				}
				runtime.Gosched()
			}
		}
	}()
	// ...while its completions are polled elsewhere.
	go func() {
		defer wg.Done()
		wc := make([]verbs.WorkCompletion, 16)
		for got := 0; got < n; {
			k, err := p.A.SendCQ.Poll(wc)
			if err != nil {
				errs <- err
				return
			}
			for _, w := range wc[:k] {
				if w.Status != verbs.WCSuccess || w.WRID != uint64(got) {
					errs <- errors.New("send completion out of order or failed: " + w.Status.String())
					return
				}
				got++
			}
			runtime.Gosched()
		}
	}()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case err := <-errs:
		t.Fatal(err)
	case <-time.After(5 * time.Minute):
		t.Fatal("concurrent post/poll did not finish")
	}
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}

// 10,000 create/destroy cycles of MR, CQ, QP, SRQ and AH (a tenth of them
// outside the 6.12 stage: testutil.LeakCycles) leave no kernel objects,
// fds or goroutines behind.
func TestCreateDestroyCycles(t *testing.T) {
	dev := testutil.Device(t)
	ctx := testutil.Open(t)
	testutil.SkipUnlessQPType(t, ctx, qp.UD) // the cycles include UD address handles
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	path := testutil.Path(t, ctx)
	baseRes := testutil.Resources(t, dev)
	baseFDs := testutil.OpenFDs(t)
	baseG := runtime.NumGoroutine()
	cycles := testutil.LeakCycles(10000)
	for i := 0; i < cycles; i++ {
		m, err := mr.New(pd, 4096, mr.LocalWrite)
		if err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		c, err := cq.New(ctx, cq.Options{CQE: 4})
		if err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		s, err := srq.New(pd, srq.Attr{MaxWR: 4, MaxSGE: 1})
		if err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		q, err := qp.New(pd, qp.Options{Type: qp.RC, SendCQ: c, RecvCQ: c, SRQ: s, Caps: qp.Caps{MaxSendWR: 4, MaxSendSGE: 1}})
		if err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		ah, err := pd.CreateAH(&path)
		testutil.SkipIfNotCapable(t, err, "address handles (CREATE_AH)")
		if err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		for _, o := range []interface{ Close() error }{q, s, c, ah, m} {
			if err := o.Close(); err != nil {
				t.Fatalf("cycle %d: close %T: %v", i, o, err)
			}
		}
	}
	if got := testutil.Resources(t, dev); !cmp.Equal(got, baseRes) {
		t.Errorf("after %d cycles kernel objects %v, before %v", cycles, got, baseRes)
	}
	if got := testutil.OpenFDs(t); got != baseFDs {
		t.Errorf("after %d cycles %d fds, before %d", cycles, got, baseFDs)
	}
	if got := runtime.NumGoroutine(); got > baseG {
		t.Errorf("after %d cycles %d goroutines, before %d", cycles, got, baseG)
	}
	for _, k := range []kobj.Kind{kobj.KindQP, kobj.KindSRQ, kobj.KindCQ, kobj.KindAH, kobj.KindMR} {
		if n := kobj.ContextOf(ctx).Count(k); n != 0 {
			t.Errorf("context still tracks %d objects of kind %d", n, k)
		}
	}
}

// Context.Close tears down a populated context in the right order.
func TestContextCloseWithEverything(t *testing.T) {
	dev := testutil.Device(t)
	base := testutil.Resources(t, dev)
	ctx, err := verbs.OpenDevice(dev)
	if err != nil {
		t.Fatal(err)
	}
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	s, err := srq.New(pd, srq.Attr{MaxWR: 4, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	testutil.NewPairIn(t, pd, testutil.PairOptions{Channel: true})
	testutil.NewPairIn(t, pd, testutil.PairOptions{Type: qp.UD, SRQ: s})
	path := testutil.Path(t, ctx)
	if _, err := pd.CreateAH(&path); err != nil {
		testutil.SkipIfNotCapable(t, err, "address handles (CREATE_AH)")
		t.Fatal(err)
	}
	if err := ctx.Close(); err != nil {
		t.Fatal(err)
	}
	if got := testutil.Resources(t, dev); !cmp.Equal(got, base) {
		t.Fatalf("after Context.Close: %v, before %v", got, base)
	}
}

func BenchmarkPostRecv(b *testing.B) {
	p := testutil.NewPair(b, testutil.PairOptions{Caps: deepCaps})
	recv := []verbs.RecvWR{{WRID: 1, SGList: []verbs.SGE{testutil.SGE(p.B.MR, 0, 64)}}}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := p.B.QP.PostRecv(recv); err != nil {
			// Ring full: drain it by resetting the QP's queues.
			b.StopTimer()
			p.B.QP.ToReset()
			p.B.QP.ToInit(qp.InitAttr{Port: 1})
			b.StartTimer()
		}
	}
}

func BenchmarkPollEmpty(b *testing.B) {
	p := testutil.NewPair(b, testutil.PairOptions{})
	wc := make([]verbs.WorkCompletion, 16)
	b.ReportAllocs()
	for b.Loop() {
		p.A.SendCQ.Poll(wc)
	}
}

// BenchmarkWriteRoundTrip posts a signaled 64-byte RDMA WRITE and polls
// until it completes: doorbell, the rxe requester and responder, the ACK.
func BenchmarkWriteRoundTrip(b *testing.B) {
	p := testutil.NewPair(b, testutil.PairOptions{Caps: deepCaps})
	send := []verbs.SendWR{{Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		SGList: []verbs.SGE{testutil.SGE(p.A.MR, 0, 64)}, RemoteAddr: p.B.MR.IOVA(), RKey: p.B.MR.RKey()}}
	wc := make([]verbs.WorkCompletion, 1)
	b.ReportAllocs()
	for b.Loop() {
		if err := p.A.QP.PostSend(send); err != nil {
			b.Fatal(err)
		}
		for {
			n, _ := p.A.SendCQ.Poll(wc)
			if n == 1 {
				break
			}
		}
	}
}

// uverbs refuses write(2) commands, the doorbell among them, from a thread
// whose credentials changed since the device was opened; the error says
// so. Other threads keep posting.
func TestPostFromThreadWithOtherCredentials(t *testing.T) {
	p := testutil.NewPair(t, testutil.PairOptions{})
	wr := []verbs.SendWR{testutil.Carry(t, p.A.QP, verbs.SendWR{Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		RemoteAddr: p.B.MR.IOVA(), RKey: p.B.MR.RKey()}, []byte("x"))}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			errc <- err
			return
		}
		// Setting the same capabilities still gives the thread new
		// credentials.
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			errc <- err
			return
		}
		errc <- p.A.QP.PostSend(wr)
	}()
	if err := <-errc; !errors.Is(err, uverbs.ErrForeignCredentials) || !errors.Is(err, unix.EACCES) {
		t.Fatalf("post from a thread with new credentials: %v", err)
	}
	// The work request is in the queue (only the doorbell failed): the
	// next doorbell from a good thread sends both.
	if err := p.A.QP.PostSend(wr); err != nil {
		t.Fatal(err)
	}
	testutil.Completions(t, p.A.SendCQ, 2)
}
