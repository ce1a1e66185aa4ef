package pvrdma

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"unsafe"

	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/provider/providertest"
	"github.com/goverbs/goverbs/uverbs"
)

// The host tests run the provider over its own buffers (anonymous mmaps,
// as on the device) and a fake UAR page (a plain Go slice) without a
// device: the device's side (writing CQEs, moving consumer indices) is
// done by hand, with byte offsets taken from vmw_pvrdma-abi.h and
// pvrdma_ring.h rather than from the generated types.

var le = binary.LittleEndian

// fakeContext is a context whose UAR is words (w[0] QP, w[1] CQ, w[2] SRQ
// doorbell) and whose QP table has every 16-bit index.
func fakeContext(atomics bool) (*ucontext, []uint32) {
	w := make([]uint32, pageSize/4)
	c := &ucontext{uar: unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), pageSize), atomics: atomics}
	c.qps.init(0) // qp_tab_size 65536: its low 16 bits are 0
	return c, w
}

type okChecker struct{}

func (okChecker) CheckSend(int, *provider.SendWR) (provider.AH, error) { return nil, nil }

// ahChecker passes every work request with the address handle ah.
type ahChecker struct{ ah provider.AH }

func (c ahChecker) CheckSend(int, *provider.SendWR) (provider.AH, error) { return c.ah, nil }

type refuseChecker struct{ err error }

func (c refuseChecker) CheckSend(int, *provider.SendWR) (provider.AH, error) { return nil, c.err }

// u32 is the little-endian word at off of b.
func u32(b []byte, off int) uint32 { return le.Uint32(b[off:]) }

func TestLayoutAndConstants(t *testing.T) {
	if CQESize != 64 || SGESize != 16 || SendHdrSize != 80 || RecvHdrSize != 16 {
		t.Fatalf("sizes: cqe %d sge %d send hdr %d recv hdr %d", CQESize, SGESize, SendHdrSize, RecvHdrSize)
	}
	// The union offsets send.go writes (struct pvrdma_sq_wqe_hdr: wr at 32,
	// rdma {remote_addr, rkey}, atomic {remote_addr, compare_add, swap,
	// rkey}).
	if unsafe.Offsetof(uverbs.PvrdmaSqWqeHdr{}.Wr) != 32 || unsafe.Offsetof(uverbs.PvrdmaSqWqeHdr{}.Ex) != 24 {
		t.Error("pvrdma_sq_wqe_hdr layout")
	}
	// Bit 31 flags are negative in the generated constants.
	recv, poll := int64(uverbs.PVRDMA_UAR_QP_RECV), int64(uverbs.PVRDMA_UAR_CQ_POLL)
	if uarQPRecv != uint32(recv) || uarCQPoll != uint32(poll) || uarQPRecv != 1<<31 ||
		uarQPSend != 1<<30 || uarCQArm != 1<<30 || uarCQArmSol != 1<<29 || uarSRQRecv != 1<<30 ||
		uarQPOffset != 0 || uarCQOffset != 4 || uarSRQOffset != 8 {
		t.Error("UAR doorbell constants")
	}
	// Send opcodes are written as verbs' values: they must be pvrdma's.
	for _, p := range [][2]uint32{
		{uint32(provider.WRRDMAWrite), uverbs.PVRDMA_WR_RDMA_WRITE},
		{uint32(provider.WRRDMAWriteWithImm), uverbs.PVRDMA_WR_RDMA_WRITE_WITH_IMM},
		{uint32(provider.WRSend), uverbs.PVRDMA_WR_SEND},
		{uint32(provider.WRSendWithImm), uverbs.PVRDMA_WR_SEND_WITH_IMM},
		{uint32(provider.WRRDMARead), uverbs.PVRDMA_WR_RDMA_READ},
		{uint32(provider.WRAtomicCmpAndSwp), uverbs.PVRDMA_WR_ATOMIC_CMP_AND_SWP},
		{uint32(provider.WRAtomicFetchAndAdd), uverbs.PVRDMA_WR_ATOMIC_FETCH_AND_ADD},
	} {
		if p[0] != p[1] {
			t.Errorf("opcode %d is pvrdma's %d", p[0], p[1])
		}
	}
	if uint32(provider.WCGRH) != uverbs.PVRDMA_WC_GRH || uint32(provider.WCWithImm) != uverbs.PVRDMA_WC_WITH_IMM ||
		uint32(provider.WCWithInvalidate) != uverbs.PVRDMA_WC_WITH_INVALIDATE {
		t.Error("completion flags")
	}
	if got := (&ucontext{}).FWVersion(1<<32 | 2<<16 | 3); got != "1.2.003" {
		t.Errorf("FWVersion %q", got)
	}
}

func TestRingIndices(t *testing.T) {
	if !idxValid(7, 4) || idxValid(8, 4) || idxValid(1<<31, 4) {
		t.Error("idxValid")
	}
	if idxInc(3, 4) != 4 || idxInc(7, 4) != 0 || idxInc(0, 1) != 1 || idxInc(1, 1) != 0 {
		t.Error("idxInc")
	}
	var st [2]uint32 // prod_tail, cons_head
	r := newRing(unsafe.Pointer(&st), 4)
	if slot, free, ok := r.space(); !ok || !free || slot != 0 {
		t.Fatal("empty ring has no space")
	}
	if _, full, _ := r.data(); full {
		t.Fatal("empty ring has data")
	}
	// Produce and consume across two wraps of the index (2n = 8).
	for i := uint32(0); i < 20; i++ {
		for j := 0; j < 3; j++ {
			slot, free, ok := r.space()
			if !ok || !free || slot != st[0]&3 {
				t.Fatalf("round %d: slot %d free %v ok %v at tail %d head %d", i, slot, free, ok, st[0], st[1])
			}
			r.produce()
		}
		if r.count() != 3 {
			t.Fatalf("round %d: count %d", i, r.count())
		}
		r.produce() // the fourth: full
		if _, free, _ := r.space(); free || r.count() != 4 || st[0] != st[1]^4 {
			t.Fatalf("round %d: full ring (tail %d head %d) has space", i, st[0], st[1])
		}
		for j := 0; j < 4; j++ {
			slot, full, ok := r.data()
			if !ok || !full || slot != st[1]&3 {
				t.Fatalf("round %d: data slot %d full %v", i, slot, full)
			}
			r.consume()
		}
		if _, full, _ := r.data(); full || st[0] != st[1] || st[0] > 7 {
			t.Fatalf("round %d: drained ring tail %d head %d", i, st[0], st[1])
		}
	}
	st = [2]uint32{1, 6} // wrapped: 6, 7, 0 outstanding
	if r.count() != 3 {
		t.Errorf("wrapped count %d", r.count())
	}
	st = [2]uint32{9, 0}
	if _, _, ok := r.space(); ok {
		t.Error("tail 9 of a 4-element ring is valid")
	}
	if _, _, ok := r.data(); ok || r.count() != 0 {
		t.Error("invalid ring has data")
	}
	if pow2(0) != 1 || pow2(1) != 1 || pow2(3) != 4 || pow2(64) != 64 || pow2(65) != 128 {
		t.Error("pow2")
	}
}

