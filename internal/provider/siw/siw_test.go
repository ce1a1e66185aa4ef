package siw

import (
	"testing"
	"unsafe"

	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/provider/providertest"
	"github.com/goverbs/goverbs/uverbs"
)

func mem(n uintptr) []byte {
	// 8-byte aligned, like the page-aligned mapping.
	w := make([]uint64, (n+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), n)
}

// newCQ wraps CQ memory as Start does after mapping it.
func newCQ(mem []byte, num uint32) (*CQ, error) {
	c := new(CQ)
	return c, c.init(mem, num)
}

func TestLayout(t *testing.T) {
	if SQESize != 120 || RQESize != 112 || CQESize != 32 || MaxSGE != 6 || MaxInline != 80 {
		t.Fatalf("sizes: sqe %d rqe %d cqe %d, %d SGEs, %d inline", SQESize, RQESize, CQESize, MaxSGE, MaxInline)
	}
}

func TestCQPollAndArm(t *testing.T) {
	const n = 4
	m := mem(uintptr(CQLen(n)))
	c, err := newCQ(m, n)
	if err != nil {
		t.Fatal(err)
	}
	cqes := unsafe.Slice((*uverbs.SiwCqe)(unsafe.Pointer(&m[0])), n)
	ctrl := (*uverbs.SiwCqCtrl)(unsafe.Pointer(&m[n*CQESize]))
	wc := make([]provider.WC, 8)
	// The emptiness test the generic Poll reads first must agree with
	// Pending at every step.
	ready := func(step string) {
		t.Helper()
		if c.Ready().Pending() != c.Pending() {
			t.Fatalf("%s: Ready.Pending %v, Pending %v", step, c.Ready().Pending(), c.Pending())
		}
	}
	if got := c.Poll(wc); got != 0 || c.Pending() || c.Queued() != 0 {
		t.Fatalf("empty CQ polled %d", got)
	}
	ready("empty")
	// The kernel writes three CQEs: a receive, a send error, a bad opcode.
	cqes[0] = uverbs.SiwCqe{Id: 7, Opcode: uverbs.SIW_OP_RECEIVE, Bytes: 64, Qp_id: 3, Flags: uverbs.SIW_WQE_VALID}
	cqes[1] = uverbs.SiwCqe{Id: 8, Opcode: uverbs.SIW_OP_WRITE, Status: uverbs.SIW_WC_WR_FLUSH_ERR, Qp_id: 3, Flags: uverbs.SIW_WQE_VALID}
	cqes[2] = uverbs.SiwCqe{Id: 9, Opcode: 200, Qp_id: 3, Flags: uverbs.SIW_WQE_VALID}
	if !c.Pending() || c.Queued() != 3 {
		t.Fatalf("pending %v, available %d", c.Pending(), c.Queued())
	}
	ready("3 written")
	if got := c.Poll(wc[:2]); got != 2 {
		t.Fatalf("polled %d, want 2", got)
	}
	if wc[0].WRID != 7 || wc[0].Opcode != provider.WCRecv || wc[0].ByteLen != 64 || wc[0].QPNum != 3 || wc[0].Status != provider.WCSuccess {
		t.Errorf("receive: %+v", wc[0])
	}
	if wc[1].WRID != 8 || wc[1].Opcode != provider.WCRDMAWrite || wc[1].Status != provider.WCWRFlushErr {
		t.Errorf("flushed write: %+v", wc[1])
	}
	if cqes[0].Flags != 0 || cqes[1].Flags != 0 || cqes[2].Flags == 0 {
		t.Error("polled CQEs not handed back, or the unpolled one was")
	}
	ready("1 left")
	if got := c.Poll(wc); got != 1 || wc[0].Status != provider.WCGeneralErr {
		t.Errorf("corrupt CQE: %d %+v", got, wc[0])
	}
	ready("all polled")
	// Wrap around.
	cqes[3] = uverbs.SiwCqe{Id: 10, Flags: uverbs.SIW_WQE_VALID}
	cqes[0] = uverbs.SiwCqe{Id: 11, Flags: uverbs.SIW_WQE_VALID}
	ready("wrapped, 2 written")
	if got := c.Poll(wc); got != 2 || wc[0].WRID != 10 || wc[1].WRID != 11 {
		t.Errorf("wrapped: %d %+v", got, wc[:2])
	}
	ready("wrapped, polled")
	if ctrl.Flags != uverbs.SIW_NOTIFY_NOT {
		t.Errorf("new CQ armed: %#x", ctrl.Flags)
	}
	c.Arm(false)
	if ctrl.Flags != uverbs.SIW_NOTIFY_SOLICITED|uverbs.SIW_NOTIFY_NEXT_COMPLETION {
		t.Errorf("armed: %#x", ctrl.Flags)
	}
	c.Arm(true)
	if ctrl.Flags != uverbs.SIW_NOTIFY_SOLICITED {
		t.Errorf("armed solicited: %#x", ctrl.Flags)
	}
	if a := testing.AllocsPerRun(100, func() { c.Poll(wc) }); a != 0 {
		t.Errorf("Poll allocates %v", a)
	}
	if _, err := newCQ(m[:n*CQESize], n); err == nil {
		t.Error("a mapping without the control word was accepted")
	}
	if _, err := newCQ(m, 3); err == nil {
		t.Error("3 CQEs accepted")
	}
}

