package mlx5

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/uverbs"
)

// testContext is a context as Start leaves it, for the fake device of the
// differential tests (testdata/device.txt there), without a kernel: one
// page stands in for the UAR pages.
func testContext(t testing.TB) *ucontext {
	t.Helper()
	c := open(nil).(*ucontext)
	c.resp = allocUcontextResp{QPTabSize: 1 << 18, BfRegSize: 512, TotBfregs: 16, CacheLineSize: 64,
		MaxSqDescSz: 512, MaxRqDescSz: 512, MaxSendWQEBB: 1 << 15, MaxRecvWR: 1 << 15, CQEVersion: 1,
		NumUARsPerPage: 1}
	uar, err := allocBuf(pageSize)
	if err != nil {
		t.Fatal(err)
	}
	c.uars = [][]byte{uar}
	c.bfs = make([]bf, 4)
	for i := range c.bfs {
		c.bfs[i] = bf{reg: unsafe.Pointer(&uar[bfOffset+i*int(c.resp.BfRegSize)]), uuarn: uint32(i), bufSize: 256}
	}
	c.cqUAR = unsafe.Pointer(&uar[0])
	c.atomics = true
	t.Cleanup(func() { c.Close() })
	return c
}

// The send and receive queue sizes are libmlx5's (mlx5_calc_wq_size); the
// differential tests compare the same through CREATE_QP's driver data.
func TestQPSizing(t *testing.T) {
	c := testContext(t)
	for _, tc := range []struct {
		typ                 uint8
		cap                 uverbs.QpCap
		sqCnt, rqCnt, shift uint32
		inline, maxPost     uint32
	}{
		{uverbs.IB_UVERBS_QPT_RC, uverbs.QpCap{Send_wr: 16, Recv_wr: 16, Send_sge: 1, Recv_sge: 1}, 64, 16, 4, 60, 16},
		{uverbs.IB_UVERBS_QPT_RC, uverbs.QpCap{Send_wr: 32, Recv_wr: 8, Send_sge: 4, Recv_sge: 3, Inline_data: 128}, 256, 8, 6, 188, 42},
		{uverbs.IB_UVERBS_QPT_RC, uverbs.QpCap{Send_wr: 5, Recv_wr: 1, Send_sge: 2, Recv_sge: 1, Inline_data: 200}, 64, 4, 4, 252, 9},
		{uverbs.IB_UVERBS_QPT_UC, uverbs.QpCap{Send_wr: 64, Recv_wr: 64, Send_sge: 1, Recv_sge: 8, Inline_data: 16}, 256, 64, 7, 60, 64},
	} {
		q, err := c.NewQP(provider.QPAttr{Type: tc.typ, Cap: tc.cap})
		if err != nil {
			t.Fatalf("%+v: %v", tc.cap, err)
		}
		p := q.(*qp)
		if p.cmd.SQWQECount != tc.sqCnt || p.cmd.RQWQECount != tc.rqCnt || p.cmd.RQWQEShift != tc.shift ||
			p.maxInline != tc.inline || p.sqMaxPost != tc.maxPost {
			t.Errorf("%+v: sq %d rq %d shift %d inline %d max_post %d, want %d %d %d %d %d", tc.cap,
				p.cmd.SQWQECount, p.cmd.RQWQECount, p.cmd.RQWQEShift, p.maxInline, p.sqMaxPost,
				tc.sqCnt, tc.rqCnt, tc.shift, tc.inline, tc.maxPost)
		}
		if err := p.Release(); err != nil {
			t.Error(err)
		}
	}
}

// Sizes the device cannot take fail with an error, never a panic.
func TestQPSizingErrors(t *testing.T) {
	c := testContext(t)
	for _, a := range []provider.QPAttr{
		{Type: uverbs.IB_UVERBS_QPT_RC, Cap: uverbs.QpCap{Send_wr: 1, Send_sge: 31}},
		{Type: uverbs.IB_UVERBS_QPT_RC, Cap: uverbs.QpCap{Send_wr: 1, Inline_data: 1 << 30}},
		{Type: uverbs.IB_UVERBS_QPT_RC, Cap: uverbs.QpCap{Send_wr: 1 << 31}},
		{Type: uverbs.IB_UVERBS_QPT_RC, Cap: uverbs.QpCap{Recv_wr: 1 << 16}},
		{Type: uverbs.IB_UVERBS_QPT_RC, Cap: uverbs.QpCap{Recv_wr: 1, Recv_sge: 33}},
		{Type: uverbs.IB_UVERBS_QPT_RC},
		{Type: uverbs.IB_UVERBS_QPT_RAW_PACKET, Cap: uverbs.QpCap{Send_wr: 1}},
	} {
		if q, err := c.NewQP(a); err == nil {
			q.Release()
			t.Errorf("%+v: no error", a.Cap)
		}
	}
	if _, err := c.NewCQ(0); !errors.Is(err, errQueueSize) {
		t.Errorf("NewCQ(0): %v", err)
	}
	if _, err := c.NewCQ(1 << 24); !errors.Is(err, errQueueSize) {
		t.Errorf("NewCQ(1<<24): %v", err)
	}
}