// newTestQP makes an RC QP (4 send WQEs of 2 SGEs, 8 receive WQEs of 1
// SGE) over a fake context.
func newTestQP(t *testing.T, atomics bool, typ uint8) (*qp, provider.QPInfo, []uint32) {
	t.Helper()
	c, uar := fakeContext(atomics)
	pq, err := c.NewQP(provider.QPAttr{Type: typ, Cap: uverbs.QpCap{Send_wr: 3, Send_sge: 2, Recv_wr: 5, Recv_sge: 0},
		SendErrors: providertest.Errors(), RecvErrors: providertest.Errors()})
	if err != nil {
		t.Fatal(err)
	}
	p := pq.(*qp)
	t.Cleanup(func() { p.Release() })
	p.resp = uverbs.PvrdmaCreateQpResp{Qpn: 0x11, Handle: 0x105}
	info, err := p.Start(0x11, uverbs.QpCap{})
	if err != nil {
		t.Fatal(err)
	}
	return p, info, uar
}

func TestQPBuffersAndCaps(t *testing.T) {
	p, info, _ := newTestQP(t, false, uverbs.IB_UVERBS_QPT_RC)
	if c := p.CreateCaps(); c != (uverbs.QpCap{Send_wr: 4, Send_sge: 2, Recv_wr: 8, Recv_sge: 1}) {
		t.Errorf("CREATE_QP caps %+v", c)
	}
	// sq WQE: pow2(80 + 2*16) = 128; rq WQE: pow2(16 + 16) = 32.
	if p.sendSz != 128 || p.recvSz != 32 {
		t.Errorf("WQE sizes %d %d", p.sendSz, p.recvSz)
	}
	if p.cmd.Sbuf_addr != addr(p.sbuf) || uintptr(p.cmd.Sbuf_size) != align(pageSize+4*128, pageSize) ||
		p.cmd.Rbuf_addr != addr(p.rbuf) || uintptr(p.cmd.Rbuf_size) != pageSize || p.cmd.Sbuf_addr%uint64(pageSize) != 0 {
		t.Errorf("CREATE_QP driver data %+v", p.cmd)
	}
	if u := p.Udata(); len(u.In) != 32 || len(u.Out) != 8 {
		t.Errorf("udata %d in, %d out", len(u.In), len(u.Out))
	}
	if info.Caps != (provider.Caps{MaxSendWR: 4, MaxSendSGE: 2, MaxRecvWR: 8, MaxRecvSGE: 1}) || info.Recv == nil {
		t.Errorf("caps %+v", info.Caps)
	}
	if qpn, ok := p.ctx.qps.lookup(0x105); !ok || qpn != 0x11 {
		t.Error("QP not in the table under its handle")
	}
	// A kernel without qp_handle in its response: the QP number is the handle.
	c, _ := fakeContext(false)
	pq, _ := c.NewQP(provider.QPAttr{Type: uverbs.IB_UVERBS_QPT_RC, SRQ: true, SendErrors: providertest.Errors()})
	q2 := pq.(*qp)
	defer q2.Release()
	info2, err := q2.Start(0x22, uverbs.QpCap{})
	if err != nil || q2.handle != 0x22 || info2.Recv != nil || q2.rbuf != nil || q2.cmd.Rbuf_size != 0 {
		t.Errorf("SRQ QP: handle %#x, recv %v, rbuf %d, err %v", q2.handle, info2.Recv, len(q2.rbuf), err)
	}
	q2.Release()
	if _, ok := c.qps.lookup(0x22); ok {
		t.Error("released QP still in the table")
	}
}

