package faults

import (
	"context"
	"encoding/binary"
	"errors"
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
	"github.com/goverbs/goverbs/internal/testutil"
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
		cmDrive(t, 60, "die")
	case "b":
		serve(t)
	}
}

// cmDrive streams iters SENDs on an rdma_cm connection to b and injects
// fault (die: b's process is killed; poweroff: b's VM powers off) at a
// third of them.
func cmDrive(t *testing.T, iters int, fault string) {
	start := time.Now()
	base := takeBaseline(t)
	c := dial(t)
	mode := "cmkill"
	if fault == "poweroff" {
		mode = "cmpoweroff"
	}
	if err := c.send(setup{Test: t.Name(), Mode: mode, Recvs: recvRing}); err != nil {
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
	e, err := id.NewQueues(nil, qp.Caps{MaxSendWR: 2 * window, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1})
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
			// Answered unless a disconnected first (power-off).
			if err == nil && ev.Type == cm.EventDisconnected && disconnecting.CompareAndSwap(false, true) {
				ce.disco = id.Disconnect()
			}
			events <- ce
			if err != nil || ev.Type == cm.EventDisconnected {
				return
			}
		}
	}()

	res := result{Fault: "rdma_cm: peer process SIGKILL", Budget: budget}
	if fault == "poweroff" {
		res.Fault = "rdma_cm: peer VM powered off"
	}
	buf := m.Bytes()
	seed := uint64(start.UnixNano())
	states := make([]wrState, iters)
	var (
		posted, completed, next int
		stopped                 bool // no more posts: an error, or the disconnect
		injected, disconnected  time.Time
		disconnectedAt          time.Time // a's own Disconnect (power-off)
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
				if err := c.send(command{Op: fault}); err != nil {
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
				if fault == "poweroff" {
					res.Detect = time.Since(injected)
				}
			}
			// No DREQ comes from a powered-off peer: a disconnects on
			// the error, which flushes the rest.
			if fault == "poweroff" && disconnecting.CompareAndSwap(false, true) {
				disconnectedAt = time.Now()
				if err := id.Disconnect(); err != nil {
					t.Errorf("disconnect on the error: %v", err)
				}
			}
		}
	}
	// DISCONNECTED, if it has not come yet, is due within the budget:
	// the QP's of the kill (b's kernel sends a DREQ at once), the cm's
	// of a's own Disconnect (its DREQ unanswered).
	discoBudget, discoSlack, from := budget, slack, injected
	if fault == "poweroff" {
		discoBudget, from = cmBudget(cfg.Timeout), disconnectedAt
		discoSlack = cmSlack(discoBudget)
		if from.IsZero() {
			t.Errorf("b powered off, and no SEND failed")
			from = time.Now()
		}
	}
	if disconnected.IsZero() {
		select {
		case ev := <-events:
			onEvent(ev)
		case <-time.After(time.Until(from.Add(discoBudget + discoSlack))):
			t.Errorf("no DISCONNECTED within %v (retry budget %v + slack %v)", discoBudget+discoSlack, discoBudget, discoSlack)
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
	switch {
	case disconnected.IsZero():
	case fault == "poweroff":
		d := disconnected.Sub(disconnectedAt)
		t.Logf("DISCONNECTED %v after a's Disconnect (cm retry budget %v), %v after the power-off",
			d.Round(time.Millisecond), discoBudget, disconnected.Sub(injected).Round(time.Millisecond))
		if d > discoBudget+discoSlack {
			t.Errorf("DISCONNECTED %v after a's Disconnect, beyond the cm's retry budget %v + slack %v", d, discoBudget, discoSlack)
		}
		res.Fault += fmt.Sprintf(" (DISCONNECTED %v after the power-off)", disconnected.Sub(injected).Round(100*time.Millisecond))
	default:
		res.Detect = disconnected.Sub(injected)
		if res.Detect > budget+slack {
			t.Errorf("DISCONNECTED %v after the kill, beyond the retry budget %v + slack %v", res.Detect, budget, slack)
		}
	}
	if fault == "die" {
		var rep report
		if err := c.recv(&rep); err != nil {
			t.Fatalf("b's report: %v", err)
		}
		if !rep.Killed || rep.Baseline != "" || rep.Err != "" {
			t.Errorf("b: killed %v, kernel objects left %q, error %q", rep.Killed, rep.Baseline, rep.Err)
		}
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
	t.Logf("faults: %s: %d WRs posted, %d completed OK, %d completed in error, %d lost; time to detect %v (retry budget %v)",
		res.Fault, res.Posted, res.OK, res.Error, res.Lost, res.Detect, budget)
}

// cmRespond is b's side of TestCMPeerKilled, in the child process, and
// of TestCMPeerPoweredOff: it accepts a's connection, receives (checking
// each message) and dies of SIGKILL or powers the VM off when a says so.
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
	e, err := id.NewQueues(nil, qp.Caps{MaxSendWR: 1, MaxRecvWR: su.Recvs, MaxSendSGE: 1, MaxRecvSGE: 1})
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
	switch cmd.Op {
	case "die":
		return unix.Kill(os.Getpid(), unix.SIGKILL)
	case "poweroff":
		return powerOff()
	}
	return fmt.Errorf("command %q, want die or poweroff", cmd.Op)
}

// The connection manager's own retry budget. Its timeouts are kernel
// constants that nothing reports (drivers/infiniband/core/cma.c, the same
// in 6.1 and 6.12): the remote CM response timeout 20 (4.096 µs × 2^20)
// and 15 retries of a REQ, REP or DREQ; the packet life time, which the
// kernel does report (as the QP's ACK timeout the cm sets: life + 1), is
// detected. Each try waits 2 × life + the response timeout (cm.c,
// cm_convert_to_ms: 2^(t-8) ms).
const (
	cmResponseTimeout = 20
	cmMaxRetries      = 15
)

func cmConvertToMS(t uint8) time.Duration {
	return time.Duration(1<<max(int(t)-8, 0)) * time.Millisecond
}

// cmBudget is the longest one cm exchange (REQ to REP, DREQ to DREP) may
// take before the cm gives up on it, for an ACK timeout of ackTimeout.
func cmBudget(ackTimeout uint8) time.Duration {
	life := ackTimeout - 1
	return (cmMaxRetries + 1) * (2*cmConvertToMS(life) + cmConvertToMS(cmResponseTimeout))
}

// cmSlack is what a bound allows beyond a cm budget: each of the 16
// tries' timers starts when its MAD's send completes, on a loaded,
// emulated CPU (TestCMPeerPoweredOff: 77.7 s for a budget of 73.7 s).
func cmSlack(budget time.Duration) time.Duration { return 3*time.Second + budget/10 }

// cmConnResult is one connection attempt's outcome on a's side.
type cmConnResult struct {
	connect    time.Duration // Connect's return
	err        error         // Connect's error
	sendErr    error         // the message's SEND
	disconnect time.Duration // Disconnect to DISCONNECTED
	discoErr   error
	ackTimeout uint8
}

// TestCMLoss5 and TestCMLoss30: rdma_cm connections made over a lossy
// link, several at once. Each Connect must return within the cm's retry
// budget, established (then a checksummed message crosses it, or its
// SEND completes with "transport retry counter exceeded", RC's own limit,
// and a's Disconnect is answered) or with a clear error (errors.Is:
// unreachable, rejected); b's Accept likewise.
func TestCMLoss5(t *testing.T) { cmLossTest(t, "loss 5%", 4) }

func TestCMLoss30(t *testing.T) { cmLossTest(t, "loss 30%", 3) }

func cmLossTest(t *testing.T, netem string, conns int) {
	switch bed(t) {
	case "b":
		serve(t)
		return
	}
	start := time.Now()
	base := takeBaseline(t)
	c := dial(t)
	defer c.c.Close()
	if err := c.send(setup{Test: t.Name(), Mode: "cmloss", Recvs: 1}); err != nil {
		t.Fatal(err)
	}
	var ready report
	if err := c.recv(&ready); err != nil || ready.Err != "" {
		t.Fatalf("b's listener: %v %s", err, ready.Err)
	}
	// A clean connection first: the packet life time, as the kernel
	// reports it, for the budget.
	clean := cmConnectOnce(0, time.Hour)
	if clean.err != nil || clean.sendErr != nil || clean.discoErr != nil {
		t.Fatalf("clean connection: connect %v, send %v, disconnect %v", clean.err, clean.sendErr, clean.discoErr)
	}
	budget := cmBudget(clean.ackTimeout)
	slack := cmSlack(budget)
	t.Logf("the cm's QP: ACK timeout %d: cm retry budget %v per exchange", clean.ackTimeout, budget)

	if err := c.send(command{Op: "netem", Netem: netem}); err != nil {
		t.Fatal(err)
	}
	if err := c.recv(&ready); err != nil || ready.Err != "" {
		t.Fatalf("b's netem: %v %s", err, ready.Err)
	}
	if err := setNetem(netem); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { setNetem("") })
	out := make([]cmConnResult, conns)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = cmConnectOnce(i+1, budget+slack)
		}()
	}
	wg.Wait()
	if err := setNetem(""); err != nil {
		t.Error(err)
	}
	res := result{Fault: fmt.Sprintf("rdma_cm: %d connects at once under netem %s", conns, netem), Budget: budget}
	delivered := 0 // established connections whose SEND completed OK
	for i, r := range out {
		res.Posted++
		res.MaxGap = max(res.MaxGap, r.connect, r.disconnect)
		switch {
		case r.err == nil:
			res.OK++
			switch {
			case r.sendErr == nil:
				delivered++
			case errors.Is(r.sendErr, verbs.WCRetryExcErr):
				// RC's own bounded retry ran out: the SEND, or every
				// ACK b sent for it, was lost on each of its
				// RetryCnt+1 tries. That is the transport's
				// specified, clear outcome, not a fault: under loss
				// p on each side one try gets through with
				// (1-p)², so at 30 % all 7 fail with 0.51^7, about
				// one connection in 110.
				t.Logf("connection %d: established; its SEND ran out of transport retries (%v)", i+1, r.sendErr)
			default:
				t.Errorf("connection %d: established, but its SEND: %v", i+1, r.sendErr)
			}
			if r.discoErr != nil {
				t.Errorf("connection %d: disconnect: %v", i+1, r.discoErr)
			}
		case errors.Is(r.err, cm.ErrUnreachable), errors.Is(r.err, cm.ErrRejected):
			res.Error++
			t.Logf("connection %d: %v after %v", i+1, r.err, r.connect)
		case errors.Is(r.err, context.DeadlineExceeded):
			res.Lost++
			t.Errorf("connection %d: no outcome within the cm's retry budget %v + slack %v: %v", i+1, budget, slack, r.err)
		default:
			res.Error++
			t.Errorf("connection %d: %v: not an error errors.Is tells apart", i+1, r.err)
		}
		if r.connect > budget+slack {
			t.Errorf("connection %d: Connect took %v, beyond the cm's retry budget %v + slack %v", i+1, r.connect, budget, slack)
		}
		if r.disconnect > budget+slack {
			t.Errorf("connection %d: DISCONNECTED %v after Disconnect, beyond the cm's retry budget %v + slack %v", i+1, r.disconnect, budget, slack)
		}
		t.Logf("connection %d: connect %v (%v), message %v, disconnect %v (%v)", i+1, r.connect.Round(time.Millisecond), r.err,
			r.sendErr, r.disconnect.Round(time.Millisecond), r.discoErr)
	}
	if err := c.send(command{Op: "done", SendsPosted: 1 + res.OK}); err != nil {
		t.Fatal(err)
	}
	var rep report
	if err := c.recv(&rep); err != nil {
		t.Fatalf("b's report: %v", err)
	}
	if rep.Err != "" {
		t.Errorf("b: %s", rep.Err)
	}
	if rep.Bad != 0 || rep.Lost != 0 {
		t.Errorf("b: %d messages corrupt, %d connections without an outcome within the budget", rep.Bad, rep.Lost)
	}
	// Every message whose SEND completed OK arrived at b, intact. One
	// whose SEND ran out of retries may have arrived (only its ACKs
	// lost) or not; nothing else may.
	if rep.Received < 1+delivered || rep.Received > 1+res.OK {
		t.Errorf("b received %d messages on its connections; a's SENDs completed OK on %d and a established %d",
			rep.Received, 1+delivered, 1+res.OK)
	}
	t.Logf("b: %d connections accepted, %d accepts failed, %d messages received, longest accept %v", rep.Dups, rep.Flushed, rep.Received, rep.Down)
	if rep.Down > budget+slack {
		t.Errorf("b: an Accept took %v, beyond the cm's retry budget %v + slack %v", rep.Down, budget, slack)
	}
	c.c.Close()
	base.check(t, "a")
	res.Wall = time.Since(start)
	resultMu.Lock()
	results = append(results, res)
	resultMu.Unlock()
}

