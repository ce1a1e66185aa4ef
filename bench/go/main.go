// Command bench-go is the goverbs side of `make bench`: the operations of
// bench/c/main.c, the same work per operation, written on goverbs' public
// API. It prints one line per result, "name<TAB>value<TAB>unit", unit
// "ns" (per operation) or "kmsg/s".
//
//	bench-go [name-prefix... | name$...]
//
// An argument selects the rows its text starts, or with a trailing "$" the
// one row of exactly that name.
package main

import (
	"fmt"
	"log"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/verbs"
)

const (
	depth  = 1024
	cqe    = 4096
	msg    = 64
	bufLen = 1 << 16
)

type side struct {
	scq, rcq *cq.CQ
	qp       *qp.QP
}

type pair struct{ a, b side }

var (
	ctx  *verbs.Context
	pd   *verbs.PD
	buf  *mr.MR
	path verbs.AHAttr
)

func must(err error) {
	if err != nil {
		_, file, line, _ := runtime.Caller(1)
		log.Fatalf("bench-go: %s:%d: %v", file, line, err)
	}
}

func open() {
	name := os.Getenv("GOVERBS_BENCH_DEV")
	if name == "" {
		name = "rxe0"
	}
	addr := os.Getenv("GOVERBS_BENCH_ADDR")
	if addr == "" {
		addr = "169.254.77.1"
	}
	var err error
	ctx, err = verbs.Open(name)
	must(err)
	pd, err = ctx.AllocPD()
	must(err)
	buf, err = mr.New(pd, bufLen, mr.LocalWrite|mr.RemoteWrite|mr.RemoteRead)
	must(err)
	table, err := ctx.QueryGIDTable()
	must(err)
	want := netip.MustParseAddr(addr)
	for _, e := range table {
		if e.Port == 1 && netip.AddrFrom16(e.GID).Unmap() == want {
			path = verbs.AHAttr{IsGlobal: true, Port: 1, GRH: verbs.GlobalRoute{DGID: e.GID, SGIDIndex: uint8(e.Index), HopLimit: 1}}
			return
		}
	}
	log.Fatalf("bench-go: no GID for %s", addr)
}

func newSide() side {
	var s side
	var err error
	s.scq, err = cq.New(ctx, cq.Options{CQE: cqe})
	must(err)
	s.rcq, err = cq.New(ctx, cq.Options{CQE: cqe})
	must(err)
	s.qp, err = qp.New(pd, qp.Options{Type: qp.RC, SendCQ: s.scq, RecvCQ: s.rcq,
		Caps: qp.Caps{MaxSendWR: depth, MaxRecvWR: depth, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 64}})
	must(err)
	must(s.qp.ToInit(qp.InitAttr{Port: 1, Access: mr.RemoteWrite | mr.RemoteRead}))
	return s
}

func connect(s, peer side, psn, peerPSN uint32) {
	must(s.qp.ToRTR(qp.RTRAttr{Path: path, MTU: verbs.MTU1024, DestQPN: peer.qp.QPN(), RQPSN: peerPSN,
		MaxDestRDAtomic: 4, MinRNRTimer: 1}))
	must(s.qp.ToRTS(qp.RTSAttr{SQPSN: psn, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRDAtomic: 4}))
}

func newPair() *pair {
	p := &pair{a: newSide(), b: newSide()}
	connect(p.a, p.b, 0x1000, 0x2000)
	connect(p.b, p.a, 0x2000, 0x1000)
	return p
}

func reinit(q *qp.QP) {
	must(q.ToReset())
	must(q.ToInit(qp.InitAttr{Port: 1, Access: mr.RemoteWrite | mr.RemoteRead}))
}

// Work requests are built once per call site, as a caller of a hot path
// would; only the fields that change are rewritten.
func recvWR(off int) []verbs.RecvWR {
	return []verbs.RecvWR{{SGList: []verbs.SGE{{Addr: buf.IOVA() + uint64(off), Length: msg, LKey: buf.LKey()}}}}
}

func sendWR(write bool, off int) []verbs.SendWR {
	wr := verbs.SendWR{Opcode: verbs.WRSend, SGList: []verbs.SGE{{Addr: buf.IOVA() + uint64(off), Length: msg, LKey: buf.LKey()}}}
	if write {
		wr.Opcode = verbs.WRRDMAWrite
		wr.RemoteAddr = buf.IOVA() + bufLen/2 + uint64(off)
		wr.RKey = buf.RKey()
	}
	return []verbs.SendWR{wr}
}