func TestSendWQEBytes(t *testing.T) {
	p, info, uar := newTestQP(t, true, uverbs.IB_UVERBS_QPT_RC)
	sq := info.Send
	wqe := func(i int) []byte { return p.sbuf[int(pageSize)+i*128 : int(pageSize)+(i+1)*128] }
	for i := 0; i < 4; i++ {
		for j := range wqe(i) {
			wqe(i)[j] = 0xaa // stale contents the header must overwrite
		}
	}
	sge := []provider.SGE{{Addr: 0x1000, Length: 16, LKey: 5}, {Addr: 0x2000, Length: 8, LKey: 6}}
	wrs := []provider.SendWR{
		{WRID: 0x1122334455667788, Opcode: provider.WRRDMAWriteWithImm, SGList: sge, Imm: 0xdeadbeef,
			Flags: provider.SendSignaled | provider.SendFence | provider.SendInline, RemoteAddr: 0xabcdef, RKey: 0x77},
		{WRID: 2, Opcode: provider.WRAtomicCmpAndSwp, SGList: sge[:1], RemoteAddr: 0x8000, RKey: 0x99,
			CompareAdd: 0x1111, Swap: 0x2222, Flags: provider.SendSolicited},
	}
	n, kick, err := sq.Post(wrs, okChecker{})
	if n != 2 || kick || err != nil {
		t.Fatalf("post: %d %v %v", n, kick, err)
	}
	want := make([]byte, 112)
	le.PutUint64(want[0:], 0x1122334455667788)
	le.PutUint32(want[8:], 2)  // num_sge
	le.PutUint32(want[16:], 1) // PVRDMA_WR_RDMA_WRITE_WITH_IMM
	le.PutUint32(want[20:], 3) // SIGNALED | FENCE, no INLINE
	binary.BigEndian.PutUint32(want[24:], 0xdeadbeef)
	le.PutUint64(want[32:], 0xabcdef) // wr.rdma.remote_addr
	le.PutUint32(want[40:], 0x77)     // wr.rdma.rkey
	le.PutUint64(want[80:], 0x1000)
	le.PutUint32(want[88:], 16)
	le.PutUint32(want[92:], 5)
	le.PutUint64(want[96:], 0x2000)
	le.PutUint32(want[104:], 8)
	le.PutUint32(want[108:], 6)
	if got := wqe(0)[:112]; !bytes.Equal(got, want) {
		t.Errorf("RDMA WRITE WITH IMM WQE\n got %x\nwant %x", got, want)
	}
	want = make([]byte, 96)
	le.PutUint64(want[0:], 2)
	le.PutUint32(want[8:], 1)
	le.PutUint32(want[16:], 5) // PVRDMA_WR_ATOMIC_CMP_AND_SWP
	le.PutUint32(want[20:], 4) // SOLICITED
	le.PutUint64(want[32:], 0x8000)
	le.PutUint64(want[40:], 0x1111) // compare_add
	le.PutUint64(want[48:], 0x2222) // swap
	le.PutUint32(want[56:], 0x99)   // rkey
	le.PutUint64(want[80:], 0x1000)
	le.PutUint32(want[88:], 16)
	le.PutUint32(want[92:], 5)
	if got := wqe(1)[:96]; !bytes.Equal(got, want) {
		t.Errorf("CMP_AND_SWP WQE\n got %x\nwant %x", got, want)
	}
	if u32(p.sbuf, 0) != 2 || uar[0] != 1<<30|0x105 {
		t.Errorf("prod_tail %d, QP doorbell %#x", u32(p.sbuf, 0), uar[0])
	}
	// Full after two more; the device consumes two; Transmitted follows
	// its consumer index.
	m := sq.Mark()
	n, _, err = sq.Post([]provider.SendWR{{Opcode: provider.WRSend}, {Opcode: provider.WRSend}, {Opcode: provider.WRSend}}, okChecker{})
	if n != 2 || !providertest.Is(err, 2, provider.ReasonFull) {
		t.Fatalf("full queue: %d %v", n, err)
	}
	if sq.Transmitted(m) || sq.Mark() != 4 {
		t.Error("nothing consumed, yet transmitted")
	}
	le.PutUint32(p.sbuf[4:], 2) // cons_head: the device took the first two
	if !sq.Transmitted(m) || sq.Transmitted(sq.Mark()) {
		t.Error("Transmitted after two taken")
	}
	le.PutUint32(p.sbuf[4:], 4)
	if !sq.Transmitted(sq.Mark()) {
		t.Error("all taken, not transmitted")
	}
	// The generic checker's error is returned as is, before anything.
	cerr := errors.New("checker")
	if n, _, err := sq.Post([]provider.SendWR{{Opcode: provider.WRSend}}, refuseChecker{cerr}); n != 0 || err != cerr {
		t.Errorf("checker error: %d %v", n, err)
	}
	// RESET empties both rings.
	sq.Reset()
	if u32(p.sbuf, 0) != 0 || u32(p.sbuf, 4) != 0 || u32(p.sbuf, 8) != 0 || u32(p.sbuf, 12) != 0 {
		t.Error("Reset left indices")
	}
}

func TestSendRefusals(t *testing.T) {
	_, info, uar := newTestQP(t, false, uverbs.IB_UVERBS_QPT_RC)
	sq := info.Send
	three := make([]provider.SGE, 3)
	for _, tc := range []struct {
		name string
		wr   provider.SendWR
		want provider.Reason
	}{
		{"too many SGEs", provider.SendWR{Opcode: provider.WRSend, SGList: three}, provider.ReasonTooManySGE},
		{"inline", provider.SendWR{Opcode: provider.WRSend, InlineData: []byte("x")}, provider.ReasonNotCapable},
		{"atomic without the capability", provider.SendWR{Opcode: provider.WRAtomicFetchAndAdd}, provider.ReasonNotCapable},
		{"send with invalidate", provider.SendWR{Opcode: provider.WRSendWithInv}, provider.ReasonNotCapable},
		{"local invalidate", provider.SendWR{Opcode: provider.WRLocalInv}, provider.ReasonNotCapable},
		{"bind", provider.SendWR{Opcode: provider.WRBindMW}, provider.ReasonNotCapable},
		{"flush", provider.SendWR{Opcode: provider.WRFlush}, provider.ReasonNotCapable},
		{"atomic write", provider.SendWR{Opcode: provider.WRAtomicWrite}, provider.ReasonNotCapable},
		{"unknown opcode", provider.SendWR{Opcode: 200}, provider.ReasonNotCapable},
	} {
		n, _, err := sq.Post([]provider.SendWR{{Opcode: provider.WRSend}, tc.wr}, okChecker{})
		if n != 1 || !providertest.Is(err, 1, tc.want) {
			t.Errorf("%s: posted %d, %v", tc.name, n, err)
		}
		sq.Reset()
	}
	if uar[0] != 1<<30|0x105 {
		t.Errorf("doorbell %#x", uar[0])
	}
	_, ud, _ := newTestQP(t, true, uverbs.IB_UVERBS_QPT_UD)
	if n, _, err := ud.Send.Post([]provider.SendWR{{Opcode: provider.WRSend}}, okChecker{}); n != 0 || !providertest.Is(err, 0, provider.ReasonNotCapable) {
		t.Errorf("UD send without this provider's AH: %d %v", n, err)
	}
	// An invalid ring state (the device wrote an index out of range).
	p, info2, _ := newTestQP(t, true, uverbs.IB_UVERBS_QPT_RC)
	le.PutUint32(p.sbuf[4:], 99)
	if n, _, err := info2.Send.Post([]provider.SendWR{{Opcode: provider.WRSend}}, okChecker{}); n != 0 || !providertest.Is(err, 0, provider.ReasonState) {
		t.Errorf("invalid ring: %d %v", n, err)
	}
}