// cmConnectOnce makes connection n to b, sends b one checksummed message
// on it, disconnects and waits for DISCONNECTED, each step bounded by
// bound.
func cmConnectOnce(n int, bound time.Duration) (r cmConnResult) {
	ctx, cancel := context.WithTimeout(context.Background(), ctlWait)
	defer cancel()
	ch, err := cm.NewChannel()
	if err != nil {
		r.err = err
		return r
	}
	defer ch.Close()
	id, err := ch.CreateID(cm.TCP)
	if err != nil {
		r.err = err
		return r
	}
	defer id.Close()
	dst := netip.AddrPortFrom(netip.MustParseAddr(os.Getenv(envPeer)), cmPort)
	if err := id.ResolveAddr(ctx, netip.AddrPort{}, dst); err != nil {
		r.err = err
		return r
	}
	if err := id.ResolveRoute(ctx); err != nil {
		r.err = err
		return r
	}
	e, err := id.NewQueues(nil, qp.Caps{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1})
	if err != nil {
		r.err = err
		return r
	}
	defer e.Close()
	m, err := mr.New(e.PD(), sendLen, mr.LocalWrite)
	if err != nil {
		r.err = err
		return r
	}
	defer m.Close()
	cctx, ccancel := context.WithTimeout(context.Background(), bound)
	began := time.Now()
	_, err = id.Connect(cctx, cm.ConnParam{RetryCount: fast.RetryCnt, RNRRetryCount: fast.RNRRetry})
	r.connect = time.Since(began)
	ccancel()
	if err != nil {
		r.err = err
		return r
	}
	attr, err := e.QP().Query()
	if err != nil {
		r.err = err
		return r
	}
	r.ackTimeout = attr.Timeout
	message(m.Bytes(), uint64(n), n)
	if r.sendErr = e.PostSend(uint64(n), m.Bytes(), m, verbs.SendSignaled); r.sendErr == nil {
		_, r.sendErr = e.GetSendComp(ctx) // a *verbs.WCError for a failed SEND
	}
	began = time.Now()
	if r.discoErr = id.Disconnect(); r.discoErr == nil {
		dctx, dcancel := context.WithTimeout(context.Background(), bound)
		ev, err := id.Event(dctx)
		dcancel()
		r.disconnect = time.Since(began)
		switch {
		case err != nil:
			r.discoErr = err
		case ev.Type != cm.EventDisconnected:
			r.discoErr = fmt.Errorf("event %v after Disconnect, want DISCONNECTED", ev.Type)
		}
	}
	return r
}

