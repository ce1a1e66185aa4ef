package faults

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cm"
	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/verbs"
)

const cmPort = 7472 // b's rdma_cm listener

// TestCMPeerKilled: a stream of SENDs on an rdma_cm connection whose
// passive side's process is killed mid-stream. b's kernel tears the
// connection down (a DREQ), so a's cm must report DISCONNECTED; every SEND
// must complete, OK or in error (retry exceeded, or flushed by a's
// disconnect), within the retry budget of the QP the cm configured.
func TestCMPeerKilled(t *testing.T) {
	switch bed(t) {
	case "a":
		cmDrive(t, 60)
	case "b":
		serve(t)
	}
}

func cmDrive(t *testing.T, iters int) {
	start := time.Now()
	base := takeBaseline(t)
	c := dial(t)
	if err := c.send(setup{Test: t.Name(), Mode: "cmkill", Recvs: recvRing}); err != nil {
		t.Fatal(err)
	}
	var ready report
	if err := c.recv(&ready); err != nil || ready.Err != "" {
		t.Fatalf("b's listener: %v %s", err, ready.Err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), ctlWait)
	defer cancel()
	ch, err := cm.NewChannel()
	if err != nil {
		t.Fatal(err)
	}
	id, err := ch.CreateID(cm.TCP)
	if err != nil {
		t.Fatal(err)
	}
	dst := netip.AddrPortFrom(netip.MustParseAddr(os.Getenv(envPeer)), cmPort)
	if err := id.ResolveAddr(ctx, netip.AddrPort{}, dst); err != nil {
		t.Fatal(err)
	}
	if err := id.ResolveRoute(ctx); err != nil {
		t.Fatal(err)
	}
	e, err := id.NewEndpoint(nil, qp.Caps{MaxSendWR: 2 * window, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	m, err := mr.New(e.PD(), slots*sendLen, mr.LocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := id.Connect(ctx, cm.ConnParam{RetryCount: fast.RetryCnt, RNRRetryCount: fast.RNRRetry}); err != nil {
		t.Fatal(err)
	}
	// The budget of the QP as the cm configured it.
	attr, err := e.QP().Query()
	if err != nil {
		t.Fatal(err)
	}
	cfg := qpConfig{Timeout: attr.Timeout, RetryCnt: attr.RetryCnt, RNRRetry: attr.RNRRetry, RNRTimer: attr.MinRNRTimer}
	if cfg.Timeout == 0 || cfg.RetryCnt >= 7 {
		t.Fatalf("the cm's QP has timeout %d, retry_cnt %d: no finite retry budget", cfg.Timeout, cfg.RetryCnt)
	}
	budget, slack := cfg.budget(), cfg.slack()

	// The cm's events, as they come. DISCONNECTED is answered at once
	// the way librdmacm programs do, with rdma_disconnect, which moves
	// the QP to ERR so that what is still queued is flushed.
	type cmEvent struct {
		ev    cm.Event
		err   error
		at    time.Time
		disco error // the answer's error
	}
	var disconnecting atomic.Bool
	events := make(chan cmEvent, 4)
	evCtx, evCancel := context.WithCancel(context.Background())
	var evWG sync.WaitGroup
	evWG.Add(1)
	go func() {
		defer evWG.Done()
		for {
			ev, err := id.Event(evCtx)
			ce := cmEvent{ev: ev, err: err, at: time.Now()}
			if err == nil && ev.Type == cm.EventDisconnected {
				disconnecting.Store(true)
				ce.disco = id.Disconnect()
			}
			events <- ce
			if err != nil || ev.Type == cm.EventDisconnected {
				return
			}
		}
	}()

	res := result{Fault: "rdma_cm: peer process SIGKILL", Budget: budget}
	buf := m.Bytes()
	seed := uint64(start.UnixNano())
	states := make([]wrState, iters)
	var (
		posted, completed, next int
		stopped                 bool // no more posts: an error, or the disconnect
		injected, disconnected  time.Time
		lastProgress            = time.Now()
		wcs                     = make([]verbs.WorkCompletion, 2*window)
	)
	onEvent := func(ev cmEvent) {
		if ev.err != nil {
			t.Errorf("cm event: %v", ev.err)
			return
		}
		if ev.ev.Type != cm.EventDisconnected {
			t.Errorf("cm event %v, want DISCONNECTED", ev.ev.Type)
			return
		}
		disconnected = ev.at
		stopped = true
		if ev.disco != nil {
			t.Errorf("disconnect after DISCONNECTED: %v", ev.disco)
		}
	}
	for {
		select {
		case ev := <-events:
			onEvent(ev)
		default:
		}
		for !stopped && !disconnecting.Load() && next < iters && posted-completed < window {
			s := next % slots
			message(buf[s*sendLen:(s+1)*sendLen], seed, next)
			if posted == completed {
				lastProgress = time.Now()
			}
			if err := e.PostSend(uint64(next), buf[s*sendLen:(s+1)*sendLen], m, verbs.SendSignaled); err != nil {
				if disconnecting.Load() {
					break // the QP went to ERR under the post: not posted
				}
				t.Fatalf("post %d: %v", next, err)
			}
			states[next] = wrPosted
			posted++
			next++
			if next == iters/3 {
				injected = time.Now()
				if err := c.send(command{Op: "die"}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if completed == posted && (stopped || disconnecting.Load() || next == iters) {
			break
		}
		n, stalled := pollBounded(t, e.SendCQ(), wcs, &lastProgress, budget, slack, posted-completed, "SENDs", &res)
		if stalled {
			break
		}
		if n == 0 {
			continue
		}
		for _, wc := range wcs[:n] {
			i := int(wc.WRID)
			if i >= len(states) || states[i] != wrPosted {
				t.Errorf("completion for SEND %d, which is not outstanding: completed twice or never posted", i)
				continue
			}
			states[i] = wrDone
			completed++
			if wc.Status == verbs.WCSuccess {
				res.OK++
				continue
			}
			res.Error++
			if !stopped {
				stopped = true
				t.Logf("first error: SEND %d: %v after %d OK", i, wc.Status, res.OK)
			}
		}
	}
	// DISCONNECTED, if it has not come yet, is due within the budget.
	if disconnected.IsZero() {
		select {
		case ev := <-events:
			onEvent(ev)
		case <-time.After(time.Until(injected.Add(budget + slack))):
			t.Errorf("no DISCONNECTED within %v of the kill (retry budget %v + slack %v)", budget+slack, budget, slack)
		}
	}
	evCancel()
	evWG.Wait()
	// What the disconnect flushed.
	for completed < posted {
		n, err := e.SendCQ().Poll(wcs)
		if err != nil || n == 0 {
			break
		}
		for _, wc := range wcs[:n] {
			if i := int(wc.WRID); i < len(states) && states[i] == wrPosted {
				states[i] = wrDone
				completed++
				if wc.Status == verbs.WCSuccess {
					res.OK++
				} else {
					res.Error++
				}
			}
		}
	}
	res.Posted, res.Lost = posted, posted-completed
	if res.Lost != 0 {
		t.Errorf("%d of %d SENDs never completed", res.Lost, posted)
	}
	if !disconnected.IsZero() {
		res.Detect = disconnected.Sub(injected)
		if res.Detect > budget+slack {
			t.Errorf("DISCONNECTED %v after the kill, beyond the retry budget %v + slack %v", res.Detect, budget, slack)
		}
	}
	var rep report
	if err := c.recv(&rep); err != nil {
		t.Fatalf("b's report: %v", err)
	}
	if !rep.Killed || rep.Baseline != "" || rep.Err != "" {
		t.Errorf("b: killed %v, kernel objects left %q, error %q", rep.Killed, rep.Baseline, rep.Err)
	}
	c.c.Close()
	if err := m.Close(); err != nil {
		t.Errorf("close MR: %v", err)
	}
	if err := id.Close(); err != nil {
		t.Errorf("close ID: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Errorf("close endpoint: %v", err)
	}
	if err := ch.Close(); err != nil {
		t.Errorf("close channel: %v", err)
	}
	base.check(t, "a")
	res.Wall = time.Since(start)
	resultMu.Lock()
	results = append(results, res)
	resultMu.Unlock()
	t.Logf("faults: %s: %d WRs posted, %d completed OK, %d completed in error, %d lost; DISCONNECTED %v after the kill (retry budget %v)",
		res.Fault, res.Posted, res.OK, res.Error, res.Lost, res.Detect, budget)
}

// cmRespond is b's side of TestCMPeerKilled, in the child process: it
// accepts a's connection, receives (checking each message) and dies of
// SIGKILL when a says so.
func cmRespond(c *ctl, su setup, addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), ctlWait)
	defer cancel()
	ch, err := cm.NewChannel()
	if err != nil {
		return err
	}
	l, err := ch.CreateID(cm.TCP)
	if err != nil {
		return err
	}
	if err := l.Bind(netip.AddrPortFrom(netip.MustParseAddr(addr), cmPort)); err != nil {
		return err
	}
	if err := l.Listen(1); err != nil {
		return err
	}
	if err := c.send(report{}); err != nil {
		return err
	}
	id, _, err := l.GetRequest(ctx)
	if err != nil {
		return err
	}
	e, err := id.NewEndpoint(nil, qp.Caps{MaxSendWR: 1, MaxRecvWR: su.Recvs, MaxSendSGE: 1, MaxRecvSGE: 1})
	if err != nil {
		return err
	}
	m, err := mr.New(e.PD(), su.Recvs*sendLen, mr.LocalWrite)
	if err != nil {
		return err
	}
	buf := m.Bytes()
	for i := range su.Recvs {
		if err := e.PostRecv(uint64(i), buf[i*sendLen:(i+1)*sendLen], m); err != nil {
			return err
		}
	}
	if err := id.Accept(ctx, cm.ConnParam{RetryCount: fast.RetryCnt, RNRRetryCount: fast.RNRRetry}); err != nil {
		return err
	}
	go func() {
		for {
			wc, err := e.GetRecvComp(context.Background())
			if err != nil || wc.Status != verbs.WCSuccess {
				return
			}
			p := buf[int(wc.WRID)*sendLen : int(wc.WRID+1)*sendLen]
			if crc32.ChecksumIEEE(p[8:]) != binary.LittleEndian.Uint32(p[4:]) {
				fmt.Fprintf(os.Stderr, "faults child: message %d corrupt\n", binary.LittleEndian.Uint32(p))
			}
			e.PostRecv(wc.WRID, p, m)
		}
	}()
	var cmd command
	if err := c.recv(&cmd); err != nil {
		return err
	}
	if cmd.Op != "die" {
		return fmt.Errorf("command %q, want die", cmd.Op)
	}
	return unix.Kill(os.Getpid(), unix.SIGKILL)
}
