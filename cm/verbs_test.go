package cm_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cm"
	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/verbs"
)

// connectEndpoints connects two endpoints over rdma_cm on the test device.
func connectEndpoints(t *testing.T) (cli, srv *cm.Queues, cliMR, srvMR *mr.MR) {
	t.Helper()
	srvCh, cliCh := channel(t), channel(t)
	l, addr := listen(t, srvCh, cm.TCP)
	caps := qp.Caps{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 64}
	type res struct {
		e   *cm.Queues
		m   *mr.MR
		err error
	}
	done := make(chan res, 1)
	go func() {
		id, _, err := l.GetRequest(timeout(t))
		if err != nil {
			done <- res{err: err}
			return
		}
		e, err := id.NewQueues(nil, caps)
		if err != nil {
			done <- res{err: err}
			return
		}
		m, err := mr.New(e.PD(), 64<<10, mr.LocalWrite|mr.RemoteWrite|mr.RemoteRead)
		if err != nil {
			done <- res{err: err}
			return
		}
		done <- res{e, m, id.Accept(timeout(t), cm.ConnParam{ResponderResources: 1, InitiatorDepth: 1})}
	}()
	id := dial(t, cliCh, cm.TCP, addr)
	var err error
	if cli, err = id.NewQueues(nil, caps); err != nil {
		t.Fatal(err)
	}
	if cliMR, err = mr.New(cli.PD(), 64<<10, mr.LocalWrite|mr.RemoteWrite|mr.RemoteRead); err != nil {
		t.Fatal(err)
	}
	if _, err := id.Connect(timeout(t), cm.ConnParam{ResponderResources: 1, InitiatorDepth: 1}); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	return cli, r.e, cliMR, r.m
}