// serveCMLoss is b's side of the cm loss tests: it accepts every
// connection a makes, checks its message, answers its disconnect, and on
// done reports (Received: messages intact, Bad: corrupt, Dups: accepts
// established, Flushed: accepts failed, Lost: connections without an
// outcome, Down: the longest Accept).
func serveCMLoss(t *testing.T, c *ctl, base baseline) {
	ch, err := cm.NewChannel()
	if err != nil {
		c.send(report{Err: err.Error()})
		t.Fatal(err)
	}
	l, err := ch.CreateID(cm.TCP)
	if err == nil {
		err = l.Bind(netip.AddrPortFrom(netip.MustParseAddr(os.Getenv(testutil.EnvAddr)), cmPort))
	}
	if err == nil {
		err = l.Listen(8)
	}
	if err != nil {
		c.send(report{Err: err.Error()})
		ch.Close()
		t.Fatal(err)
	}
	if err := c.send(report{}); err != nil {
		ch.Close()
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		rep   report
		conns sync.WaitGroup
	)
	lctx, lcancel := context.WithCancel(context.Background())
	accepting := make(chan struct{})
	go func() {
		defer close(accepting)
		for {
			id, _, err := l.GetRequest(lctx)
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer conns.Done()
				err := cmServeOne(id, &mu, &rep)
				if err != nil {
					t.Logf("b: connection: %v", err)
				}
			}()
		}
	}()
	for {
		var cmd command
		if err := c.recv(&cmd); err != nil {
			t.Errorf("a's next command: %v", err)
			break
		}
		if cmd.Op == "netem" {
			r := report{}
			if err := setNetem(cmd.Netem); err != nil {
				r.Err = err.Error()
			}
			if err := c.send(r); err != nil {
				t.Error(err)
				break
			}
			continue
		}
		if cmd.Op != "done" {
			t.Errorf("command %q, want netem or done", cmd.Op)
		}
		break
	}
	setNetem("")
	lcancel()
	<-accepting
	conns.Wait() // each bounded: ctlWait
	mu.Lock()
	r := rep
	mu.Unlock()
	if err := c.send(r); err != nil {
		t.Error(err)
	}
	if err := l.Close(); err != nil {
		t.Error(err)
	}
	if err := ch.Close(); err != nil {
		t.Error(err)
	}
	base.check(t, "b")
}