func signal(wr []verbs.SendWR, id int, signaled bool) {
	wr[0].WRID = uint64(id)
	wr[0].Flags = 0
	if signaled {
		wr[0].Flags = verbs.SendSignaled
	}
}

// poll polls up to len(wc) completions; a failed completion is fatal.
func poll(c *cq.CQ, wc []verbs.WorkCompletion) int {
	n, err := c.Poll(wc)
	must(err)
	for i := range wc[:n] {
		if wc[i].Status != verbs.WCSuccess {
			log.Fatalf("bench-go: completion %+v: %v", wc[i], wc[i].Status)
		}
	}
	return n
}

func waitCQ(c *cq.CQ, n int) {
	var wc [16]verbs.WorkCompletion
	for n > 0 {
		n -= poll(c, wc[:min(n, 16)])
	}
}

var p *pair

// list is the length of the work-request lists in the _list32 rows.
const list = 32

// recvList is n receive work requests of msg bytes at offset 0, built
// once as a hot-path caller would; the WRIDs are set per post.
func recvList(n int) []verbs.RecvWR {
	sge := []verbs.SGE{{Addr: buf.IOVA(), Length: msg, LKey: buf.LKey()}}
	wr := make([]verbs.RecvWR, n)
	for i := range wr {
		wr[i].SGList = sge
	}
	return wr
}

// opPostRecv posts 512 receives per batch on a QP in INIT, n per call (1,
// or list: one doorbell per list where the provider rings one), and
// resets the QP between batches, untimed.
func opPostRecv(n int) float64 {
	s := newSide()
	wr := recvList(n)
	var total time.Duration
	const rounds = 40
	for r := 0; r < rounds; r++ {
		t0 := time.Now()
		postRecvs(s.qp, wr, 512)
		total += time.Since(t0)
		reinit(s.qp)
	}
	return float64(total.Nanoseconds()) / (rounds * 512)
}

// postRecvRTS is bench-c's post_recv_rts: 512 receives per batch on a
// connected QP, single or as lists of 32 (only the posts timed), then 512
// SENDs from the peer consume them. Receives on a QP in INIT taken back
// by a reset, opPostRecv's way, leak on qemu's pvrdma model.
func postRecvRTS(n int) float64 {
	const rounds, k = 8, 512
	rl := recvList(n)
	sl := sendList(false, list)
	wc := make([]verbs.WorkCompletion, 16)
	var total time.Duration
	for r := 0; r < rounds; r++ {
		t0 := time.Now()
		postRecvs(p.b.qp, rl, k)
		total += time.Since(t0)
		postBatch(sl, k)
		waitCQ(p.b.rcq, k)
		waitCQ(p.a.scq, 1)
		for poll(p.a.scq, wc) > 0 { // a device that signals every send left more
		}
	}
	return float64(total.Nanoseconds()) / (rounds * k)
}

var emptyCQ *cq.CQ

func pollEmpty(batch int) float64 {
	if emptyCQ == nil {
		var err error
		emptyCQ, err = cq.New(ctx, cq.Options{CQE: cqe})
		must(err)
	}
	wc := make([]verbs.WorkCompletion, batch)
	const n = 200000
	t0 := time.Now()
	for i := 0; i < n; i++ {
		if k, _ := emptyCQ.Poll(wc); k != 0 {
			log.Fatal("bench-go: empty CQ polled a completion")
		}
	}
	return float64(time.Since(t0).Nanoseconds()) / n
}

// sendList is n copies of sendWR's work request, built once.
func sendList(write bool, n int) []verbs.SendWR {
	one := sendWR(write, 0)[0]
	wr := make([]verbs.SendWR, n)
	for i := range wr {
		wr[i] = one
	}
	return wr
}

// postRecvs posts k receives on q, len(wr) per call, numbered 0 to k-1.
func postRecvs(q *qp.QP, wr []verbs.RecvWR, k int) {
	n := len(wr)
	for i := 0; i < k; i += n {
		for j := range wr {
			wr[j].WRID = uint64(i + j)
		}
		must(q.PostRecv(wr))
	}
}

// postBatch posts k work requests from A, len(wr) per call, the last one
// signaled.
func postBatch(wr []verbs.SendWR, k int) {
	n := len(wr)
	for i := 0; i < k; i += n {
		for j := range wr {
			wr[j].WRID = uint64(i + j)
			wr[j].Flags = 0
		}
		if i+n == k {
			wr[n-1].Flags = verbs.SendSignaled
		}
		must(p.a.qp.PostSend(wr))
	}
}