func TestSendQueue(t *testing.T) {
	const n = 2
	m := mem(n * SQESize)
	s, err := NewSendQueue(m, n, false, providertest.Errors())
	if err != nil {
		t.Fatal(err)
	}
	sqes := unsafe.Slice((*uverbs.SiwSqe)(unsafe.Pointer(&m[0])), n)
	sge := []provider.SGE{{Addr: 0x1000, Length: 16, LKey: 5}, {Addr: 0x2000, Length: 8, LKey: 6}}
	w := provider.SendWR{WRID: 1, Opcode: provider.WRRDMAWrite, Flags: provider.SendSignaled | provider.SendFence, SGList: sge, RemoteAddr: 0xabc, RKey: 9}
	if r := CheckSend(&w); r != 0 || !s.CanPost(s.Mark()) {
		t.Fatal(r)
	}
	s.post(&w)
	q := sqes[0]
	if q.Id != 1 || q.Opcode != uverbs.SIW_OP_WRITE || q.Num_sge != 2 || q.Raddr != 0xabc || q.Rkey != 9 ||
		q.Flags != uverbs.SIW_WQE_VALID|uverbs.SIW_WQE_SIGNALLED|uverbs.SIW_WQE_READ_FENCE ||
		q.Sge[1] != (uverbs.SiwSge{Laddr: 0x2000, Length: 8, Lkey: 6}) {
		t.Errorf("SQE %+v", q)
	}
	if s.Transmitted(s.Mark()) {
		t.Error("a VALID SQE counts as transmitted")
	}
	inline := provider.SendWR{WRID: 2, Opcode: provider.WRSend, InlineData: []byte("hello")}
	s.post(&inline)
	q = sqes[1]
	if q.Flags != uverbs.SIW_WQE_VALID|uverbs.SIW_WQE_INLINE || q.Num_sge != 1 || q.Sge[0].Length != 5 ||
		string(unsafe.Slice((*byte)(unsafe.Pointer(&sqes[1].Sge[1])), 5)) != "hello" {
		t.Errorf("inline SQE %+v", q)
	}
	if s.CanPost(s.Mark()) {
		t.Error("full queue: slot 0 still VALID")
	}
	sqes[0].Flags = 0 // the kernel takes SQE 0
	if !s.CanPost(s.Mark()) || s.Transmitted(s.Mark()) {
		t.Error("after the kernel took SQE 0")
	}
	sqes[1].Flags = 0
	if !s.Transmitted(s.Mark()) {
		t.Error("all taken, not transmitted")
	}
	inv := provider.SendWR{Opcode: provider.WRSendWithInv, InvalidateRKey: 77}
	s.post(&inv)
	if sqes[0].Opcode != uverbs.SIW_OP_SEND_REMOTE_INV || sqes[0].Rkey != 77 {
		t.Errorf("SEND_WITH_INV %+v", sqes[0])
	}
	for _, tc := range []struct {
		wr   provider.SendWR
		want provider.Reason
	}{
		{provider.SendWR{Opcode: provider.WRAtomicFetchAndAdd}, provider.ReasonNotCapable},
		{provider.SendWR{Opcode: provider.WRSendWithImm}, provider.ReasonNotCapable},
		{provider.SendWR{Opcode: provider.WRBindMW}, provider.ReasonNotCapable},
		{provider.SendWR{Opcode: provider.WRRDMARead, InlineData: []byte{1}}, provider.ReasonBadOpcode},
		{provider.SendWR{Opcode: provider.WRSend, InlineData: make([]byte, 81)}, provider.ReasonInlineTooLarge},
		{provider.SendWR{Opcode: provider.WRSend, SGList: make([]provider.SGE, 7)}, provider.ReasonTooManySGE},
	} {
		if r := CheckSend(&tc.wr); r != tc.want {
			t.Errorf("%v: reason %v, want %v", tc.wr.Opcode, r, tc.want)
		}
	}
	sqes[0].Flags = 0
	if a := testing.AllocsPerRun(100, func() {
		s.post(&w)
		sqes[0].Flags, sqes[1].Flags = 0, 0
	}); a != 0 {
		t.Errorf("Post allocates %v", a)
	}
}