func TestEndpointHelpers(t *testing.T) {
	cli, srv, cm1, cm2 := connectEndpoints(t)
	buf := cm2.Bytes()
	// A completion posted earlier is returned at once.
	if err := srv.PostRecv(1, buf[:128], cm2); err != nil {
		t.Fatal(err)
	}
	copy(cm1.Bytes(), "early")
	if err := cli.PostSend(10, cm1.Bytes()[:5], cm1, verbs.SendSignaled); err != nil {
		t.Fatal(err)
	}
	if wc, err := cli.GetSendComp(timeout(t)); err != nil || wc.WRID != 10 || wc.Status != verbs.WCSuccess {
		t.Fatalf("send completion %+v %v", wc, err)
	}
	waitQueued(t, srv.RecvCQ())
	wc, err := srv.GetRecvComp(timeout(t))
	if err != nil || wc.WRID != 1 || string(buf[:wc.ByteLen]) != "early" {
		t.Fatalf("early receive %+v %q %v", wc, buf[:wc.ByteLen], err)
	}
	// A later one is waited for.
	if err := srv.PostRecv(2, buf[128:256], cm2); err != nil {
		t.Fatal(err)
	}
	type comp struct {
		wc  verbs.WorkCompletion
		err error
	}
	late := make(chan comp, 1)
	go func() {
		wc, err := srv.GetRecvComp(timeout(t))
		late <- comp{wc, err}
	}()
	testutil.WaitParked(t, "cm.(*Queues).GetRecvComp")
	if err := cli.PostSend(11, []byte("late"), nil, verbs.SendInline|verbs.SendSignaled); err != nil {
		t.Fatal(err)
	}
	if r := <-late; r.err != nil || r.wc.WRID != 2 || r.wc.Status != verbs.WCSuccess || string(buf[128:128+r.wc.ByteLen]) != "late" {
		t.Fatalf("late receive %+v %v", r.wc, r.err)
	}
	if wc, err := cli.GetSendComp(timeout(t)); err != nil || wc.WRID != 11 || wc.Status != verbs.WCSuccess {
		t.Fatalf("late send's completion %+v %v", wc, err)
	}
	// A cancelled wait returns the context's error.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := srv.GetRecvComp(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("GetRecvComp with nothing coming: %v", err)
	}
	// RDMA read and write helpers.
	copy(buf[1000:], "remote-bytes")
	if err := cli.PostRead(12, cm1.Bytes()[500:512], cm1, verbs.SendSignaled, cm2.IOVA()+1000, cm2.RKey()); err != nil {
		t.Fatal(err)
	}
	if wc, err := cli.GetSendComp(timeout(t)); err != nil || wc.Status != verbs.WCSuccess || wc.Opcode != verbs.WCRDMARead || string(cm1.Bytes()[500:512]) != "remote-bytes" {
		t.Fatalf("read %+v %v", wc, err)
	}
	if err := cli.PostWrite(13, cm1.Bytes()[500:512], cm1, verbs.SendSignaled, cm2.IOVA()+2000, cm2.RKey()); err != nil {
		t.Fatal(err)
	}
	if wc, err := cli.GetSendComp(timeout(t)); err != nil || wc.Status != verbs.WCSuccess || wc.Opcode != verbs.WCRDMAWrite {
		t.Fatalf("write %+v %v", wc, err)
	}
	// A write's completion says the source may be reused, not that the
	// data is placed: iWARP (siw) completes it once it is sent. A READ
	// after it returns once the responder placed the write before it.
	if err := cli.PostRead(14, cm1.Bytes()[600:612], cm1, verbs.SendSignaled, cm2.IOVA()+2000, cm2.RKey()); err != nil {
		t.Fatal(err)
	}
	if wc, err := cli.GetSendComp(timeout(t)); err != nil || wc.Status != verbs.WCSuccess || wc.WRID != 14 {
		t.Fatalf("read after write %+v %v", wc, err)
	}
	if got, back := string(buf[2000:2012]), string(cm1.Bytes()[600:612]); got != "remote-bytes" || back != got {
		t.Fatalf("written %q, read back %q", got, back)
	}
	// A buffer outside the region is refused.
	if err := cli.PostSend(1, make([]byte, 8), cm1, 0); err == nil {
		t.Error("buffer outside the MR accepted")
	}
	// A completion that failed comes with its error, as cq.CQ.Next
	// returns it: a READ with a key the peer never gave out. Last, as it
	// moves the QP to the error state.
	if err := cli.PostRead(15, cm1.Bytes()[:8], cm1, verbs.SendSignaled, cm2.IOVA(), cm2.RKey()^0xff); err != nil {
		t.Fatal(err)
	}
	wc, err = cli.GetSendComp(timeout(t))
	var wcErr *verbs.WCError
	if !errors.As(err, &wcErr) || wcErr.WRID != 15 || wc.WRID != 15 || wc.Status == verbs.WCSuccess || wcErr.Status != wc.Status {
		t.Fatalf("READ with a bad key: completion %+v, error %v; want the completion and its *verbs.WCError", wc, err)
	}
}

// Bursts: every receive is reported exactly once, however completions and
// waits interleave.
func TestGetRecvCompBursts(t *testing.T) {
	cli, srv, cm1, cm2 := connectEndpoints(t)
	const total = 200
	for i := 0; i < 60; i++ {
		if err := srv.PostRecv(uint64(i), cm2.Bytes()[i*64:(i+1)*64], cm2); err != nil {
			t.Fatal(err)
		}
	}
	sent := make(chan error, 1)
	go func() {
		// Bursts of 1 to 7 sends with pauses between them, so that
		// receives are found queued, and waited for, in every mix.
		for i, burst := 0, 1; i < total; burst = burst%7 + 1 {
			for j := 0; j < burst && i < total; j++ {
				if err := cli.PostSend(uint64(i), cm1.Bytes()[:8], cm1, 0); err != nil {
					sent <- fmt.Errorf("send %d: %w", i, err)
					return
				}
				i++
			}
			time.Sleep(time.Duration(burst) * time.Millisecond)
		}
		sent <- nil
	}()
	defer func() {
		if err := <-sent; err != nil {
			t.Error(err)
		}
	}()
	for i := 0; i < total; i++ {
		wc, err := srv.GetRecvComp(timeout(t))
		if err != nil {
			t.Fatalf("receive %d: %v", i, err)
		}
		if wc.Status != verbs.WCSuccess || wc.WRID != uint64(i%60) {
			t.Fatalf("receive %d: %+v", i, wc)
		}
		if err := srv.PostRecv(wc.WRID, cm2.Bytes()[wc.WRID*64:(wc.WRID+1)*64], cm2); err != nil {
			t.Fatal(err)
		}
	}
}

