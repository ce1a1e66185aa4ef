// Command bench-cgo is the cgo column of `make bench`: the operations of
// bench/c/main.c with the loops in Go and every verbs call made through
// cgo into libibverbs (the same C wrappers bench-c inlines). It is its own
// module so that goverbs itself stays cgo-free. Output as bench-c's.
package main

/*
#cgo CFLAGS: -O2 -I${SRCDIR}/../c
#cgo LDFLAGS: -libverbs -lpthread
#include "bench.h"
*/
import "C"

import (
	"fmt"
	"log"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"
)

var (
	dev *C.struct_bp_dev
	p   *C.struct_bp_pair
)

func ok(rc C.int) {
	if rc != 0 {
		_, file, line, _ := runtime.Caller(1)
		log.Fatalf("bench-cgo: %s:%d: error %d", file, line, rc)
	}
}

func poll(cq *C.struct_ibv_cq, wc []C.struct_ibv_wc) int {
	n := C.bp_poll(cq, C.int(len(wc)), &wc[0])
	if n < 0 {
		log.Fatal("bench-cgo: failed completion")
	}
	return int(n)
}

func waitCQ(cq *C.struct_ibv_cq, n int) {
	var wc [16]C.struct_ibv_wc
	for n > 0 {
		n -= poll(cq, wc[:min(n, 16)])
	}
}

// postRecvs posts k receives on qp, numbered 0 to k-1, single or as
// lists of BP_LIST (bench-c's post_recvs).
func postRecvs(qp *C.struct_ibv_qp, k int, list bool) {
	if list {
		for i := 0; i < k; i += C.BP_LIST {
			ok(C.bp_post_recv_list(dev, qp, C.uint64_t(i)))
		}
		return
	}
	for i := 0; i < k; i++ {
		ok(C.bp_post_recv(dev, qp, C.uint64_t(i), 0))
	}
}

// postSends posts k WRITEs or SENDs on A, numbered 0 to k-1, the last
// signaled, single or as lists of BP_LIST (bench-c's post_sends).
func postSends(write bool, k int, list bool) {
	if list {
		for i := 0; i < k; i += C.BP_LIST {
			ok(C.bp_post_send_list(dev, p.a.qp, b2i(write), b2i(i+C.BP_LIST == k), C.uint64_t(i)))
		}
		return
	}
	for i := 0; i < k; i++ {
		ok(C.bp_post_send(dev, p.a.qp, b2i(write), b2i(i == k-1), C.uint64_t(i), 0))
	}
}

// opPostRecv is bench-c's post_recv, single (list false) or as lists.
func opPostRecv(list bool) float64 {
	s := C.bp_init_qp(dev)
	var total time.Duration
	const rounds = 40
	for r := 0; r < rounds; r++ {
		t0 := time.Now()
		postRecvs(s.qp, 512, list)
		total += time.Since(t0)
		ok(C.bp_reinit(s.qp))
	}
	return float64(total.Nanoseconds()) / (rounds * 512)
}

// postRecvRTS is bench-c's post_recv_rts: receives on a connected QP,
// consumed by SENDs after each timed batch.
func postRecvRTS(list bool) float64 {
	const rounds, k = 8, 512
	wc := make([]C.struct_ibv_wc, 16)
	var total time.Duration
	for r := 0; r < rounds; r++ {
		t0 := time.Now()
		postRecvs(p.b.qp, k, list)
		total += time.Since(t0)
		postSends(false, k, true)
		waitCQ(p.b.rcq, k)
		waitCQ(p.a.scq, 1)
		for poll(p.a.scq, wc) > 0 { // a device that signals every send left more
		}
	}
	return float64(total.Nanoseconds()) / (rounds * k)
}

var emptyCQ *C.struct_ibv_cq

func pollEmpty(batch int) float64 {
	if emptyCQ == nil {
		emptyCQ = C.ibv_create_cq(dev.ctx, C.BP_CQE, nil, nil, 0)
	}
	wc := make([]C.struct_ibv_wc, batch)
	const n = 200000
	t0 := time.Now()
	for i := 0; i < n; i++ {
		if poll(emptyCQ, wc) != 0 {
			log.Fatal("bench-cgo: empty CQ polled a completion")
		}
	}
	return float64(time.Since(t0).Nanoseconds()) / n
}