func TestRecvRing(t *testing.T) {
	const n = 2
	m := mem(n * RQESize)
	errs := providertest.Errors()
	r, err := NewRecvRing(m, n, 2, errs)
	if err != nil {
		t.Fatal(err)
	}
	rqes := unsafe.Slice((*uverbs.SiwRqe)(unsafe.Pointer(&m[0])), n)
	sge := []provider.SGE{{Addr: 0x1000, Length: 16, LKey: 5}}
	wrs := []provider.RecvWR{{WRID: 1, SGList: sge}, {WRID: 2, SGList: sge}, {WRID: 3, SGList: sge}}
	err = r.Post(wrs)
	if !providertest.Is(err, 2, provider.ReasonFull) {
		t.Fatalf("post 3 into 2: %v", err)
	}
	if rqes[0].Id != 1 || rqes[1].Id != 2 || rqes[0].Flags != uverbs.SIW_WQE_VALID || rqes[0].Num_sge != 1 || rqes[0].Sge[0].Lkey != 5 {
		t.Errorf("RQEs %+v %+v", rqes[0], rqes[1])
	}
	if r.Posted() != 2 {
		t.Errorf("posted %d", r.Posted())
	}
	rqes[0].Flags = 0 // consumed
	if err := r.Post(wrs[2:]); err != nil || rqes[0].Id != 3 {
		t.Fatalf("post after consume: %v", err)
	}
	if err := r.Post([]provider.RecvWR{{SGList: make([]provider.SGE, 3)}}); !providertest.Is(err, 0, provider.ReasonTooManySGE) {
		t.Errorf("3 SGEs: %v", err)
	}
	one := wrs[:1]
	if a := testing.AllocsPerRun(100, func() {
		rqes[0].Flags, rqes[1].Flags = 0, 0
		r.Post(one)
	}); a != 0 {
		t.Errorf("Post allocates %v", a)
	}
	r.Shut()
	if err := r.Post(one); !providertest.Is(err, 0, provider.ReasonClosed) || r.Posted() != 0 {
		t.Errorf("post after Shut: %v", err)
	}
}
