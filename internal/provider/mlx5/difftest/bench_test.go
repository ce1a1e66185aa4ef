package difftest

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/internal/uverbshook"
	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/verbs"
)

// The sizes of c/bench.c.
const (
	benchBatch  = 512  // posts per timed stretch (the queues hold 1024)
	benchRing   = 1024 // entries of each CQ
	benchList   = 32   // work requests per list (post_send_list32)
	benchMRSize = 65536
	benchWarm   = 200 // batches before the timed ones
)

// TestBenchNative is the Go half of make bench-mlx5: it times the row
// MLX5_BENCH_ROW through goverbs' public API on the Go fake kernel, doing
// per operation what c/bench.c does through libibverbs and libmlx5, and
// prints "bench ROW NS ALLOCS": nanoseconds and heap allocations per
// operation. The make target runs it pinned to one CPU, in a test binary
// of its own per row; it fails when a post or a poll does not do what
// the row expects.
func TestBenchNative(t *testing.T) {
	row := os.Getenv("MLX5_BENCH_ROW")
	if row == "" {
		testutil.SkipOptIn(t, "make bench-mlx5 runs it (MLX5_BENCH_ROW: the row to time)")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	dev := devicePath(t)
	d, err := loadDevice(dev)
	if err != nil {
		t.Fatal(err)
	}
	var trace strings.Builder
	k := newFakeKernel(d, &trace)
	defer uverbshook.Install(k)()
	defer k.close()
	b := setupBench(t, k)
	ns, allocs := b.run(t, row)
	fmt.Printf("bench %s %.2f %.3f\n", row, ns, allocs)
}

// ring is a CQ ring the benchmark writes CQEs into itself, as
// c/bench.c's struct ring: every CQE a copy of the one the fake wrote
// first (tmpl), with the owner bit of the slot's pass.
type ring struct {
	cq       *cq.CQ
	buf      []byte
	nent, pi uint32
	tmpl     [64]byte
}

// init has the fake write one CQE (spec) into the index-th CQ created,
// polls it and keeps it as the template.
func (r *ring) init(t *testing.T, k *fakeKernel, q *cq.CQ, index int, spec string) {
	r.cq = q
	k.mu.Lock()
	c := k.cqs[index]
	r.buf, r.nent = c.buf, c.nent
	k.mu.Unlock()
	if err := k.inject(index, spec); err != nil {
		t.Fatal(err)
	}
	var wc [1]verbs.WorkCompletion
	if n, err := q.Poll(wc[:]); n != 1 || err != nil || wc[0].Status != verbs.WCSuccess {
		t.Fatalf("template CQE: %d %v %v", n, err, wc[0].Status)
	}
	copy(r.tmpl[:], r.buf[:64])
	r.pi = 1
}

// put writes a whole CQE, with wqe_counter wqe, into the next slot.
func (r *ring) put(wqe uint16) {
	s := r.buf[(r.pi&(r.nent-1))*64:][:64]
	copy(s[:60], r.tmpl[:60])
	s[60] = byte(wqe >> 8)
	s[61] = byte(wqe)
	s[62] = r.tmpl[62]
	s[63] = r.tmpl[63]&0xfe | byte((r.pi/r.nent)&1)
	r.pi++
}

// arm makes the next slot, which holds the template already, a valid CQE
// of this pass: one byte, op_own.
func (r *ring) arm() {
	*(*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(r.buf)), (r.pi&(r.nent-1))*64+63)) = r.tmpl[63]&0xfe | byte((r.pi/r.nent)&1)
	r.pi++
}

type bench struct {
	qp     *qp.QP
	sr, rr ring
	swr    [benchList]verbs.SendWR
	rwr    [1]verbs.RecvWR
	data   []byte // the 64 bytes a SEND carries
}

