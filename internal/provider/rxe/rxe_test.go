package rxe

import (
	"encoding/binary"
	"reflect"
	"runtime/debug"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/provider/providertest"
	"github.com/goverbs/goverbs/uverbs"
)

// provider.WC (provider.WC's layout, pinned in package provider)
// must mirror struct ib_uverbs_wc, which PollCQ copies into it whole.
func TestWorkCompletionLayout(t *testing.T) {
	wc, abi := reflect.TypeOf(provider.WC{}), reflect.TypeOf(uverbs.Wc{})
	if wc.Size() != abi.Size() {
		t.Fatalf("provider.WC is %d bytes, ib_uverbs_wc %d", wc.Size(), abi.Size())
	}
	pairs := map[string]string{"WRID": "Wr_id", "Status": "Status", "Opcode": "Opcode", "VendorErr": "Vendor_err",
		"ByteLen": "Byte_len", "ImmData": "Ex", "QPNum": "Qp_num", "SrcQP": "Src_qp", "Flags": "Wc_flags",
		"PkeyIndex": "Pkey_index", "SLID": "Slid", "SL": "Sl", "DLIDPathBits": "Dlid_path_bits", "PortNum": "Port_num"}
	for ours, theirs := range pairs {
		a, _ := wc.FieldByName(ours)
		b, _ := abi.FieldByName(theirs)
		if a.Offset != b.Offset || a.Type.Size() != b.Type.Size() {
			t.Errorf("provider.WC.%s at %d (%d bytes), ib_uverbs_wc.%s at %d (%d bytes)",
				ours, a.Offset, a.Type.Size(), theirs, b.Offset, b.Type.Size())
		}
	}
	if unsafe.Sizeof(provider.SGE{}) != unsafe.Sizeof(uverbs.RxeSge{}) {
		t.Fatal("provider.SGE does not match struct rxe_sge")
	}
}

// fakeQueue builds queue memory like the kernel's: header, then slots.
func fakeQueue(t testing.TB, log2, slots uint32) []byte {
	mem := make([]byte, int(offData)+int(slots)<<log2)
	binary.NativeEndian.PutUint32(mem[0:], log2)
	binary.NativeEndian.PutUint32(mem[4:], slots-1)
	return mem
}

func TestPollCQRing(t *testing.T) {
	mem := fakeQueue(t, 7, 8)
	q, err := NewQueue(mem, 48)
	if err != nil {
		t.Fatal(err)
	}
	// The kernel produced 3 CQEs starting at slot 6 (wrapping).
	binary.NativeEndian.PutUint32(mem[offConsumer:], 6)
	for i, slot := range []uint32{6, 7, 0} {
		(*provider.WC)(q.Elem(slot)).WRID = uint64(100 + i)
	}
	binary.NativeEndian.PutUint32(mem[offProducer:], 1)
	wc := make([]provider.WC, 2)
	if n := PollCQ(q, wc); n != 2 || wc[0].WRID != 100 || wc[1].WRID != 101 {
		t.Fatalf("first poll: %d %+v", n, wc)
	}
	if c := q.ConsumerIndex(); c != 0 {
		t.Fatalf("consumer index %d after 2 of 3", c)
	}
	if n := PollCQ(q, wc); n != 1 || wc[0].WRID != 102 {
		t.Fatalf("second poll: %d %+v", n, wc)
	}
	if n := PollCQ(q, wc); n != 0 {
		t.Fatalf("empty ring polled %d", n)
	}
}