// GetRecvComp that waits on the completion channel, with a cancellable
// context as a server loop would use, allocates nothing (after its first
// wait with that context).
func TestGetRecvCompAllocs(t *testing.T) {
	cli, srv, cm1, cm2 := connectEndpoints(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// With one P, the sender runs only once the receiver has parked (or
	// is in a system call), so nearly every receive waits on the channel;
	// the event count below proves that some did.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	send, sent := make(chan struct{}, 1), make(chan error, 1)
	go func() {
		for range send {
			sent <- cli.PostSend(1, cm1.Bytes()[:8], cm1, 0)
		}
	}()
	defer close(send)
	recv := func() {
		if err := srv.PostRecv(1, cm2.Bytes()[:64], cm2); err != nil {
			t.Fatal(err)
		}
		send <- struct{}{}
		wc, err := srv.GetRecvComp(ctx)
		if err != nil || wc.Status != verbs.WCSuccess {
			t.Fatalf("receive: %+v %v", wc, err)
		}
		if err := <-sent; err != nil {
			t.Fatal(err)
		}
	}
	for range 3 { // warm up: the first wait registers ctx
		recv()
	}
	before := srv.RecvCQ().Events()
	n := testing.AllocsPerRun(50, recv)
	waited := srv.RecvCQ().Events() - before
	t.Logf("%d of 51 receives waited on the completion channel", waited)
	// In race builds arming the CQ allocates its command buffer (see
	// raceBuild): one allocation per wait, and nothing else.
	want := 0.0
	if raceBuild {
		want = 1
	}
	if n > want {
		t.Errorf("PostRecv + GetRecvComp waiting on the channel: %v allocations, want at most %v", n, want)
	}
	if waited == 0 {
		t.Fatal("no GetRecvComp waited on the channel: the wait path was not measured")
	}
}

// waitQueued waits until c holds a completion.
func waitQueued(t *testing.T, c *cq.CQ) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for c.Queued() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no completion queued")
		}
		runtime.Gosched()
	}
}

// Queues.Close deregisters the regions NewMR made; one registered on its
// PD otherwise keeps the PD from being deallocated until it is closed.
func TestQueuesCloseMRs(t *testing.T) {
	ch := channel(t)
	_, addr := listen(t, ch, cm.TCP)
	id := dial(t, ch, cm.TCP, addr)
	q, err := id.NewQueues(nil, qp.Caps{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	own, err := q.NewMR(4096, mr.LocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	early, err := q.NewMR(4096, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := early.Close(); err != nil { // closing one before Close is allowed
		t.Fatal(err)
	}
	other, err := mr.New(q.PD(), 4096, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); !errors.Is(err, unix.EBUSY) {
		t.Fatalf("Close with an MR of the caller's on the PD: %v, want EBUSY", err)
	}
	if len(own.Bytes()) != 0 {
		t.Error("Close left NewMR's region registered")
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatalf("Close again once the caller's MR is closed: %v", err)
	}
	if m, err := mr.New(q.PD(), 4096, 0); !errors.Is(err, verbs.ErrClosed) {
		if m != nil {
			m.Close()
		}
		t.Fatalf("mr.New on the PD after Close: %v, want verbs.ErrClosed (the PD deallocated)", err)
	}
}
