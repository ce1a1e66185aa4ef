package cq_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/verbs"
)

func write(t *testing.T, p *testutil.Pair, wrid uint64, signaled bool) {
	t.Helper()
	wr := verbs.SendWR{WRID: wrid, Opcode: verbs.WRRDMAWrite, SGList: []verbs.SGE{testutil.SGE(p.A.MR, 0, 8)},
		RemoteAddr: p.B.MR.IOVA(), RKey: p.B.MR.RKey()}
	if signaled {
		wr.Flags = verbs.SendSignaled
	}
	if err := p.A.QP.PostSend([]verbs.SendWR{wr}); err != nil {
		t.Fatal(err)
	}
}

func TestCreateCapacityAndResize(t *testing.T) {
	ctx := testutil.Open(t)
	c, err := cq.New(ctx, cq.Options{CQE: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// rxe: slots = roundup_pow2(cqe+1), one kept empty (fact sheet §4.4);
	// siw: roundup_pow2(cqe), every slot usable. Either holds at least 8.
	if c.CQE() < 8 || c.CQE() > 15 {
		t.Errorf("CQE(8) gave capacity %d, want 8..15", c.CQE())
	}
	err = c.Resize(64)
	skipUnlessResize(t, err)
	if err != nil {
		t.Fatal(err)
	}
	if c.CQE() != 127 {
		t.Errorf("resize to 64 gave capacity %d, want 127", c.CQE())
	}
	for _, bad := range []cq.Options{{CQE: 0}, {CQE: -3}, {CQE: 4, CompVector: 99}} {
		if _, err := cq.New(ctx, bad); err == nil {
			t.Errorf("cq.New(%+v) succeeded", bad)
		}
	}
	if _, err := cq.New(ctx, cq.Options{CQE: 1 << 20}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("a CQ beyond max_cqe: %v, want EINVAL", err)
	}
}

// skipUnlessResize skips a test of RESIZE_CQ when the device has none
// (cq.Resize reports verbs.ErrNotCapable: siw's kernel driver has no
// resize_cq, and its ABI no way to remap a CQ).
func skipUnlessResize(t *testing.T, err error) {
	t.Helper()
	testutil.SkipUnlessCap(t, !errors.Is(err, verbs.ErrNotCapable), "CQ resize (RESIZE_CQ: "+fmt.Sprint(err)+")")
}

func TestResizeKeepsCompletions(t *testing.T) {
	p := testutil.NewPair(t, testutil.PairOptions{CQE: 8})
	for i := 0; i < 5; i++ {
		write(t, p, uint64(i), true)
	}
	// Let them all arrive, then grow the CQ under them.
	waitQueued(t, p.A.SendCQ, 5)
	err := p.A.SendCQ.Resize(100)
	skipUnlessResize(t, err)
	if err != nil {
		t.Fatal(err)
	}
	wcs := testutil.Completions(t, p.A.SendCQ, 5)
	for i, wc := range wcs {
		if wc.WRID != uint64(i) || wc.Status != verbs.WCSuccess {
			t.Fatalf("completion %d after resize: %+v", i, wc)
		}
	}
	// And it keeps working.
	write(t, p, 9, true)
	if wc := testutil.Completions(t, p.A.SendCQ, 1)[0]; wc.WRID != 9 {
		t.Fatalf("after resize: %+v", wc)
	}
	// Shrinking below what is queued is refused.
	for i := 0; i < 4; i++ {
		write(t, p, uint64(i), true)
	}
	waitQueued(t, p.A.SendCQ, 4)
	if err := p.A.SendCQ.Resize(1); !errors.Is(err, unix.EINVAL) {
		t.Errorf("shrinking under 4 queued completions: %v", err)
	}
}

func TestPollIsFIFOAndPartial(t *testing.T) {
	p := testutil.NewPair(t, testutil.PairOptions{})
	for i := 0; i < 6; i++ {
		write(t, p, uint64(i), true)
	}
	got := testutil.Completions(t, p.A.SendCQ, 2) // a 2-slot slice: partial polls
	got = append(got, testutil.Completions(t, p.A.SendCQ, 4)...)
	for i, wc := range got {
		if wc.WRID != uint64(i) {
			t.Fatalf("completion %d has wr_id %d: not FIFO", i, wc.WRID)
		}
	}
	wc := make([]verbs.WorkCompletion, 4)
	if n, err := p.A.SendCQ.Poll(wc); n != 0 || err != nil {
		t.Fatalf("empty CQ: %d %v", n, err)
	}
	if n, err := p.A.SendCQ.Poll(nil); n != 0 || err != nil {
		t.Fatalf("nil slice: %d %v", n, err)
	}
}

func TestWaitOnChannel(t *testing.T) {
	p := testutil.NewPair(t, testutil.PairOptions{Channel: true})
	c := p.A.SendCQ
	// Armed before the completion, the CQ queues exactly one event:
	// reading it counts (acknowledges) it. This runs first, while no
	// earlier Wait can have left an unread event on the channel.
	if c.Events() != 0 {
		t.Fatalf("new CQ has counted %d events", c.Events())
	}
	if err := c.ReqNotify(false); err != nil {
		t.Fatal(err)
	}
	write(t, p, 3, true)
	if got, err := cq.WaitChannel(timeout(t), c.Channel()); err != nil || got != c {
		t.Fatalf("WaitChannel: %v", err)
	}
	if c.Events() != 1 {
		t.Errorf("events counted: %d, want 1", c.Events())
	}
	testutil.Completions(t, c, 1)
	// Nothing queued: the wait times out with the context's error.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := c.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait on an idle CQ: %v", err)
	}
	// A completion arriving while we wait wakes us. (Whether Wait is
	// already blocked when it arrives or sees it in its re-check after
	// arming, it must return.)
	done := make(chan error, 1)
	go func() { done <- c.Wait(context.Background()) }()
	testutil.WaitParked(t, "cq.(*CQ).Wait")
	write(t, p, 1, true)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	testutil.Completions(t, c, 1)
	// A completion that arrived before Wait armed the CQ is not lost.
	write(t, p, 2, true)
	waitQueued(t, c, 1)
	if err := c.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	testutil.Completions(t, c, 1)
}

// Bursts of completions with waits in between: no wake-up may be lost.
func TestWaitBursts(t *testing.T) {
	p := testutil.NewPair(t, testutil.PairOptions{Channel: true, CQE: 256})
	c := p.A.SendCQ
	wc := make([]verbs.WorkCompletion, 32)
	total, want := 0, 0
	for burst := 1; burst <= 12; burst++ {
		for i := 0; i < burst; i++ {
			write(t, p, uint64(want), true)
			want++
		}
		for total < want {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			err := c.Wait(ctx)
			cancel()
			if err != nil {
				t.Fatalf("burst %d: %d of %d completions, then %v", burst, total, want, err)
			}
			for {
				n, err := c.Poll(wc)
				if err != nil {
					t.Fatal(err)
				}
				if n == 0 {
					break
				}
				for _, w := range wc[:n] {
					if w.WRID != uint64(total) {
						t.Fatalf("wr_id %d, want %d", w.WRID, total)
					}
					total++
				}
			}
		}
	}
}

// Several CQs share one channel: WaitChannel names the right one, and an
// event read for another CQ is kept for that CQ's Wait.
func TestSharedChannel(t *testing.T) {
	p := testutil.NewPair(t, testutil.PairOptions{Channel: true})
	ch := p.A.SendCQ.Channel()
	if p.B.RecvCQ.Channel() != ch {
		t.Fatal("pair CQs do not share the channel")
	}
	for _, c := range []*cq.CQ{p.A.SendCQ, p.B.RecvCQ} {
		if err := c.ReqNotify(false); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.B.QP.PostRecv([]verbs.RecvWR{{WRID: 1, SGList: []verbs.SGE{testutil.SGE(p.B.MR, 0, 64)}}}); err != nil {
		t.Fatal(err)
	}
	if err := p.A.QP.PostSend([]verbs.SendWR{testutil.Carry(t, p.A.QP, verbs.SendWR{WRID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled}, []byte("hi"))}); err != nil {
		t.Fatal(err)
	}
	seen := map[*cq.CQ]bool{}
	for len(seen) < 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		c, err := cq.WaitChannel(ctx, ch)
		cancel()
		if err != nil {
			t.Fatalf("after %d CQs: %v", len(seen), err)
		}
		seen[c] = true
	}
	if !seen[p.A.SendCQ] || !seen[p.B.RecvCQ] {
		t.Fatalf("events named the wrong CQs: %v", seen)
	}
	testutil.Completions(t, p.A.SendCQ, 1)
	testutil.Completions(t, p.B.RecvCQ, 1)
	if fd := ch.FD(); fd < 0 {
		t.Error("channel fd not exposed")
	}
}

// Overrunning a CQ raises the CQ error async event, naming the CQ.
func TestOverrunRaisesCQErr(t *testing.T) {
	p := testutil.NewPair(t, testutil.PairOptions{CQE: 3})
	c := p.A.SendCQ
	if c.CQE() < 3 || c.CQE() > 4 { // rxe: exactly 3; siw: rounded up to 4
		t.Fatalf("capacity %d", c.CQE())
	}
	for i := 0; i < 2*c.CQE(); i++ {
		write(t, p, uint64(i), true)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ev, err := p.Ctx.Event(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type != verbs.EventCQErr || ev.Element != c.UserHandle() || ev.Object != c {
		t.Fatalf("event %v (object %T), want CQ error on %d", ev, ev.Object, c.UserHandle())
	}
	if ev.Type.String() != "CQ error" {
		t.Errorf("event text %q", ev.Type)
	}
}

func TestClosedAndBusy(t *testing.T) {
	p := testutil.NewPair(t, testutil.PairOptions{})
	// A CQ in use by a QP cannot be destroyed.
	if err := p.A.SendCQ.Close(); !errors.Is(err, unix.EBUSY) {
		t.Fatalf("closing a CQ used by a QP: %v, want EBUSY", err)
	}
	if err := p.A.QP.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.A.SendCQ.Close(); err != nil {
		t.Fatal(err)
	}
	wc := make([]verbs.WorkCompletion, 1)
	if _, err := p.A.SendCQ.Poll(wc); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("Poll after Close: %v", err)
	}
	if err := p.A.SendCQ.Resize(10); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("Resize after Close: %v", err)
	}
	if err := p.A.SendCQ.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	err := p.A.QP.PostSend([]verbs.SendWR{{Opcode: verbs.WRSend, InlineData: []byte("x")}})
	if !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("PostSend after Close: %v", err)
	}
	if err := p.A.QP.PostRecv([]verbs.RecvWR{{}}); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("PostRecv after Close: %v", err)
	}
	if err := p.A.QP.ToError(); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("Modify after Close: %v", err)
	}
	if _, err := p.A.QP.Query(); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("Query after Close: %v", err)
	}
	// A CQ without a channel cannot be armed.
	if err := p.B.SendCQ.ReqNotify(false); err == nil {
		t.Error("ReqNotify without a channel succeeded")
	}
	// qp.New with a closed CQ fails cleanly.
	if _, err := qp.New(p.PD, qp.Options{Type: qp.RC, SendCQ: p.A.SendCQ, RecvCQ: p.A.SendCQ, Caps: qp.Caps{MaxSendWR: 1}}); err == nil {
		t.Error("qp.New on a destroyed CQ succeeded")
	}
}