// A kernel answer the provider cannot use is an error of Start.
func TestStartRejectsBadAnswers(t *testing.T) {
	for _, r := range []allocUcontextResp{
		{},
		{TotBfregs: 16, NumUARsPerPage: 1, BfRegSize: 512, CacheLineSize: 48},
		{TotBfregs: 16, NumUARsPerPage: 0, BfRegSize: 512, CacheLineSize: 64},
		{TotBfregs: 16, NumUARsPerPage: 1, BfRegSize: 4096, CacheLineSize: 64},
		{TotBfregs: 16, NumUARsPerPage: 1, BfRegSize: 512, CacheLineSize: 64, CQEVersion: 2},
		{TotBfregs: 1, NumUARsPerPage: 1, BfRegSize: 512, CacheLineSize: 64},
	} {
		c := open(nil).(*ucontext)
		c.resp = r
		if err := c.Start(); err == nil {
			t.Errorf("%+v: no error", r)
		}
	}
}

// pollSetup is a CQ and an RC QP on it with two sends and two receives
// posted, as Start leaves them.
func pollSetup(t testing.TB) (*CQ, *qp) {
	c := testContext(t)
	pc, err := c.NewCQ(4)
	if err != nil {
		t.Fatal(err)
	}
	q := pc.(*CQ)
	q.resp.CQN = 0x400
	if err := q.Start(7); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Release() })
	errs := provider.NewErrors(func(i int, r provider.Reason) error { return errors.New("refused") })
	pq, err := c.NewQP(provider.QPAttr{Type: uverbs.IB_UVERBS_QPT_RC,
		Cap: uverbs.QpCap{Send_wr: 4, Recv_wr: 4, Send_sge: 1, Recv_sge: 1}, SendErrors: errs, RecvErrors: errs})
	if err != nil {
		t.Fatal(err)
	}
	p := pq.(*qp)
	p.resp.BfregIndex = 1
	info, err := p.Start(0x1000, uverbs.QpCap{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Release() })
	// The WQEs keep the buffer's address (a scattered CQE is copied
	// there): memory off the Go heap, freed after the QP.
	buf, err := allocBuf(pageSize)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { freeBuf(buf) })
	sge := []provider.SGE{{Addr: uint64(uintptr(unsafe.Pointer(&buf[0]))), Length: 64, LKey: 1}}
	if n, _, err := info.Send.Post([]provider.SendWR{{WRID: 1, Opcode: provider.WRSend, SGList: sge},
		{WRID: 2, Opcode: provider.WRSend, SGList: sge}}, okChecker{}); n != 2 || err != nil {
		t.Fatal(n, err)
	}
	if err := info.Recv.Post([]provider.RecvWR{{WRID: 3, SGList: sge}, {WRID: 4, SGList: sge}}); err != nil {
		t.Fatal(err)
	}
	return q, p
}

type okChecker struct{}

func (okChecker) CheckSend(int, *provider.SendWR) (provider.AH, error) { return nil, nil }

// putCQE writes cqe into the CQ's next slot as the device would, with the
// owner bit of the slot's pass.
func putCQE(q *CQ, pi uint32, cqe []byte) {
	slot := unsafe.Slice((*byte)(q.slot(pi)), cqeSize)
	copy(slot[:63], cqe)
	op := byte(0)
	if len(cqe) > 63 {
		op = cqe[63]
	}
	slot[63] = op&0xfe | byte(pi/q.nent&1)
}

// FuzzPoll feeds the CQ arbitrary CQEs (as a device or a fake kernel
// might write them): Poll must not panic, must stay within its slice and
// must keep its consumer index moving forward.
func FuzzPoll(f *testing.F) {
	req := make([]byte, 64)
	req[56], req[59], req[63] = 0x0a, 0x00, 0x00 // REQ, SEND, wqe 0, uidx 0
	f.Add(req)
	resp := make([]byte, 64)
	resp[63] = cqeRespSend << 4
	f.Add(resp)
	scat := make([]byte, 64)
	scat[47], scat[63] = 200, cqeRespSend<<4|inlineScatter32
	f.Add(scat)
	e := make([]byte, 64)
	e[55], e[54], e[63] = 0x15, 0x81, cqeReqErr<<4
	f.Add(e)
	f.Fuzz(func(t *testing.T, data []byte) {
		q, _ := pollSetup(t)
		wc := make([]provider.WC, 3)
		pi := uint32(0)
		for len(data) > 0 {
			n := min(len(data), 64)
			putCQE(q, pi, data[:n])
			data = data[n:]
			pi++
			before := q.ci
			got := q.Poll(wc[:2])
			if got < 0 || got > 2 || q.ci < before {
				t.Fatalf("Poll = %d, ci %d -> %d", got, before, q.ci)
			}
			if pi-q.ci > q.nent {
				q.ci = pi // the ring overflowed: start again at the producer
				q.setReady()
			}
		}
	})
}