func TestRecv(t *testing.T) {
	p, info, uar := newTestQP(t, false, uverbs.IB_UVERBS_QPT_RC)
	rq := info.Recv
	err := rq.Post([]provider.RecvWR{
		{WRID: 0xa1, SGList: []provider.SGE{{Addr: 0x3000, Length: 64, LKey: 7}}},
		{WRID: 0xa2},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 64)
	le.PutUint64(want[0:], 0xa1)
	le.PutUint32(want[8:], 1)
	le.PutUint64(want[16:], 0x3000)
	le.PutUint32(want[24:], 64)
	le.PutUint32(want[28:], 7)
	le.PutUint64(want[32:], 0xa2)
	if !bytes.Equal(p.rbuf[:64], want) {
		t.Errorf("receive WQEs\n got %x\nwant %x", p.rbuf[:64], want)
	}
	if u32(p.sbuf, 8) != 2 || uar[0] != 1<<31|0x105 || rq.Posted() != 2 {
		t.Errorf("rq prod_tail %d, doorbell %#x, posted %d", u32(p.sbuf, 8), uar[0], rq.Posted())
	}
	err = rq.Post([]provider.RecvWR{{WRID: 1}, {WRID: 2, SGList: make([]provider.SGE, 2)}})
	if !providertest.Is(err, 1, provider.ReasonTooManySGE) || rq.Posted() != 3 {
		t.Errorf("too many SGEs: %v, posted %d", err, rq.Posted())
	}
	err = rq.Post(make([]provider.RecvWR, 6))
	if !providertest.Is(err, 5, provider.ReasonFull) || rq.Posted() != 8 {
		t.Errorf("full: %v, posted %d", err, rq.Posted())
	}
	le.PutUint32(p.sbuf[12:], 8) // the device consumed all eight
	if rq.Posted() != 0 {
		t.Errorf("posted %d after consumption", rq.Posted())
	}
	rq.Shut()
	if err := rq.Post(make([]provider.RecvWR, 1)); !providertest.Is(err, 0, provider.ReasonClosed) || rq.Posted() != 0 {
		t.Errorf("after Shut: %v", err)
	}
}

func TestSRQ(t *testing.T) {
	c, uar := fakeContext(false)
	ps, err := c.NewSRQ(provider.SRQAttr{MaxWR: 3, Errors: providertest.Errors()})
	if err != nil {
		t.Fatal(err)
	}
	s := ps.(*srq)
	defer s.Release()
	if wr, sge := s.CreateSize(); wr != 4 || sge != 1 {
		t.Errorf("CREATE_SRQ size %d %d", wr, sge)
	}
	if uintptr(s.cmd.Size) != 3*pageSize || s.cmd.Addr != addr(s.mem) || s.CanResize() {
		t.Errorf("CREATE_SRQ driver data %+v", s.cmd)
	}
	s.resp.Srqn = 9
	info, err := s.Start(1, 0)
	if err != nil || info.Num != 9 {
		t.Fatalf("start: %+v %v", info, err)
	}
	if err := info.Recv.Post([]provider.RecvWR{{WRID: 5, SGList: []provider.SGE{{Addr: 1, Length: 2, LKey: 3}}}}); err != nil {
		t.Fatal(err)
	}
	e := s.mem[pageSize:]
	if le.Uint64(e) != 5 || u32(e, 8) != 1 || le.Uint64(e[16:]) != 1 || u32(e, 24) != 2 || u32(e, 28) != 3 {
		t.Errorf("SRQ WQE %x", e[:32])
	}
	if u32(s.mem, 8) != 1 || u32(s.mem, 0) != 0 || uar[2] != 1<<30|9 {
		t.Errorf("SRQ ring (rx at 8) %d, doorbell %#x", u32(s.mem, 8), uar[2])
	}
	if err := s.Modify(true, func(provider.Udata) error { return nil }); err == nil {
		t.Error("resize accepted")
	}
}

// cqe writes a CQE at slot i of a CQ buffer, the device's way.
func putCQE(mem []byte, i int, wrid, qp uint64, opcode, status, vendor uint32) []byte {
	e := mem[int(pageSize)+i*64 : int(pageSize)+(i+1)*64]
	for j := range e {
		e[j] = 0
	}
	le.PutUint64(e[0:], wrid)
	le.PutUint64(e[8:], qp)
	le.PutUint32(e[16:], opcode)
	le.PutUint32(e[20:], status)
	le.PutUint32(e[40:], vendor)
	return e
}

func newTestCQ(t *testing.T) (*ucontext, *CQ, []uint32) {
	t.Helper()
	c, uar := fakeContext(false)
	pc, err := c.NewCQ(5)
	if err != nil {
		t.Fatal(err)
	}
	q := pc.(*CQ)
	t.Cleanup(func() { q.Release() })
	q.resp.Cqn = 7
	if err := q.Start(8); err != nil {
		t.Fatal(err)
	}
	c.qps.store(0x105, 0x11)
	return c, q, uar
}

func TestCQ(t *testing.T) {
	_, q, uar := newTestCQ(t)
	if q.cmd.Addr != addr(q.mem) || q.cmd.Addr%uint64(pageSize) != 0 || uintptr(q.cmd.Size) != align(pageSize+8*64, pageSize) {
		t.Errorf("CREATE_CQ driver data %+v", q.cmd)
	}
	wc := make([]provider.WC, 4)
	if n := q.Poll(wc); n != 0 || q.Pending() || q.Queued() != 0 {
		t.Fatalf("empty CQ polled %d", n)
	}
	if uar[1] != 7|1<<31 {
		t.Errorf("POLL doorbell %#x", uar[1])
	}
	e := putCQE(q.mem, 0, 0xfeed, 0x00ff0105, uverbs.PVRDMA_WC_RECV_RDMA_WITH_IMM, uverbs.PVRDMA_WC_SUCCESS, 0)
	le.PutUint32(e[24:], 100)                   // byte_len
	copy(e[28:], []byte{1, 2, 3, 4})            // imm_data, network order
	le.PutUint32(e[32:], 0x33)                  // src_qp
	le.PutUint32(e[36:], 1|2|8|16)              // GRH, WITH_IMM, IP_CSUM_OK, WITH_SMAC
	le.PutUint16(e[44:], 1)                     // pkey_index
	le.PutUint16(e[46:], 0x44)                  // slid
	e[48], e[49], e[50] = 3, 5, 1               // sl, dlid_path_bits, port_num
	putCQE(q.mem, 1, 0xdead, 0x999, 0, 0, 0)    // a QP the context does not know: dropped
	putCQE(q.mem, 2, 0xbeef, 0x105, 1, 5, 0x42) // RDMA WRITE flushed
	putCQE(q.mem, 3, 0xcafe, 0x105, 6, 0, 0)    // LSO: no verbs opcode
	le.PutUint32(q.mem[8:], 4)                  // ring_state->rx.prod_tail
	if !q.Pending() || q.Queued() != 4 {
		t.Fatalf("pending %v queued %d", q.Pending(), q.Queued())
	}
	if n := q.Poll(wc); n != 3 {
		t.Fatalf("polled %d", n)
	}
	want := provider.WC{WRID: 0xfeed, Opcode: provider.WCRecvRDMAWithImm, ByteLen: 100,
		ImmData: *(*uint32)(unsafe.Pointer(&[]byte{1, 2, 3, 4}[0])), QPNum: 0x11, SrcQP: 0x33,
		Flags: provider.WCGRH | provider.WCWithImm, PkeyIndex: 1, SLID: 0x44, SL: 3, DLIDPathBits: 5, PortNum: 1}
	if wc[0] != want {
		t.Errorf("receive\n got %+v\nwant %+v", wc[0], want)
	}
	if wc[1].WRID != 0xbeef || wc[1].Opcode != provider.WCRDMAWrite || wc[1].Status != provider.WCWRFlushErr || wc[1].VendorErr != 0x42 {
		t.Errorf("flushed write %+v", wc[1])
	}
	if wc[2].WRID != 0xcafe || wc[2].Status != provider.WCGeneralErr {
		t.Errorf("LSO completion %+v", wc[2])
	}
	if u32(q.mem, 12) != 4 || q.Pending() {
		t.Errorf("cons_head %d", u32(q.mem, 12))
	}
	q.Arm(false)
	if uar[1] != 7|1<<30 {
		t.Errorf("ARM doorbell %#x", uar[1])
	}
	q.Arm(true)
	if uar[1] != 7|1<<29 {
		t.Errorf("ARM_SOL doorbell %#x", uar[1])
	}
	if q.CanResize() {
		t.Error("CanResize")
	}
	// Invalid ring state: nothing is polled.
	le.PutUint32(q.mem[8:], 77)
	if n := q.Poll(wc); n != 0 || q.Queued() != 0 {
		t.Errorf("invalid ring polled %d", n)
	}
}

// TestCQClean removes a QP's completions (a destroyed or reset QP's) from
// a ring that wraps, keeps the other QPs' in order, and leaves Ready and
// Queued in step with the ring.
func TestCQClean(t *testing.T) {
	c, q, _ := newTestCQ(t) // 8 CQEs, indices modulo 16; QP handle 0x105 is QP 0x11
	c.qps.store(0x206, 0x22)
	a := &qp{handle: 0x105, started: true}
	wc := make([]provider.WC, 8)
	// Move the consumer index to 6 so that the CQEs below wrap.
	for i := range 6 {
		putCQE(q.mem, i, 0, 0x206, 0, 0, 0)
	}
	le.PutUint32(q.mem[8:], 6)
	if n := q.Poll(wc); n != 6 {
		t.Fatalf("polled %d", n)
	}
	// Slots 6, 7, 0, 1, 2 (indices 6 to 10): A, B, A, B, B.
	for i, qpOf := range []uint64{0x105, 0x206, 0x105, 0x206, 0x206} {
		putCQE(q.mem, (6+i)%8, uint64(i+1), qpOf, 0, 0, 0)
	}
	le.PutUint32(q.mem[8:], 11)
	q.Clean(&qp{handle: 0x206}) // never started: nothing
	if q.Queued() != 5 {
		t.Fatalf("an unstarted QP's Clean changed the ring: %d queued", q.Queued())
	}
	q.Clean(a)
	if q.Queued() != 3 || !q.Pending() || !q.Ready().Pending() || u32(q.mem, 8) != 11 {
		t.Fatalf("after Clean: queued %d, pending %v, ready %v, prod_tail %d", q.Queued(), q.Pending(), q.Ready().Pending(), u32(q.mem, 8))
	}
	q.Clean(a) // nothing of A is left
	if n := q.Poll(wc); n != 3 || wc[0].WRID != 2 || wc[1].WRID != 4 || wc[2].WRID != 5 || wc[0].QPNum != 0x22 {
		t.Fatalf("polled %d: %+v", n, wc[:n])
	}
	// Only A's: Clean empties the ring.
	putCQE(q.mem, 3, 9, 0x105, 0, 0, 0)
	le.PutUint32(q.mem[8:], 12)
	q.Clean(a)
	if q.Queued() != 0 || q.Pending() || q.Ready().Pending() || u32(q.mem, 12) != 12 {
		t.Fatalf("after cleaning the only CQE: queued %d, pending %v, cons_head %d", q.Queued(), q.Pending(), u32(q.mem, 12))
	}
	if n := q.Poll(wc); n != 0 {
		t.Fatalf("polled %d after Clean", n)
	}
	// An invalid ring state is left alone.
	le.PutUint32(q.mem[8:], 77)
	q.Clean(a)
	if u32(q.mem, 12) != 12 {
		t.Errorf("Clean moved cons_head of an invalid ring to %d", u32(q.mem, 12))
	}
}

// TestCQReady checks the emptiness test the generic Poll reads before it
// calls Poll: it must say "pending" exactly when Pending does, with a full
// ring, after a CQE Poll drops, and across both wraps of the indices
// (slot and wrap bit).
func TestCQReady(t *testing.T) {
	_, q, _ := newTestCQ(t) // 8 CQEs: indices run modulo 16
	r := q.Ready()
	wc := make([]provider.WC, 3)
	check := func(step string, want bool) {
		t.Helper()
		if got := r.Pending(); got != want || q.Pending() != want {
			t.Fatalf("%s: Ready.Pending %v, Pending %v, want %v", step, got, q.Pending(), want)
		}
		if q.Ready() != r {
			t.Fatalf("%s: Ready moved", step)
		}
	}
	tail := uint32(0)
	produce := func(k int, qp uint64) {
		for range k {
			putCQE(q.mem, int(tail&7), uint64(tail), qp, 0, 0, 0)
			tail = (tail + 1) & 15
		}
		le.PutUint32(q.mem[8:], tail) // ring_state->rx.prod_tail
	}
	check("empty", false)
	produce(8, 0x105)
	if u32(q.mem, 8)^u32(q.mem, 12) != 8 {
		t.Fatalf("not full: prod_tail %d cons_head %d", u32(q.mem, 8), u32(q.mem, 12))
	}
	check("full", true)
	for polled := 0; polled < 8; {
		n := q.Poll(wc)
		if n == 0 {
			t.Fatalf("polled nothing after %d", polled)
		}
		polled += n
		check("polling the full ring", polled < 8)
	}
	// cons_head is 8: slot 0 with the wrap bit set.
	produce(1, 0x999) // a QP the context does not know: Poll drops it
	check("unknown QP's CQE written", true)
	if n := q.Poll(wc); n != 0 {
		t.Fatalf("polled %d of a dropped CQE", n)
	}
	check("dropped", false)
	// Ten rounds of 3 CQEs carry both indices across 16 and back twice.
	for i := range 10 {
		produce(3, 0x105)
		check("3 written", true)
		if n := q.Poll(wc[:2]); n != 2 {
			t.Fatalf("round %d: polled %d", i, n)
		}
		check("1 left", true)
		if n := q.Poll(wc); n != 1 {
			t.Fatalf("round %d: polled %d", i, n)
		}
		check("all polled", false)
	}
	if u32(q.mem, 12) != tail {
		t.Fatalf("cons_head %d, prod_tail %d", u32(q.mem, 12), tail)
	}
}

// Every pvrdma status maps to the verbs status of the same name, and every
// opcode to its verbs opcode, across the ring's wrap.
func TestCQEDecodeAll(t *testing.T) {
	_, q, _ := newTestCQ(t)
	statuses := []struct {
		pv   uint32
		want provider.WCStatus
	}{
		{uverbs.PVRDMA_WC_SUCCESS, provider.WCSuccess}, {uverbs.PVRDMA_WC_LOC_LEN_ERR, provider.WCLocLenErr},
		{uverbs.PVRDMA_WC_LOC_QP_OP_ERR, provider.WCLocQPOpErr}, {uverbs.PVRDMA_WC_LOC_EEC_OP_ERR, 3},
		{uverbs.PVRDMA_WC_LOC_PROT_ERR, provider.WCLocProtErr}, {uverbs.PVRDMA_WC_WR_FLUSH_ERR, provider.WCWRFlushErr},
		{uverbs.PVRDMA_WC_MW_BIND_ERR, 6}, {uverbs.PVRDMA_WC_BAD_RESP_ERR, provider.WCBadRespErr},
		{uverbs.PVRDMA_WC_LOC_ACCESS_ERR, provider.WCLocAccessErr}, {uverbs.PVRDMA_WC_REM_INV_REQ_ERR, provider.WCRemInvReqErr},
		{uverbs.PVRDMA_WC_REM_ACCESS_ERR, provider.WCRemAccessErr}, {uverbs.PVRDMA_WC_REM_OP_ERR, provider.WCRemOpErr},
		{uverbs.PVRDMA_WC_RETRY_EXC_ERR, provider.WCRetryExcErr}, {uverbs.PVRDMA_WC_RNR_RETRY_EXC_ERR, provider.WCRNRRetryExcErr},
		{uverbs.PVRDMA_WC_LOC_RDD_VIOL_ERR, 14}, {uverbs.PVRDMA_WC_REM_INV_RD_REQ_ERR, 15},
		{uverbs.PVRDMA_WC_REM_ABORT_ERR, 16}, {uverbs.PVRDMA_WC_INV_EECN_ERR, 17},
		{uverbs.PVRDMA_WC_INV_EEC_STATE_ERR, 18}, {uverbs.PVRDMA_WC_FATAL_ERR, provider.WCFatalErr},
		{uverbs.PVRDMA_WC_RESP_TIMEOUT_ERR, provider.WCRespTimeoutErr}, {uverbs.PVRDMA_WC_GENERAL_ERR, provider.WCGeneralErr},
		{22, provider.WCGeneralErr}, {1 << 31, provider.WCGeneralErr},
	}
	if len(statuses) != len(wcStatus)+2 {
		t.Fatalf("%d statuses tested, the table has %d", len(statuses)-2, len(wcStatus))
	}
	opcodes := []struct {
		pv   uint32
		want provider.WCOpcode
		ok   bool
	}{
		{uverbs.PVRDMA_WC_SEND, provider.WCSend, true}, {uverbs.PVRDMA_WC_RDMA_WRITE, provider.WCRDMAWrite, true},
		{uverbs.PVRDMA_WC_RDMA_READ, provider.WCRDMARead, true}, {uverbs.PVRDMA_WC_COMP_SWAP, provider.WCCompSwap, true},
		{uverbs.PVRDMA_WC_FETCH_ADD, provider.WCFetchAdd, true}, {uverbs.PVRDMA_WC_BIND_MW, provider.WCBindMW, true},
		{uverbs.PVRDMA_WC_LSO, 0, false}, {uverbs.PVRDMA_WC_LOCAL_INV, provider.WCLocalInv, true},
		{uverbs.PVRDMA_WC_FAST_REG_MR, 0, false}, {uverbs.PVRDMA_WC_MASKED_COMP_SWAP, provider.WCCompSwap, true},
		{uverbs.PVRDMA_WC_MASKED_FETCH_ADD, provider.WCFetchAdd, true}, {uverbs.PVRDMA_WC_RECV, provider.WCRecv, true},
		{uverbs.PVRDMA_WC_RECV_RDMA_WITH_IMM, provider.WCRecvRDMAWithImm, true}, {127, 0, false}, {130, 0, false},
	}
	wc := make([]provider.WC, 1)
	tail := uint32(0)
	post := func(op, status uint32) provider.WC {
		id := uint64(tail) + 1000
		putCQE(q.mem, int(tail&7), id, 0x105, op, status, status+100)
		tail = idxInc(tail, 8)
		le.PutUint32(q.mem[8:], tail)
		if n := q.Poll(wc); n != 1 || wc[0].WRID != id {
			t.Fatalf("polled %d: %+v", n, wc[0])
		}
		return wc[0]
	}
	for _, s := range statuses {
		w := post(uverbs.PVRDMA_WC_SEND, s.pv)
		if w.Status != s.want || w.VendorErr != s.pv+100 || w.QPNum != 0x11 {
			t.Errorf("status %d: %+v, want %d", s.pv, w, s.want)
		}
	}
	for _, o := range opcodes {
		w := post(o.pv, uverbs.PVRDMA_WC_SUCCESS)
		if o.ok && (w.Opcode != o.want || w.Status != provider.WCSuccess) || !o.ok && w.Status != provider.WCGeneralErr {
			t.Errorf("opcode %d: %+v", o.pv, w)
		}
		// An error completion keeps its status whatever the opcode.
		if w := post(o.pv, uverbs.PVRDMA_WC_WR_FLUSH_ERR); w.Status != provider.WCWRFlushErr {
			t.Errorf("flushed opcode %d: %+v", o.pv, w)
		}
	}
}

func TestNoAllocations(t *testing.T) {
	p, info, _ := newTestQP(t, true, uverbs.IB_UVERBS_QPT_RC)
	sge := []provider.SGE{{Addr: 1, Length: 2, LKey: 3}, {Addr: 4, Length: 5, LKey: 6}}
	wrs := []provider.SendWR{{Opcode: provider.WRSend, SGList: sge}, {Opcode: provider.WRRDMAWrite, SGList: sge}}
	var chk okChecker
	if a := testing.AllocsPerRun(100, func() {
		if n, _, err := info.Send.Post(wrs, chk); n != 2 || err != nil {
			panic(err)
		}
		le.PutUint32(p.sbuf[4:], u32(p.sbuf, 0)) // the device consumes
	}); a != 0 {
		t.Errorf("send post allocates %v", a)
	}
	rwrs := []provider.RecvWR{{WRID: 1, SGList: sge[:1]}}
	if a := testing.AllocsPerRun(100, func() {
		if err := info.Recv.Post(rwrs); err != nil {
			panic(err)
		}
		le.PutUint32(p.sbuf[12:], u32(p.sbuf, 8))
	}); a != 0 {
		t.Errorf("receive post allocates %v", a)
	}
	// The errors a caller retries on are not allocated either.
	full := make([]provider.SendWR, 5)
	if a := testing.AllocsPerRun(100, func() {
		info.Send.Post(full, chk)
		le.PutUint32(p.sbuf[4:], u32(p.sbuf, 0))
	}); a != 0 {
		t.Errorf("full send queue allocates %v", a)
	}
	_, q, _ := newTestCQ(t)
	wc := make([]provider.WC, 4)
	tail := uint32(0)
	if a := testing.AllocsPerRun(100, func() {
		putCQE(q.mem, int(tail&7), 1, 0x105, 0, 0, 0)
		tail = idxInc(tail, 8)
		le.PutUint32(q.mem[8:], tail)
		if q.Poll(wc) != 1 {
			panic("poll")
		}
		q.Arm(false)
	}); a != 0 {
		t.Errorf("poll allocates %v", a)
	}
}

func TestBadSizes(t *testing.T) {
	c, _ := fakeContext(false)
	if _, err := c.NewCQ(0); !errors.Is(err, errQueueSize) {
		t.Errorf("0 CQEs: %v", err)
	}
	if _, err := c.NewCQ(1 << 30); !errors.Is(err, errQueueSize) {
		t.Errorf("2^30 CQEs: %v", err)
	}
	if _, err := c.NewQP(provider.QPAttr{Cap: uverbs.QpCap{Send_wr: 1 << 30}}); !errors.Is(err, errQueueSize) {
		t.Errorf("2^30 send WRs: %v", err)
	}
	if _, err := c.NewSRQ(provider.SRQAttr{MaxWR: 1 << 30}); !errors.Is(err, errQueueSize) {
		t.Errorf("2^30 SRQ WRs: %v", err)
	}
	var q CQ
	if err := q.init(make([]byte, pageSize), 8, 1, nil, nil); !errors.Is(err, errQueueSize) {
		t.Errorf("CQ buffer too small: %v", err)
	}
	if err := q.init(make([]byte, 2*pageSize), 6, 1, nil, nil); !errors.Is(err, errQueueSize) {
		t.Errorf("6 CQEs: %v", err)
	}
}

func TestQPTable(t *testing.T) {
	var tb qpTable
	tb.init(64)
	tb.store(0x10025, 7) // a handle's low 16 bits index the table
	if qpn, ok := tb.lookup(0x25); !ok || qpn != 7 {
		t.Errorf("lookup 0x25: %d %v", qpn, ok)
	}
	tb.store(0x105, 8) // past the table: not kept, never found
	if _, ok := tb.lookup(0x105); ok {
		t.Error("handle past the table found")
	}
	tb.clear(0x25)
	if _, ok := tb.lookup(0x25); ok {
		t.Error("cleared handle found")
	}
	tb.init(1 << 20)
	if len(tb.t) != 1<<16 {
		t.Errorf("table of %d entries", len(tb.t))
	}
}

// Receives posted from several goroutines while the device consumes them
// (a goroutine moving cons_head with atomics, reading each WQE it takes):
// every work request arrives exactly once, in a slot the device had
// released. Run with -race, this also checks the ring's lock and index
// publication.
func TestRecvConcurrent(t *testing.T) {
	p, info, _ := newTestQP(t, false, uverbs.IB_UVERBS_QPT_RC)
	rq := info.Recv
	const posters, each = 4, 500
	state := unsafe.Pointer(&p.sbuf[8]) // the receive ring
	r := newRing(state, 8)
	seen := make(map[uint64]int)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for len(seen) < posters*each {
			slot, full, ok := r.data()
			if !ok {
				t.Error("invalid ring state")
				return
			}
			if !full {
				continue
			}
			seen[le.Uint64(p.rbuf[int(slot)*32:])]++
			r.consume()
		}
	}()
	errc := make(chan error, posters)
	for g := 0; g < posters; g++ {
		go func(g int) {
			for i := 0; i < each; {
				err := rq.Post([]provider.RecvWR{{WRID: uint64(g*each + i)}})
				if err == nil {
					i++
				} else if !providertest.Is(err, 0, provider.ReasonFull) {
					errc <- err
					return
				}
				select {
				case <-done: // the device gave up: stop retrying a full ring
					errc <- errors.New("device stopped")
					return
				default:
				}
			}
			errc <- nil
		}(g)
	}
	for g := 0; g < posters; g++ {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	<-done
	for id := uint64(0); id < posters*each; id++ {
		if seen[id] != 1 {
			t.Fatalf("work request %d seen %d times", id, seen[id])
		}
	}
}

// ALLOC_PD's driver data has room for struct pvrdma_alloc_pd_resp (pdn,
// reserved): the kernel fails a user PD with EFAULT without it.
func TestAllocPDUdata(t *testing.T) {
	c, _ := fakeContext(false)
	u := c.AllocPD()
	if len(u.In) != 0 || len(u.Out) != 8 {
		t.Fatalf("ALLOC_PD driver data: %d bytes in, %d out; want 0, 8", len(u.In), len(u.Out))
	}
}

// TestUDSendWQE checks a UD send's WQE against struct pvrdma_sq_wqe_hdr's
// wr.ud (remote_qpn, remote_qkey, then struct pvrdma_av at union offset
// 8) with the address vector as rdma-core's pvrdma_create_ah fills it.
func TestUDSendWQE(t *testing.T) {
	c, _ := fakeContext(false)
	resp := uverbs.PvrdmaAllocPdResp{Pdn: 0x42}
	attr := uverbs.AhAttr{Port_num: 1, Src_path_bits: 3, Is_global: 1}
	attr.Grh.Dgid = [16]byte{0: 0xfe, 1: 0x80, 8: 0x52, 15: 0x99}
	attr.Grh.Flow_label = 0x12345
	attr.Grh.Sgid_index = 1
	attr.Grh.Hop_limit = 64
	attr.Grh.Traffic_class = 0xb8
	dmac := [6]byte{0x52, 0x54, 0, 0xaa, 0xbb, 0x01}
	ah, err := c.NewUserAH(provider.Udata{Out: provider.Bytes(&resp)}, &attr, dmac)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.NewUserAH(provider.Udata{}, &attr, dmac); err == nil {
		t.Error("an AH without the PD's ALLOC_PD response was built")
	}
	big := uverbs.PvrdmaAllocPdResp{Pdn: 1 << 24}
	if _, err := c.NewUserAH(provider.Udata{Out: provider.Bytes(&big)}, &attr, dmac); err == nil {
		t.Error("a PD number past 24 bits was accepted")
	}

	p, info, uar := newTestQP(t, false, uverbs.IB_UVERBS_QPT_UD)
	wqe := p.sbuf[int(pageSize) : int(pageSize)+128]
	for j := range wqe {
		wqe[j] = 0xaa
	}
	sge := []provider.SGE{{Addr: 0x1000, Length: 100, LKey: 5}}
	wr := provider.SendWR{WRID: 9, Opcode: provider.WRSendWithImm, Imm: 0x01020304, SGList: sge,
		Flags: provider.SendSignaled, RemoteQPN: 0x17, RemoteQKey: 0x11111111}
	if n, _, err := info.Send.Post([]provider.SendWR{wr}, ahChecker{ah}); n != 1 || err != nil {
		t.Fatalf("UD post: %d %v", n, err)
	}
	want := make([]byte, 96)
	le.PutUint64(want[0:], 9)
	le.PutUint32(want[8:], 1)  // num_sge
	le.PutUint32(want[16:], 3) // PVRDMA_WR_SEND_WITH_IMM
	le.PutUint32(want[20:], 2) // SIGNALED
	binary.BigEndian.PutUint32(want[24:], 0x01020304)
	le.PutUint32(want[32:], 0x17)             // wr.ud.remote_qpn
	le.PutUint32(want[36:], 0x11111111)       // wr.ud.remote_qkey
	le.PutUint32(want[40:], 0x42|1<<24)       // av.port_pd
	le.PutUint32(want[44:], 0xb8<<20|0x12345) // av.sl_tclass_flowlabel
	copy(want[48:64], attr.Grh.Dgid[:])       // av.dgid
	want[64] = 0x83                           // av.src_path_bits | 0x80
	want[65] = 1                              // av.gid_index
	want[67] = 64                             // av.hop_limit
	copy(want[68:74], dmac[:])                // av.dmac
	le.PutUint64(want[80:], 0x1000)
	le.PutUint32(want[88:], 100)
	le.PutUint32(want[92:], 5)
	if got := wqe[:96]; !bytes.Equal(got, want) {
		t.Errorf("UD WQE\n got %x\nwant %x", got, want)
	}
	if uar[0] != 1<<30|0x105 {
		t.Errorf("doorbell %#x", uar[0])
	}
}