func TestRecvRingFullAndWrap(t *testing.T) {
	mem := fakeQueue(t, 6, 4)
	q, err := NewQueue(mem, RecvWQEHeader)
	if err != nil {
		t.Fatal(err)
	}
	r := NewRecvRing(q, 1, providertest.Errors())
	sge := []provider.SGE{{Addr: 0x1000, Length: 64, LKey: 7}}
	err = r.Post([]provider.RecvWR{{WRID: 1, SGList: sge}, {WRID: 2, SGList: sge}, {WRID: 3, SGList: sge}, {WRID: 4, SGList: sge}})
	if !providertest.Is(err, 3, provider.ReasonFull) {
		t.Fatalf("4 receives into 3 usable slots: %v", err)
	}
	if q.ProducerIndex() != 3 || r.Posted() != 3 {
		t.Fatalf("producer %d posted %d", q.ProducerIndex(), r.Posted())
	}
	w := (*uverbs.RxeRecvWqe)(q.Elem(1))
	if w.Id != 2 || w.Dma.Length != 64 || w.Dma.Resid != 64 || w.Dma.Num_sge != 1 {
		t.Fatalf("WQE %+v", w)
	}
	// The kernel consumes two; two more fit and the index wraps.
	binary.NativeEndian.PutUint32(mem[offConsumer:], 2)
	if err := r.Post([]provider.RecvWR{{WRID: 5, SGList: sge}, {WRID: 6, SGList: sge}}); err != nil {
		t.Fatal(err)
	}
	if q.ProducerIndex() != 1 {
		t.Fatalf("producer %d after wrap", q.ProducerIndex())
	}
}

func TestNewQueueRejectsBadHeaders(t *testing.T) {
	for _, mem := range [][]byte{
		make([]byte, 10),
		fakeQueue(t, 7, 8)[:500],      // shorter than its slots
		append(fakeQueue(t, 3, 8), 0), // elements under 64 bytes
		func() []byte { m := fakeQueue(t, 7, 8); binary.NativeEndian.PutUint32(m[4:], 6); return m }(), // mask not 2^n-1
	} {
		if _, err := NewQueue(mem, 48); err == nil {
			t.Errorf("NewQueue accepted a %d-byte mapping with a bad header", len(mem))
		}
	}
}

// FuzzPollCQ: whatever the kernel-shared memory holds (indices, header),
// polling never reads or writes outside the ring, never panics, and
// returns at most what the caller has room for. The ring sits between
// inaccessible guard pages, once flush with the lower guard and once with
// the upper one, so any access outside it faults (TestGuardedFaults shows
// that it does), and the fault fails the input.
func FuzzPollCQ(f *testing.F) {
	f.Add(uint32(7), uint32(15), uint32(3), uint32(9), 4)
	f.Add(uint32(7), uint32(1), uint32(0), uint32(0xffffffff), 1)
	f.Add(uint32(6), uint32(3), uint32(0xfffffffe), uint32(2), 64)
	f.Fuzz(func(t *testing.T, log2, mask, cons, prod uint32, room int) {
		if log2 > 12 || mask > 1<<10 || room < 0 || room > 64 {
			return
		}
		for _, atEnd := range []bool{false, true} {
			mem := guarded(t, int(offData)+int(mask+1)<<log2, atEnd)
			binary.NativeEndian.PutUint32(mem[0:], log2)
			binary.NativeEndian.PutUint32(mem[4:], mask)
			q, err := NewQueue(mem, 48)
			if err != nil {
				return
			}
			binary.NativeEndian.PutUint32(mem[offConsumer:], cons)
			binary.NativeEndian.PutUint32(mem[offProducer:], prod)
			wc := make([]provider.WC, room)
			n, fault := pollCatchingFaults(q, wc)
			if fault != nil {
				t.Fatalf("log2 %d mask %#x consumer %#x producer %#x room %d: polling touched memory outside the ring: %v",
					log2, mask, cons, prod, room, fault)
			}
			if n < 0 || n > room {
				t.Fatalf("polled %d into %d", n, room)
			}
		}
	})
}

// pollCatchingFaults polls, turning a memory fault into an error.
func pollCatchingFaults(q *Queue, wc []provider.WC) (n int, fault any) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() { fault = recover() }()
	return PollCQ(q, wc), nil
}

// guarded maps n bytes between two inaccessible pages: flush with the
// upper one when atEnd, else with the lower one.
func guarded(t testing.TB, n int, atEnd bool) []byte {
	t.Helper()
	page := unix.Getpagesize()
	data := (n + page - 1) / page * page
	m, err := unix.Mmap(-1, 0, data+2*page, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(m) })
	if err := unix.Mprotect(m[page:page+data], unix.PROT_READ|unix.PROT_WRITE); err != nil {
		t.Fatal(err)
	}
	off := page
	if atEnd {
		off = page + data - n
	}
	return m[off : off+n : off+n]
}

// sink keeps TestGuardedFaults' reads from being optimized away.
var sink byte