// Armed for solicited completions only, the CQ ignores an unsolicited
// receive and fires for a solicited one.
func TestReqNotifySolicitedOnly(t *testing.T) {
	p := testutil.NewPair(t, testutil.PairOptions{Channel: true})
	// siw (the one iWARP device here) completes every receive as
	// "signaled" in siw_rqe_complete, so a CQ armed for solicited
	// completions never fires for a receive (kernel 6.1 and 6.12).
	testutil.SkipUnlessCap(t, !testutil.IWARP(p.Ctx), "solicited-only completion events for receives (transport iWARP: siw never raises them)")
	c := p.B.RecvCQ
	for i := 0; i < 2; i++ {
		if err := p.B.QP.PostRecv([]verbs.RecvWR{{WRID: uint64(i), SGList: []verbs.SGE{testutil.SGE(p.B.MR, i*64, 64)}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.ReqNotify(true); err != nil {
		t.Fatal(err)
	}
	send := func(flags verbs.SendFlags) {
		if err := p.A.QP.PostSend([]verbs.SendWR{testutil.Carry(t, p.A.QP, verbs.SendWR{Opcode: verbs.WRSend, Flags: verbs.SendSignaled | flags}, []byte("s"))}); err != nil {
			t.Fatal(err)
		}
	}
	send(0)
	testutil.Completions(t, p.A.SendCQ, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, err := cq.WaitChannel(ctx, c.Channel())
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("unsolicited receive notified a solicited-only CQ: %v", err)
	}
	send(verbs.SendSolicited)
	ctx, cancel = context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	got, err := cq.WaitChannel(ctx, c.Channel())
	if err != nil || got != c {
		t.Fatalf("solicited receive: %v (%p, want %p)", err, got, c)
	}
	testutil.Completions(t, c, 2)
}

// Events of CQs sharing a channel come back in the order they happened,
// even when one wait drains several.
func TestSharedChannelOrder(t *testing.T) {
	p := testutil.NewPair(t, testutil.PairOptions{Channel: true})
	ch := p.A.SendCQ.Channel()
	msg := []verbs.SendWR{testutil.Carry(t, p.A.QP, verbs.SendWR{Opcode: verbs.WRSend}, []byte("o"))}
	for round := 0; round < 20; round++ {
		for _, c := range []*cq.CQ{p.A.SendCQ, p.B.RecvCQ} {
			if err := c.ReqNotify(false); err != nil {
				t.Fatal(err)
			}
		}
		// First a send completion on A's send CQ (a WRITE needs no
		// receive), then, once its event is queued on the channel, a
		// receive on B.
		write(t, p, uint64(round), true)
		waitReadable(t, ch)
		if err := p.B.QP.PostRecv([]verbs.RecvWR{{SGList: []verbs.SGE{testutil.SGE(p.B.MR, 0, 8)}}}); err != nil {
			t.Fatal(err)
		}
		if err := p.A.QP.PostSend(msg); err != nil {
			t.Fatal(err)
		}
		// Usually both events are queued by now and one wait drains
		// them; either way the order must hold.
		waitQueued(t, p.B.RecvCQ, 1)
		for i, want := range []*cq.CQ{p.A.SendCQ, p.B.RecvCQ} {
			got, err := cq.WaitChannel(timeout(t), ch)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("round %d: event %d named the wrong CQ", round, i)
			}
		}
		testutil.Completions(t, p.A.SendCQ, 1)
		testutil.Completions(t, p.B.RecvCQ, 1)
	}
}

// waitReadable waits until ch has an event queued (poll(2) on its fd).
func waitReadable(t *testing.T, ch *verbs.CompChannel) {
	t.Helper()
	pfd := []unix.PollFd{{Fd: int32(ch.FD()), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(pfd, 60_000)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n != 1 {
			t.Fatalf("waiting for a completion event: %d %v", n, err)
		}
		return
	}
}

func timeout(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitQueued waits until c holds n completions (guarding against a hang
// only).
func waitQueued(t *testing.T, c *cq.CQ, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for c.Queued() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d completions queued", c.Queued(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// Close releases a goroutine parked in Wait with ErrClosed, at once, not
// when its context ends.
func TestCloseReleasesWait(t *testing.T) {
	ctx := testutil.Open(t)
	ch, err := ctx.NewCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	c, err := cq.New(ctx, cq.Options{CQE: 4, Channel: ch})
	if err != nil {
		t.Fatal(err)
	}
	wctx := timeout(t)
	done := make(chan error, 1)
	go func() { done <- c.Wait(wctx) }()
	testutil.WaitParked(t, "cq.(*CQ).Wait")
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, verbs.ErrClosed) || wctx.Err() != nil {
		t.Fatalf("Wait parked when its CQ closed: %v (context: %v), want ErrClosed", err, wctx.Err())
	}
	if err := c.Wait(wctx); !errors.Is(err, verbs.ErrClosed) {
		t.Fatalf("Wait on a closed CQ: %v", err)
	}
}

// Closing a completion channel releases a goroutine parked on it with
// verbs.ErrClosed, the one closed error.
func TestChannelCloseReleasesWaitChannel(t *testing.T) {
	ctx := testutil.Open(t)
	ch, err := ctx.NewCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	c, err := cq.New(ctx, cq.Options{CQE: 4, Channel: ch})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.ReqNotify(false); err != nil {
		t.Fatal(err)
	}
	wctx := timeout(t)
	done := make(chan error, 1)
	go func() {
		_, err := cq.WaitChannel(wctx, ch)
		done <- err
	}()
	testutil.WaitParked(t, "cq.WaitChannel")
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, verbs.ErrClosed) || wctx.Err() != nil {
		t.Fatalf("WaitChannel parked when its channel closed: %v (context: %v), want verbs.ErrClosed", err, wctx.Err())
	}
	if _, err := cq.WaitChannel(wctx, ch); !errors.Is(err, verbs.ErrClosed) {
		t.Fatalf("WaitChannel on a closed channel: %v", err)
	}
}