// cmServeOne accepts one connection, checks its one message and answers
// a's disconnect; every wait bounded by ctlWait.
func cmServeOne(id *cm.ID, mu *sync.Mutex, rep *report) error {
	defer id.Close()
	ctx, cancel := context.WithTimeout(context.Background(), ctlWait)
	defer cancel()
	e, err := id.NewQueues(nil, qp.Caps{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1})
	if err != nil {
		id.Reject(nil)
		return err
	}
	defer e.Close()
	m, err := mr.New(e.PD(), sendLen, mr.LocalWrite)
	if err != nil {
		id.Reject(nil)
		return err
	}
	defer m.Close()
	if err := e.PostRecv(0, m.Bytes(), m); err != nil {
		id.Reject(nil)
		return err
	}
	began := time.Now()
	err = id.Accept(ctx, cm.ConnParam{RetryCount: fast.RetryCnt, RNRRetryCount: fast.RNRRetry})
	took := time.Since(began)
	mu.Lock()
	rep.Down = max(rep.Down, took)
	switch {
	case err == nil:
		rep.Dups++
	case errors.Is(err, cm.ErrDisconnected), errors.Is(err, cm.ErrUnreachable), errors.Is(err, cm.ErrRejected):
		// DISCONNECTED in ESTABLISHED's place: a's RTU was lost and its
		// DREQ came before the REP's retry drew another. a may have
		// sent its message meanwhile (b's QP was in RTR).
		rep.Flushed++
	case errors.Is(err, context.DeadlineExceeded):
		rep.Flushed++
		rep.Lost++
	default:
		rep.Flushed++
		rep.Err += fmt.Sprintf("accept: %v (not an error errors.Is tells apart); ", err)
	}
	mu.Unlock()
	var wc verbs.WorkCompletion
	if err == nil {
		if wc, err = e.GetRecvComp(ctx); err != nil {
			return err
		}
	} else {
		// If a's SEND completed OK, b's QP acknowledged it, after
		// completing the receive, before a disconnected: the receive
		// is in the CQ already.
		wcs := make([]verbs.WorkCompletion, 1)
		if n, perr := e.RecvCQ().Poll(wcs); perr != nil || n == 0 {
			id.Disconnect()
			return fmt.Errorf("accept after %v: %w (no message)", took, err)
		}
		wc = wcs[0]
	}
	p := m.Bytes()
	mu.Lock()
	if wc.Status == verbs.WCSuccess && wc.ByteLen == sendLen && crc32.ChecksumIEEE(p[8:]) == binary.LittleEndian.Uint32(p[4:]) {
		rep.Received++
	} else if wc.Status == verbs.WCSuccess {
		rep.Bad++
	}
	mu.Unlock()
	if err != nil {
		id.Disconnect() // the DREP a waits for
		return fmt.Errorf("accept after %v: %w (message received)", took, err)
	}
	// a disconnects; answering at once (DREP) ends a's wait.
	ev, err := id.Event(ctx)
	if err != nil {
		return err
	}
	if ev.Type != cm.EventDisconnected {
		return fmt.Errorf("event %v, want DISCONNECTED", ev.Type)
	}
	return id.Disconnect()
}