// postSend posts batches of 256 WRITEs or SENDs, n per call (the batch's
// last signaled), only the posts timed; ns per work request.
func postSend(write bool, n int) float64 {
	const rounds, k = 8, 256
	wr, rwr := sendList(write, n), recvWR(0)
	var total time.Duration
	for r := 0; r < rounds; r++ {
		if !write {
			postRecvs(p.b.qp, rwr, k)
		}
		t0 := time.Now()
		postBatch(wr, k)
		total += time.Since(t0)
		waitCQ(p.a.scq, 1)
		if !write {
			waitCQ(p.b.rcq, k)
		}
	}
	return float64(total.Nanoseconds()) / (rounds * k)
}

func roundTrip(write bool) float64 {
	const n, chunk = 1000, 500
	swr, rwr := sendWR(write, 0), recvWR(0)
	wc := make([]verbs.WorkCompletion, 1)
	var total time.Duration
	for c := 0; c < n; c += chunk {
		if !write {
			postRecvs(p.b.qp, rwr, chunk)
		}
		t0 := time.Now()
		for i := 0; i < chunk; i++ {
			signal(swr, i, true)
			must(p.a.qp.PostSend(swr))
			for poll(p.a.scq, wc) == 0 {
			}
		}
		total += time.Since(t0)
		if !write {
			waitCQ(p.b.rcq, chunk)
		}
	}
	return float64(total.Nanoseconds()) / n
}

const ppN = 1000

// pp is one side of the ping-pong, with its own work requests and
// completion buffers (the two sides may run on two threads).
type pp struct {
	s    side
	rwr  []verbs.RecvWR
	swr  []verbs.SendWR
	rwc  []verbs.WorkCompletion
	swc  []verbs.WorkCompletion
	sent int
}

func newPP(s side) *pp {
	x := &pp{s: s, rwr: recvWR(0), swr: sendWR(false, 0),
		rwc: make([]verbs.WorkCompletion, 1), swc: make([]verbs.WorkCompletion, 16)}
	for i := 0; i < 64; i++ {
		must(s.qp.PostRecv(x.rwr))
	}
	return x
}

func (x *pp) recv() {
	for poll(x.s.rcq, x.rwc) == 0 {
	}
	must(x.s.qp.PostRecv(x.rwr))
}

func (x *pp) send(i int) {
	signal(x.swr, i, i%32 == 31)
	must(x.s.qp.PostSend(x.swr))
	poll(x.s.scq, x.swc)
}

func opPingpong1() float64 {
	a, b := newPP(p.a), newPP(p.b)
	t0 := time.Now()
	for i := 0; i < ppN; i++ {
		a.send(i)
		b.recv()
		b.send(i)
		a.recv()
	}
	return float64(time.Since(t0).Nanoseconds()) / ppN
}

// measureCPU is the vCPU the single-thread rows run on, in bench-c and
// bench-cgo too: the measuring goroutine is locked to one thread and the
// thread to one vCPU in all three, so no row depends on where the scheduler
// moves it. BENCH_UNPINNED (set and not empty) leaves it unbound (-1), as
// all three were before.
var measureCPU = 1

// setCPU binds the calling thread to one vCPU, or to all of them when cpu
// is negative; the goroutine must be locked to its thread.
func setCPU(cpu int) {
	var set unix.CPUSet
	if cpu < 0 {
		for c := 0; c < runtime.NumCPU(); c++ {
			set.Set(c)
		}
	} else {
		set.Set(cpu)
	}
	must(unix.SchedSetaffinity(0, &set))
}

// pin locks the goroutine to its thread and binds the thread to cpu.
func pin(cpu int) {
	runtime.LockOSThread()
	setCPU(cpu)
}

// unpin undoes pin for a goroutine that is about to end.
func unpin() {
	setCPU(-1)
	runtime.UnlockOSThread()
}