// setupBench makes c/bench.c's objects: a PD, an MR, a send and a receive
// CQ, an RC QP in RTS; one SEND and one receive whose completions are the
// templates of the CQEs after.
func setupBench(t *testing.T, k *fakeKernel) *bench {
	ctx, err := verbs.OpenDevice(verbs.Device{Name: k.dev.Name, Driver: verbs.DriverMLX5, Path: "/dev/infiniband/uverbs0", Ports: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctx.Close() })
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	buf, err := unix.Mmap(-1, 0, benchMRSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(buf) })
	for i := range buf {
		buf[i] = 7
	}
	m, err := mr.Register(pd, buf, mr.LocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	scq, err := cq.New(ctx, cq.Options{CQE: benchRing - 1})
	if err != nil {
		t.Fatal(err)
	}
	rcq, err := cq.New(ctx, cq.Options{CQE: benchRing - 1})
	if err != nil {
		t.Fatal(err)
	}
	q, err := qp.New(pd, qp.Options{Type: qp.RC, SendCQ: scq, RecvCQ: rcq,
		Caps: qp.Caps{MaxSendWR: 1024, MaxRecvWR: 1024, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 64}})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		a    qp.Attr
		mask qp.AttrMask
	}{
		{qp.Attr{State: qp.Init, Port: 1, Access: mr.LocalWrite}, qp.MaskState | qp.MaskPkeyIndex | qp.MaskPort | qp.MaskAccessFlags},
		{qp.Attr{State: qp.RTR, PathMTU: verbs.MTU1024, DestQPN: 0x777, MaxDestRDAtomic: 1, MinRNRTimer: 12,
			Path: verbs.AHAttr{DLID: 2, Port: 1}},
			qp.MaskState | qp.MaskAV | qp.MaskPathMTU | qp.MaskDestQPN | qp.MaskRQPSN | qp.MaskMaxDestRDAtomic | qp.MaskMinRNRTimer},
		{qp.Attr{State: qp.RTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRDAtomic: 1},
			qp.MaskState | qp.MaskTimeout | qp.MaskRetryCnt | qp.MaskRNRRetry | qp.MaskSQPSN | qp.MaskMaxQPRDAtomic},
	}
	for _, s := range steps {
		if err := q.Modify(&s.a, s.mask); err != nil {
			t.Fatal(err)
		}
	}
	b := &bench{qp: q, data: buf[:64]}
	sge := []verbs.SGE{{Addr: uint64(uintptr(unsafe.Pointer(&buf[0]))), Length: 64, LKey: m.LKey()}}
	for i := range b.swr {
		b.swr[i] = verbs.SendWR{WRID: uint64(i + 1), Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGList: sge}
	}
	b.rwr[0] = verbs.RecvWR{WRID: 1, SGList: sge}
	if err := q.PostSend(b.swr[benchList-1:]); err != nil {
		t.Fatal(err)
	}
	if err := q.PostRecv(b.rwr[:]); err != nil {
		t.Fatal(err)
	}
	b.sr.init(t, k, scq, 0, fmt.Sprintf("qpn=%d req sop=10", q.QPN()))
	b.rr.init(t, k, rcq, 1, fmt.Sprintf("qpn=%d resp_send bytes=64", q.QPN()))
	return b
}

// pollN polls n completions, 16 at a time.
func pollN(t *testing.T, q *cq.CQ, n int) {
	var wc [16]verbs.WorkCompletion
	for n > 0 {
		k := min(n, 16)
		if got, err := q.Poll(wc[:k]); got != k || err != nil {
			t.Fatalf("poll: %d of %d: %v", got, k, err)
		}
		n -= k
	}
}