// FuzzStart gives Start arbitrary GET_CONTEXT answers: it refuses what it
// cannot use with an error and never panics (no descriptor: every answer
// it accepts then fails at the UAR mapping).
func FuzzStart(f *testing.F) {
	good := allocUcontextResp{BfRegSize: 512, TotBfregs: 16, CacheLineSize: 64, NumUARsPerPage: 1, CQEVersion: 1}
	f.Add(unsafe.Slice((*byte)(unsafe.Pointer(&good)), unsafe.Sizeof(good)))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		c := open(nil).(*ucontext)
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&c.resp)), unsafe.Sizeof(c.resp)), data)
		if err := c.Start(); err == nil {
			t.Fatalf("Start without a descriptor succeeded for %+v", c.resp)
		}
		if len(c.uars) != 0 || c.bfs != nil {
			t.Fatalf("a failed Start left %d UAR pages mapped", len(c.uars))
		}
	})
}

// Posting and polling allocate nothing.
func TestPostPollAllocs(t *testing.T) {
	q, p := pollSetup(t)
	wc := make([]provider.WC, 4)
	q.Poll(wc) // nothing yet
	buf, err := allocBuf(pageSize)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { freeBuf(buf) })
	sge := []provider.SGE{{Addr: uint64(uintptr(unsafe.Pointer(&buf[0]))), Length: 8, LKey: 1}}
	wrs := []provider.SendWR{{WRID: 9, Opcode: provider.WRSend, Flags: provider.SendSignaled, SGList: sge}}
	rwrs := []provider.RecvWR{{WRID: 10, SGList: sge}}
	// Complete the two sends and two receives pollSetup posted.
	for i, kind := range []byte{cqeReq, cqeReq, cqeRespSend, cqeRespSend} {
		c := make([]byte, 64)
		c[60], c[61] = 0, byte(i%2)
		c[63] = kind << 4
		putCQE(q, q.ci+uint32(i), c)
	}
	if n := q.Poll(wc); n != 4 {
		t.Fatalf("Poll = %d", n)
	}
	pi := q.ci
	allocs := testing.AllocsPerRun(100, func() {
		if n, _, err := p.sq.Post(wrs, okChecker{}); n != 1 || err != nil {
			t.Fatal(n, err)
		}
		if err := p.rq.Post(rwrs); err != nil {
			t.Fatal(err)
		}
		c := [64]byte{}
		c[60], c[61] = byte((p.sq.curPost-1)>>8), byte(p.sq.curPost-1)
		c[56], c[63] = opSend, cqeReq<<4
		putCQE(q, pi, c[:])
		c[63] = cqeRespSend << 4
		putCQE(q, pi+1, c[:])
		pi += 2
		if n := q.Poll(wc); n != 2 {
			t.Fatalf("Poll = %d", n)
		}
		q.Poll(wc) // empty
	})
	if allocs != 0 {
		t.Errorf("%v allocations per post and poll", allocs)
	}
}

// GET_CONTEXT asks for the static BlueFlame registers the provider maps:
// 4 KiB UARs, and not dynamic UARs, for which a kernel allocates none
// (tot_bfregs 0) and Start would fail.
func TestGetContextAsksStaticUARs(t *testing.T) {
	c := open(nil).(*ucontext)
	if c.req.LibCaps&libCapDynUAR != 0 || c.req.LibCaps&libCap4KUAR == 0 {
		t.Errorf("lib_caps %#x, want MLX5_LIB_CAP_4K_UAR without MLX5_LIB_CAP_DYN_UAR", c.req.LibCaps)
	}
	if c.req.TotalNumBfregs == 0 || c.req.NumLowLatencyBfregs >= c.req.TotalNumBfregs {
		t.Errorf("asks %d registers, %d low latency", c.req.TotalNumBfregs, c.req.NumLowLatencyBfregs)
	}
	c.resp = allocUcontextResp{BfRegSize: 512, CacheLineSize: 64, NumUARsPerPage: 1, CQEVersion: 1}
	if err := c.Start(); !errors.Is(err, ErrNotYet) {
		t.Errorf("Start with tot_bfregs 0: %v, want ErrNotYet", err)
	}
}

// The UDP source port of a RoCE v2 address vector: the flow label folded
// into 14 bits above 0xc000 (values from ibv_flow_label_to_udp_sport), or
// without a flow label a random port, always in RoCE's range.
func TestUDPSport(t *testing.T) {
	for _, tc := range []struct {
		fl   uint32
		want uint16
	}{
		{1, 0xc001}, {0x3fff, 0xffff}, {0x4000, 0xc001}, {0xabcde, 0xfcf4}, {0xfffff, 0xffc0},
		{0x1fffff, 0xffc0}, // bits above the 20-bit flow label are ignored
	} {
		if got := udpSport(tc.fl); got != tc.want {
			t.Errorf("udpSport(%#x) = %#x, want %#x", tc.fl, got, tc.want)
		}
	}
	seen := map[uint16]bool{}
	for range 1000 {
		p := udpSport(0)
		if p < roceUDPPortMin {
			t.Fatalf("udpSport(0) = %#x, below %#x", p, roceUDPPortMin)
		}
		seen[p] = true
	}
	if len(seen) < 2 {
		t.Errorf("udpSport(0) gave one port in 1000 draws: %v", seen)
	}
}