func b2i(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// postSend is bench-c's post_send, single (list false) or as lists.
func postSend(write, list bool) float64 {
	const rounds, k = 8, 256
	var total time.Duration
	for r := 0; r < rounds; r++ {
		if !write {
			postRecvs(p.b.qp, k, false)
		}
		t0 := time.Now()
		postSends(write, k, list)
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
	wc := make([]C.struct_ibv_wc, 1)
	var total time.Duration
	for c := 0; c < n; c += chunk {
		if !write {
			postRecvs(p.b.qp, chunk, false)
		}
		t0 := time.Now()
		for i := 0; i < chunk; i++ {
			ok(C.bp_post_send(dev, p.a.qp, b2i(write), 1, C.uint64_t(i), 0))
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

type pp struct {
	s   *C.struct_bp_side
	rwc []C.struct_ibv_wc
	swc []C.struct_ibv_wc
}

func newPP(s *C.struct_bp_side) *pp {
	for i := 0; i < 64; i++ {
		ok(C.bp_post_recv(dev, s.qp, C.uint64_t(i), 0))
	}
	return &pp{s: s, rwc: make([]C.struct_ibv_wc, 1), swc: make([]C.struct_ibv_wc, 16)}
}

func (x *pp) recv() {
	for poll(x.s.rcq, x.rwc) == 0 {
	}
	ok(C.bp_post_recv(dev, x.s.qp, 0, 0))
}

func (x *pp) send(i int) {
	ok(C.bp_post_send(dev, x.s.qp, 0, b2i(i%32 == 31), C.uint64_t(i), 0))
	poll(x.s.scq, x.swc)
}

func opPingpong1() float64 {
	a, b := newPP(&p.a), newPP(&p.b)
	t0 := time.Now()
	for i := 0; i < ppN; i++ {
		a.send(i)
		b.recv()
		b.send(i)
		a.recv()
	}
	return float64(time.Since(t0).Nanoseconds()) / ppN
}

// measureCPU is the vCPU the single-thread rows run on, as in bench-c and
// bench-go; BENCH_UNPINNED (set and not empty) leaves them unbound.
const measureCPU = 1

// pin locks the goroutine to its thread and binds the thread to cpu.
func pin(cpu int) {
	runtime.LockOSThread()
	if C.bp_pin(C.int(cpu)) != 0 {
		log.Fatalf("bench-cgo: cannot bind a thread to vCPU %d", cpu)
	}
}

func opPingpong2() float64 {
	a, b := newPP(&p.a), newPP(&p.b)
	var wg sync.WaitGroup
	res := make(chan float64, 1)
	wg.Add(2)
	go func() { // a, on CPU 0; the locked thread exits with the goroutine
		defer wg.Done()
		pin(0)
		t0 := time.Now()
		for i := 0; i < ppN; i++ {
			a.send(i)
			a.recv()
		}
		res <- float64(time.Since(t0).Nanoseconds()) / ppN
	}()
	go func() {
		defer wg.Done()
		pin(1)
		for i := 0; i < ppN; i++ {
			b.recv()
			b.send(i)
		}
	}()
	wg.Wait()
	return <-res
}

// msgrateN and scaleN are the messages of the message-rate row and of
// each thread of the scaling rows, as in bench-c.
const msgrateN, scaleN = 20000, 10000

func msgrate(p *C.struct_bp_pair, n, off int) float64 {
	wc := make([]C.struct_ibv_wc, 16)
	posted, done := 0, 0
	t0 := time.Now()
	for done < n {
		for posted < n && posted-done < 64 {
			ok(C.bp_post_send(dev, p.a.qp, 1, 1, C.uint64_t(posted), C.int(off)))
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
	wc := make([]C.struct_ibv_wc, 16)
	postRecvs(p.b.qp, C.BP_DEPTH, false)
	posted, done, recvd := 0, 0, 0
	t0 := time.Now()
	for done < n || recvd < n {
		for posted < n && posted-done < 64 && posted-recvd < C.BP_DEPTH {
			ok(C.bp_post_send(dev, p.a.qp, 0, 1, C.uint64_t(posted), 0))
			posted++
		}
		done += poll(p.a.scq, wc)
		got := poll(p.b.rcq, wc)
		for i := 0; i < got; i++ {
			ok(C.bp_post_recv(dev, p.b.qp, C.uint64_t(recvd+i), 0))
		}
		recvd += got
	}
	return float64(n) / time.Since(t0).Seconds() / 1e3
}

var scalePairs []*C.struct_bp_pair

func scale(threads int) float64 {
	for len(scalePairs) < threads {
		scalePairs = append(scalePairs, C.bp_pair_new(dev))
	}
	const n = scaleN
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := 0; i < threads; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pin(i) // the locked thread exits with the goroutine
			msgrate(scalePairs[i], n, i*256)
		}()
	}
	wg.Wait()
	return float64(threads*n) / time.Since(t0).Seconds() / 1e3
}

func main() {
	log.SetFlags(0)
	if os.Getenv("BENCH_UNPINNED") == "" {
		pin(measureCPU)
	}
	if dev = C.bp_open(nil); dev == nil {
		os.Exit(1)
	}
	if p = C.bp_pair_new(dev); p == nil {
		os.Exit(1)
	}
	type op struct {
		name, unit string
		f          func() float64
	}
	ops := []op{
		{"post_recv", "ns", func() float64 { return opPostRecv(false) }},
		{"post_recv_list32", "ns", func() float64 { return opPostRecv(true) }},
		{"post_recv_rts", "ns", func() float64 { return postRecvRTS(false) }},
		{"post_recv_rts_list32", "ns", func() float64 { return postRecvRTS(true) }},
		{"poll_cq_empty_1", "ns", func() float64 { return pollEmpty(1) }},
		{"poll_cq_empty_16", "ns", func() float64 { return pollEmpty(16) }},
		{"post_send_write_64", "ns", func() float64 { return postSend(true, false) }},
		{"post_send_write_64_list32", "ns", func() float64 { return postSend(true, true) }},
		{"post_send_send_64", "ns", func() float64 { return postSend(false, false) }},
		{"post_send_send_64_list32", "ns", func() float64 { return postSend(false, true) }},
		{"round_write_64", "ns", func() float64 { return roundTrip(true) }},
		{"round_send_64", "ns", func() float64 { return roundTrip(false) }},
		{"pingpong_send_64_1t", "ns", opPingpong1},
		{"pingpong_send_64_2t", "ns", opPingpong2},
		{"msgrate_write_64_w64", "kmsg/s", func() float64 { return msgrate(p, msgrateN, 0) }},
		{"msgrate_send_64_w64", "kmsg/s", msgrateSend},
	}
	for t := 1; t <= runtime.NumCPU(); t++ {
		ops = append(ops, op{fmt.Sprintf("scale_write_64_w64_x%d", t), "kmsg/s", func() float64 { return scale(t) }})
	}
	for _, o := range ops {
		if wanted(o.name) {
			fmt.Printf("%s\t%.1f\t%s\n", o.name, o.f(), o.unit)
		}
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