func opPingpong2() float64 {
	a, b := newPP(p.a), newPP(p.b)
	if measureCPU < 0 {
		pin(0)
		defer unpin()
	} else {
		setCPU(0)
		defer setCPU(measureCPU)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	t0 := time.Now()
	go func() {
		defer wg.Done()
		pin(1)
		defer unpin()
		for i := 0; i < ppN; i++ {
			b.recv()
			b.send(i)
		}
	}()
	for i := 0; i < ppN; i++ {
		a.send(i)
		a.recv()
	}
	wg.Wait()
	return float64(time.Since(t0).Nanoseconds()) / ppN
}

// msgrateN and scaleN are the messages of the message-rate row and of
// each thread of the scaling rows, as in bench-c.
const msgrateN, scaleN = 20000, 10000

// msgrate posts n signaled 64-byte WRITEs with at most 64 outstanding and
// returns thousands of messages per second.
func msgrate(p *pair, n, off int) float64 {
	swr := sendWR(true, off)
	wc := make([]verbs.WorkCompletion, 16)
	posted, done := 0, 0
	t0 := time.Now()
	for done < n {
		for posted < n && posted-done < 64 {
			signal(swr, posted, true)
			must(p.a.qp.PostSend(swr))
			posted++
		}
		done += poll(p.a.scq, wc)
	}
	return float64(n) / time.Since(t0).Seconds() / 1e3
}

// msgrateSend is bench-c's msgrate_send: SENDs, B's receive queue kept
// full by posting one receive again per receive completion.
func msgrateSend() float64 {
	const n = msgrateN
	swr, rwr := sendWR(false, 0), recvWR(0)
	wc := make([]verbs.WorkCompletion, 16)
	postRecvs(p.b.qp, rwr, depth)
	posted, done, recvd := 0, 0, 0
	t0 := time.Now()
	for done < n || recvd < n {
		for posted < n && posted-done < 64 && posted-recvd < depth {
			signal(swr, posted, true)
			must(p.a.qp.PostSend(swr))
			posted++
		}
		done += poll(p.a.scq, wc)
		got := poll(p.b.rcq, wc)
		for i := 0; i < got; i++ {
			rwr[0].WRID = uint64(recvd + i)
			must(p.b.qp.PostRecv(rwr))
		}
		recvd += got
	}
	return float64(n) / time.Since(t0).Seconds() / 1e3
}

// msgTimed runs the message-rate loop once more with every post timed on
// its own (a clock read on each side of PostSend) and prints four rows
// that say where a message's time goes: the cost of one clock read (every
// timed post includes one), the median post (its doorbell system call),
// the time per message lost in posts more than three times the median
// (the measuring thread interrupted: timer ticks and softirqs in every
// program, and in Go the runtime's preemption of a goroutine that runs for
// more than 10 ms), and the time per message outside PostSend (polling and
// the loop). bench-c's msgtimed rows are the same loop. The loop is
// msgrate's, copied rather than given a timing flag, so that the
// message-rate row keeps exactly the loop bench-c's row runs.
func msgTimed(p *pair, n int) {
	d := make([]int64, n)
	swr := sendWR(true, 0)
	wc := make([]verbs.WorkCompletion, 16)
	posted, done := 0, 0
	t0 := time.Now()
	for done < n {
		for posted < n && posted-done < 64 {
			signal(swr, posted, true)
			ta := time.Since(t0) // one monotonic clock read, as bench-c's
			must(p.a.qp.PostSend(swr))
			d[posted] = int64(time.Since(t0) - ta)
			posted++
		}
		done += poll(p.a.scq, wc)
	}
	reportTimed("msgtimed", d, t0, time.Since(t0))
}

// msgTimedSend is msgTimed for msgrateSend's loop (SENDs, B's receive
// queue kept full), copied from it as msgTimed is from msgrate: the rows
// msgtimed_send_*, for a device that carries no RDMA WRITE (qemu's pvrdma
// model). Only A's PostSend is timed; B's receive reposts fall in
// "other". It runs on a pair of its own: msgrateSend leaves B's receive
// queue full on the shared one when both rows run in one process.
func msgTimedSend(n int) {
	p := newPair()
	d := make([]int64, n)
	swr, rwr := sendWR(false, 0), recvWR(0)
	wc := make([]verbs.WorkCompletion, 16)
	postRecvs(p.b.qp, rwr, depth)
	posted, done, recvd := 0, 0, 0
	t0 := time.Now()
	for done < n || recvd < n {
		for posted < n && posted-done < 64 && posted-recvd < depth {
			signal(swr, posted, true)
			ta := time.Since(t0)
			must(p.a.qp.PostSend(swr))
			d[posted] = int64(time.Since(t0) - ta)
			posted++
		}
		done += poll(p.a.scq, wc)
		got := poll(p.b.rcq, wc)
		for i := 0; i < got; i++ {
			rwr[0].WRID = uint64(recvd + i)
			must(p.b.qp.PostRecv(rwr))
		}
		recvd += got
	}
	reportTimed("msgtimed_send", d, t0, time.Since(t0))
}

// reportTimed prints the four rows of a timed message-rate loop under
// prefix: d holds each post's time and total the loop's; t0 is the
// loop's start, which the clock reads timing one read also use.
func reportTimed(prefix string, d []int64, t0 time.Time, total time.Duration) {
	n := len(d)
	var sum int64
	for _, v := range d {
		sum += v
	}
	slices.Sort(d)
	med := d[n/2]
	var stall int64
	for _, v := range d {
		if v > 3*med {
			stall += v - med
		}
	}
	// What one clock read costs, part of every timed post.
	const reads = 10000
	tc := time.Since(t0)
	for i := 0; i < reads; i++ {
		_ = time.Since(t0)
	}
	clock := float64(time.Since(t0)-tc) / reads
	fmt.Printf("%s_clock_read\t%.1f\tns\n", prefix, clock)
	fmt.Printf("%s_post_median\t%d\tns\n", prefix, med)
	fmt.Printf("%s_stall_per_msg\t%.1f\tns\n", prefix, float64(stall)/float64(n))
	fmt.Printf("%s_other_per_msg\t%.1f\tns\n", prefix, float64(int64(total)-sum)/float64(n))
}

var scalePairs []*pair

func scale(threads int) float64 {
	for len(scalePairs) < threads {
		scalePairs = append(scalePairs, newPair())
	}
	const n = scaleN
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := 0; i < threads; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pin(i)
			defer unpin()
			msgrate(scalePairs[i], n, i*256)
		}()
	}
	wg.Wait()
	return float64(threads*n) / time.Since(t0).Seconds() / 1e3
}