// run times row as c/bench.c's main does: benchWarm batches, then
// 2000 timed ones, each timed on its own. It returns the median
// batch's nanoseconds per operation and the allocations per operation of
// the timed batches (the untimed steps between them included).
func (b *bench) run(t *testing.T, row string) (float64, float64) {
	// Timed batches: 2000, or MLX5_BENCH_BATCHES (a longer run for a
	// profile).
	benchBatches := 2000
	if v, err := strconv.Atoi(os.Getenv("MLX5_BENCH_BATCHES")); err == nil && v >= 2 {
		benchBatches = v
	}
	lat := make([]time.Duration, benchBatches)
	per := 0 // operations per batch
	var ms runtime.MemStats
	var mallocs uint64
	batch := func(i int, d time.Duration) {
		if i == benchWarm {
			runtime.ReadMemStats(&ms)
			mallocs = ms.Mallocs
		}
		if i >= benchWarm {
			lat[i-benchWarm] = d
		}
	}
	switch row {
	case "post_send", "post_send_list32", "post_send_inline64":
		// Batches of benchBatch work requests, timed; after each,
		// untimed, one requester CQE for the last WQE frees the send
		// queue.
		listed, inl := row == "post_send_list32", row == "post_send_inline64"
		wr := b.swr[benchList-1:] // one work request: the list's last
		if inl {
			wr[0].Flags |= verbs.SendInline
			wr[0].InlineData = b.data
		}
		bbs, posted := uint32(1), uint32(1) // WQE basic blocks per work request, and in all
		if inl {
			bbs = 2
		}
		per = benchBatch
		for i := range benchWarm + benchBatches {
			t0 := time.Now()
			if listed {
				for range benchBatch / benchList {
					if err := b.qp.PostSend(b.swr[:]); err != nil {
						t.Fatal(err)
					}
				}
			} else {
				for range benchBatch {
					if err := b.qp.PostSend(wr); err != nil {
						t.Fatal(err)
					}
				}
			}
			batch(i, time.Since(t0))
			posted += benchBatch * bbs
			b.sr.put(uint16(posted - bbs))
			pollN(t, b.sr.cq, 1)
		}
	case "post_recv":
		// Batches of benchBatch receives, timed; after each, untimed, as
		// many responder CQEs consume them.
		per = benchBatch
		for i := range benchWarm + benchBatches {
			t0 := time.Now()
			for range benchBatch {
				if err := b.qp.PostRecv(b.rwr[:]); err != nil {
					t.Fatal(err)
				}
			}
			batch(i, time.Since(t0))
			for range benchBatch {
				b.rr.put(0)
			}
			pollN(t, b.rr.cq, benchBatch)
		}
	case "poll_empty":
		// Polls of an empty CQ with room for 16, 4096 a batch.
		var wc [16]verbs.WorkCompletion
		per = 4096
		for i := range benchWarm + benchBatches {
			t0 := time.Now()
			for range per {
				if n, err := b.sr.cq.Poll(wc[:]); n != 0 || err != nil {
					t.Fatalf("poll: %d %v", n, err)
				}
			}
			batch(i, time.Since(t0))
		}
	case "poll_16":
		// Every slot holds the requester CQE; an operation arms the next
		// 16 (their op_own byte) and polls them with one poll; 64
		// operations a batch.
		var wc [16]verbs.WorkCompletion
		for i := uint32(0); i < b.sr.nent; i++ {
			copy(b.sr.buf[i*64:][:63], b.sr.tmpl[:63])
		}
		per = 64
		for i := range benchWarm + benchBatches {
			t0 := time.Now()
			for range per {
				for range 16 {
					b.sr.arm()
				}
				if n, err := b.sr.cq.Poll(wc[:]); n != 16 || err != nil {
					t.Fatalf("poll: %d %v", n, err)
				}
			}
			batch(i, time.Since(t0))
		}
	default:
		t.Fatalf("unknown row %q", row)
	}
	runtime.ReadMemStats(&ms)
	slices.Sort(lat)
	med := float64(lat[benchBatches/2-1]+lat[benchBatches/2]) / 2
	return med / float64(per), float64(ms.Mallocs-mallocs) / float64(benchBatches*per)
}