// The guard pages FuzzPollCQ relies on do fault: a read one byte before
// or after the guarded memory is caught.
func TestGuardedFaults(t *testing.T) {
	for _, atEnd := range []bool{false, true} {
		mem := guarded(t, 1000, atEnd)
		p := unsafe.Pointer(&mem[0])
		for _, off := range []int{-1, len(mem)} {
			if atEnd != (off > 0) {
				continue // within the page, not the guard
			}
			fault := func() (fault any) {
				defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
				defer func() { fault = recover() }()
				sink = *(*byte)(unsafe.Add(p, off))
				return nil
			}()
			if fault == nil {
				t.Errorf("reading byte %d of a %d-byte guarded mapping (flush with the %s guard) did not fault", off, len(mem), map[bool]string{false: "lower", true: "upper"}[atEnd])
			}
		}
	}
}

// TestWriteRecv1MatchesWriteRecv: the single-SGE fast path writes the same
// bytes as the general one, over an element full of stale bytes.
func TestWriteRecv1MatchesWriteRecv(t *testing.T) {
	wr := provider.RecvWR{WRID: 0x1122334455667788, SGList: []provider.SGE{{Addr: 0xdead0000beef, Length: 4096, LKey: 0x4242}}}
	var a, b [128]byte
	for i := range a {
		a[i], b[i] = 0xa5, 0xa5
	}
	WriteRecv(unsafe.Pointer(&a), &wr)
	writeRecv1(unsafe.Pointer(&b), &wr)
	if a != b {
		t.Fatalf("writeRecv1 wrote\n%x\nWriteRecv\n%x", b, a)
	}
	w := (*uverbs.RxeRecvWqe)(unsafe.Pointer(&b))
	sge := *(*provider.SGE)(unsafe.Add(unsafe.Pointer(&b), RecvWQEHeader))
	if w.Id != wr.WRID || w.Dma.Length != 4096 || w.Dma.Resid != 4096 || w.Dma.Num_sge != 1 || w.Dma.Cur_sge != 0 || w.Dma.Sge_offset != 0 || sge != wr.SGList[0] {
		t.Fatalf("WQE %+v, SGE %+v", w, sge)
	}
}

// TestCQReady checks the emptiness test the generic Poll reads before it
// calls Poll: it must say "pending" exactly when Poll would return
// something, across a wrap and a resize.
func TestCQReady(t *testing.T) {
	mem := fakeQueue(t, 7, 8)
	q, err := NewQueue(mem, 48)
	if err != nil {
		t.Fatal(err)
	}
	binary.NativeEndian.PutUint32(mem[offConsumer:], 6)
	binary.NativeEndian.PutUint32(mem[offProducer:], 6)
	c := &cq{}
	c.setQueue(q)
	r := c.Ready()
	wc := make([]provider.WC, 2)
	check := func(step string, want bool) {
		t.Helper()
		if got := r.Pending(); got != want || c.Pending() != want {
			t.Fatalf("%s: Ready.Pending %v, Pending %v, want %v", step, got, c.Pending(), want)
		}
	}
	check("empty", false)
	binary.NativeEndian.PutUint32(mem[offProducer:], 1) // 3 CQEs: 6, 7, 0
	check("3 produced", true)
	if n := c.Poll(wc); n != 2 {
		t.Fatalf("polled %d", n)
	}
	check("1 left", true)
	if n := c.Poll(wc); n != 1 {
		t.Fatalf("polled %d", n)
	}
	check("all polled (wrapped)", false)
	// A resize maps a new ring whose indices start elsewhere: the test
	// must follow it.
	mem2 := fakeQueue(t, 7, 16)
	q2, err := NewQueue(mem2, 48)
	if err != nil {
		t.Fatal(err)
	}
	binary.NativeEndian.PutUint32(mem2[offConsumer:], 3)
	binary.NativeEndian.PutUint32(mem2[offProducer:], 4)
	c.setQueue(q2)
	if c.Ready() != r {
		t.Fatal("Ready moved")
	}
	check("resized, one copied over", true)
	if n := c.Poll(wc); n != 1 {
		t.Fatalf("polled %d", n)
	}
	check("resized, polled", false)
}