func main() {
	log.SetFlags(0)
	if os.Getenv("BENCH_UNPINNED") != "" {
		measureCPU = -1
	} else {
		pin(measureCPU)
	}
	open()
	p = newPair()
	ops := []struct {
		name, unit string
		f          func() float64
	}{
		{"post_recv", "ns", func() float64 { return opPostRecv(1) }},
		{"post_recv_list32", "ns", func() float64 { return opPostRecv(list) }},
		{"post_recv_rts", "ns", func() float64 { return postRecvRTS(1) }},
		{"post_recv_rts_list32", "ns", func() float64 { return postRecvRTS(list) }},
		{"poll_cq_empty_1", "ns", func() float64 { return pollEmpty(1) }},
		{"poll_cq_empty_16", "ns", func() float64 { return pollEmpty(16) }},
		{"post_send_write_64", "ns", func() float64 { return postSend(true, 1) }},
		{"post_send_write_64_list32", "ns", func() float64 { return postSend(true, list) }},
		{"post_send_send_64", "ns", func() float64 { return postSend(false, 1) }},
		{"post_send_send_64_list32", "ns", func() float64 { return postSend(false, list) }},
		{"round_write_64", "ns", func() float64 { return roundTrip(true) }},
		{"round_send_64", "ns", func() float64 { return roundTrip(false) }},
		{"pingpong_send_64_1t", "ns", opPingpong1},
		{"pingpong_send_64_2t", "ns", opPingpong2},
		{"msgrate_write_64_w64", "kmsg/s", func() float64 { return msgrate(p, msgrateN, 0) }},
		{"msgrate_send_64_w64", "kmsg/s", msgrateSend},
	}
	for t := 1; t <= runtime.NumCPU(); t++ {
		ops = append(ops, struct {
			name, unit string
			f          func() float64
		}{fmt.Sprintf("scale_write_64_w64_x%d", t), "kmsg/s", func() float64 { return scale(t) }})
	}
	for _, op := range ops {
		if !wanted(op.name) {
			continue
		}
		fmt.Printf("%s\t%.1f\t%s\n", op.name, op.f(), op.unit)
	}
	// The timed message-rate loop is a diagnosis, not an operation: it
	// runs only when an argument names it.
	if len(os.Args) > 1 && wanted("msgtimed") {
		msgTimed(p, msgrateN)
	}
	if len(os.Args) > 1 && wanted("msgtimed_send") {
		msgTimedSend(msgrateN)
	}
}

// wanted says whether the command line selects the row: no arguments
// select every row; an argument the rows its text starts, or with a
// trailing "$" the one row of exactly that name.
func wanted(name string) bool {
	if len(os.Args) < 2 {
		return true
	}
	for _, a := range os.Args[1:] {
		if exact, ok := strings.CutSuffix(a, "$"); ok {
			if name == exact {
				return true
			}
		} else if strings.HasPrefix(name, a) {
			return true
		}
	}
	return false
}
