package qp_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/verbs"
)

func fill(b []byte, seed byte) {
	for i := range b {
		b[i] = seed + byte(i*7)
	}
}

func wantWC(t *testing.T, wc verbs.WorkCompletion, op verbs.WCOpcode, wrid uint64, byteLen uint32, qpn uint32) {
	t.Helper()
	if wc.Status != verbs.WCSuccess {
		t.Fatalf("completion %+v: status %s", wc, wc.Status)
	}
	if wc.Opcode != op || wc.WRID != wrid || wc.QPNum != qpn || (byteLen != 0 && wc.ByteLen != byteLen) {
		t.Fatalf("completion %+v, want opcode %s wr_id %d byte_len %d qp %d", wc, op, wrid, byteLen, qpn)
	}
}

func TestSendRecvSGL(t *testing.T) {
	p := testutil.NewPair(t, testutil.PairOptions{})
	src, dst := p.A.MR.Bytes(), p.B.MR.Bytes()
	fill(src[:300], 1)
	// Two receive SGEs gather into separate places.
	if err := p.B.QP.PostRecv([]verbs.RecvWR{{WRID: 77, SGList: []verbs.SGE{
		testutil.SGE(p.B.MR, 0, 100), testutil.SGE(p.B.MR, 1000, 200)}}}); err != nil {
		t.Fatal(err)
	}
	// Three send SGEs scatter from different offsets.
	fill(src[4000:4050], 9)
	if err := p.A.QP.PostSend([]verbs.SendWR{{WRID: 5, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
		SGList: []verbs.SGE{testutil.SGE(p.A.MR, 0, 150), testutil.SGE(p.A.MR, 4000, 50), testutil.SGE(p.A.MR, 150, 100)}}}); err != nil {
		t.Fatal(err)
	}
	wantWC(t, testutil.Completions(t, p.A.SendCQ, 1)[0], verbs.WCSend, 5, 0, p.A.QP.QPN())
	rwc := testutil.Completions(t, p.B.RecvCQ, 1)[0]
	wantWC(t, rwc, verbs.WCRecv, 77, 300, p.B.QP.QPN())
	// RoCE receives carry a GRH; iWARP ones do not.
	if (rwc.Flags&verbs.WCGRH == 0 && !testutil.IWARP(p.Ctx)) || rwc.Flags&verbs.WCWithImm != 0 {
		t.Errorf("RoCE receive flags %#x", rwc.Flags)
	}
	want := append(append(append([]byte{}, src[:150]...), src[4000:4050]...), src[150:250]...)
	got := append(append([]byte{}, dst[:100]...), dst[1000:1200]...)
	if !bytes.Equal(got, want) {
		t.Fatal("received data differs from what was sent")
	}
}

func TestSendWithImmAndInline(t *testing.T) {
	p := testutil.NewPair(t, testutil.PairOptions{})
	for i := 0; i < 2; i++ {
		if err := p.B.QP.PostRecv([]verbs.RecvWR{{WRID: uint64(i), SGList: []verbs.SGE{testutil.SGE(p.B.MR, i*256, 256)}}}); err != nil {
			t.Fatal(err)
		}
	}
	msg := []byte("hello-inline-data-from-goverbs")
	// Inline where the device granted the QP room for msg; else the
	// immediate is still checked, and the test skips at its end.
	if err := p.A.QP.PostSend([]verbs.SendWR{
		testutil.Carry(t, p.A.QP, verbs.SendWR{WRID: 10, Opcode: verbs.WRSendWithImm, Flags: verbs.SendSignaled, Imm: 0xabcdef01}, msg),
		testutil.Carry(t, p.A.QP, verbs.SendWR{WRID: 11, Opcode: verbs.WRSend, Flags: verbs.SendSignaled | verbs.SendSolicited}, msg[:5]),
	}); err != nil {
		testutil.SkipIfNotCapable(t, err, "SEND_WITH_IMM")
		t.Fatal(err)
	}
	swc := testutil.Completions(t, p.A.SendCQ, 2)
	wantWC(t, swc[0], verbs.WCSend, 10, 0, p.A.QP.QPN())
	wantWC(t, swc[1], verbs.WCSend, 11, 0, p.A.QP.QPN())
	rwc := testutil.Completions(t, p.B.RecvCQ, 2)
	wantWC(t, rwc[0], verbs.WCRecv, 0, uint32(len(msg)), p.B.QP.QPN())
	if rwc[0].Flags&verbs.WCWithImm == 0 || rwc[0].Imm() != 0xabcdef01 {
		t.Errorf("immediate: flags %#x imm %#x", rwc[0].Flags, rwc[0].Imm())
	}
	// On the wire and in ibv_wc the immediate is big-endian.
	var raw [4]byte
	binary.NativeEndian.PutUint32(raw[:], rwc[0].ImmData)
	if raw != [4]byte{0xab, 0xcd, 0xef, 0x01} {
		t.Errorf("ImmData bytes % x, want network order", raw)
	}
	if !bytes.Equal(p.B.MR.Bytes()[:len(msg)], msg) || !bytes.Equal(p.B.MR.Bytes()[256:261], msg[:5]) {
		t.Error("inline data corrupted")
	}
	wantWC(t, rwc[1], verbs.WCRecv, 1, 5, p.B.QP.QPN())
	testutil.SkipUnlessInline(t, p.A.QP, len(msg)) // the data went inline only with room for it
}

func TestRDMAWriteRead(t *testing.T) {
	p := testutil.NewPair(t, testutil.PairOptions{})
	src, dst := p.A.MR.Bytes(), p.B.MR.Bytes()
	fill(src[:4096], 3)
	// WRITE 4 KiB (four MTUs) into B at offset 8192.
	if err := p.A.QP.PostSend([]verbs.SendWR{{WRID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		SGList: []verbs.SGE{testutil.SGE(p.A.MR, 0, 4096)}, RemoteAddr: p.B.MR.IOVA() + 8192, RKey: p.B.MR.RKey()}}); err != nil {
		t.Fatal(err)
	}
	wantWC(t, testutil.Completions(t, p.A.SendCQ, 1)[0], verbs.WCRDMAWrite, 1, 0, p.A.QP.QPN())
	if !bytes.Equal(dst[8192:8192+4096], src[:4096]) {
		t.Fatal("RDMA WRITE data differs")
	}
	testutil.NoCompletion(t, p.B.RecvCQ) // plain writes consume no receive

	// READ it back into A at offset 20000.
	fill(dst[30000:33000], 42)
	if err := p.A.QP.PostSend([]verbs.SendWR{{WRID: 2, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
		SGList: []verbs.SGE{testutil.SGE(p.A.MR, 20000, 3000)}, RemoteAddr: p.B.MR.IOVA() + 30000, RKey: p.B.MR.RKey()}}); err != nil {
		t.Fatal(err)
	}
	wc := testutil.Completions(t, p.A.SendCQ, 1)[0]
	wantWC(t, wc, verbs.WCRDMARead, 2, 3000, p.A.QP.QPN())
	if !bytes.Equal(src[20000:23000], dst[30000:33000]) {
		t.Fatal("RDMA READ data differs")
	}
}

func TestRDMAWriteWithImm(t *testing.T) {
	p := testutil.NewPair(t, testutil.PairOptions{})
	fill(p.A.MR.Bytes()[:512], 5)
	// WRITE_WITH_IMM consumes a receive; its buffer stays untouched.
	if err := p.B.QP.PostRecv([]verbs.RecvWR{{WRID: 99, SGList: []verbs.SGE{testutil.SGE(p.B.MR, 60000, 16)}}}); err != nil {
		t.Fatal(err)
	}
	if err := p.A.QP.PostSend([]verbs.SendWR{{WRID: 3, Opcode: verbs.WRRDMAWriteWithImm, Flags: verbs.SendSignaled,
		Imm: 0x12345678, SGList: []verbs.SGE{testutil.SGE(p.A.MR, 0, 512)}, RemoteAddr: p.B.MR.IOVA() + 100, RKey: p.B.MR.RKey()}}); err != nil {
		testutil.SkipIfNotCapable(t, err, "RDMA_WRITE_WITH_IMM")
		t.Fatal(err)
	}
	swc := testutil.Completions(t, p.A.SendCQ, 1)[0]
	wantWC(t, swc, verbs.WCRDMAWrite, 3, 0, p.A.QP.QPN())
	rwc := testutil.Completions(t, p.B.RecvCQ, 1)[0]
	wantWC(t, rwc, verbs.WCRecvRDMAWithImm, 99, 512, p.B.QP.QPN())
	if rwc.Imm() != 0x12345678 || rwc.Flags&verbs.WCWithImm == 0 {
		t.Errorf("imm %#x flags %#x", rwc.Imm(), rwc.Flags)
	}
	if !bytes.Equal(p.B.MR.Bytes()[100:612], p.A.MR.Bytes()[:512]) {
		t.Fatal("WRITE_WITH_IMM data differs")
	}
}

func TestAtomics(t *testing.T) {
	p := testutil.NewPair(t, testutil.PairOptions{})
	attr, err := p.Ctx.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	testutil.SkipUnlessCap(t, attr.AtomicCap != verbs.AtomicNone, "atomic operations (atomic_cap "+attr.AtomicCap.String()+")")
	target := p.B.MR.Bytes()[64:72]
	binary.NativeEndian.PutUint64(target, 40)
	local := p.A.MR.Bytes()
	remote := p.B.MR.IOVA() + 64

	post := func(wr verbs.SendWR) uint64 {
		t.Helper()
		wr.Flags = verbs.SendSignaled
		wr.SGList = []verbs.SGE{testutil.SGE(p.A.MR, 0, 8)}
		wr.RemoteAddr, wr.RKey = remote, p.B.MR.RKey()
		if err := p.A.QP.PostSend([]verbs.SendWR{wr}); err != nil {
			t.Fatal(err)
		}
		wc := testutil.Completions(t, p.A.SendCQ, 1)[0]
		op := verbs.WCFetchAdd
		if wr.Opcode == verbs.WRAtomicCmpAndSwp {
			op = verbs.WCCompSwap
		}
		wantWC(t, wc, op, wr.WRID, 8, p.A.QP.QPN())
		return binary.NativeEndian.Uint64(local[:8])
	}
	if old := post(verbs.SendWR{WRID: 1, Opcode: verbs.WRAtomicFetchAndAdd, CompareAdd: 2}); old != 40 {
		t.Errorf("FETCH_ADD returned %d, want 40", old)
	}
	if v := binary.NativeEndian.Uint64(target); v != 42 {
		t.Errorf("after FETCH_ADD memory holds %d, want 42", v)
	}
	// A failed compare returns the old value and leaves memory alone.
	if old := post(verbs.SendWR{WRID: 2, Opcode: verbs.WRAtomicCmpAndSwp, CompareAdd: 7, Swap: 100}); old != 42 {
		t.Errorf("CMP_SWP (miss) returned %d", old)
	}
	if old := post(verbs.SendWR{WRID: 3, Opcode: verbs.WRAtomicCmpAndSwp, CompareAdd: 42, Swap: 100}); old != 42 {
		t.Errorf("CMP_SWP (hit) returned %d", old)
	}
	if v := binary.NativeEndian.Uint64(target); v != 100 {
		t.Errorf("after CMP_SWP memory holds %d, want 100", v)
	}
}

func TestUnsignaledAndListDoorbell(t *testing.T) {
	p := testutil.NewPair(t, testutil.PairOptions{})
	wrs := make([]verbs.SendWR, 4)
	for i := range wrs {
		wrs[i] = verbs.SendWR{WRID: uint64(i), Opcode: verbs.WRRDMAWrite, SGList: []verbs.SGE{testutil.SGE(p.A.MR, i*8, 8)},
			RemoteAddr: p.B.MR.IOVA() + uint64(i*8), RKey: p.B.MR.RKey()}
	}
	wrs[3].Flags = verbs.SendSignaled
	fill(p.A.MR.Bytes()[:32], 11)
	if err := p.A.QP.PostSend(wrs); err != nil {
		t.Fatal(err)
	}
	// Only the signaled one completes; it implies the earlier ones.
	wantWC(t, testutil.Completions(t, p.A.SendCQ, 1)[0], verbs.WCRDMAWrite, 3, 0, p.A.QP.QPN())
	testutil.NoCompletion(t, p.A.SendCQ)
	if !bytes.Equal(p.B.MR.Bytes()[:32], p.A.MR.Bytes()[:32]) {
		t.Fatal("list of writes: data differs")
	}
}

func TestErrorCompletions(t *testing.T) {
	t.Run("bad rkey", func(t *testing.T) {
		p := testutil.NewPair(t, testutil.PairOptions{})
		// An iWARP RDMA WRITE is unacknowledged: it may complete once
		// sent, before the peer's TERMINATE reports the bad STag.
		testutil.SkipUnlessCap(t, !testutil.IWARP(p.Ctx), "remote access errors in the writer's completion (transport iWARP acknowledges no RDMA WRITE)")
		if err := p.A.QP.PostSend([]verbs.SendWR{{WRID: 7, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
			SGList: []verbs.SGE{testutil.SGE(p.A.MR, 0, 64)}, RemoteAddr: p.B.MR.IOVA(), RKey: p.B.MR.RKey() ^ 0x5500}}); err != nil {
			t.Fatal(err)
		}
		wc := testutil.CompletionsAnyStatus(t, p.A.SendCQ, 1)[0]
		if wc.Status != verbs.WCRemAccessErr || wc.WRID != 7 || wc.QPNum != p.A.QP.QPN() {
			t.Fatalf("bad rkey: %+v (%s)", wc, wc.Status)
		}
	})
	t.Run("missing receive", func(t *testing.T) {
		p := testutil.NewPair(t, testutil.PairOptions{NoRNRRetry: true})
		testutil.SkipUnlessCap(t, !testutil.IWARP(p.Ctx), "receiver-not-ready retries (transport iWARP has no RNR NAK)")
		if err := p.A.QP.PostSend([]verbs.SendWR{testutil.Carry(t, p.A.QP, verbs.SendWR{WRID: 8, Opcode: verbs.WRSend, Flags: verbs.SendSignaled},
			[]byte("nobody listens"))}); err != nil {
			t.Fatal(err)
		}
		wc := testutil.CompletionsAnyStatus(t, p.A.SendCQ, 1)[0]
		if wc.Status != verbs.WCRNRRetryExcErr || wc.WRID != 8 {
			t.Fatalf("no receive posted: %+v (%s)", wc, wc.Status)
		}
	})
	t.Run("flush", func(t *testing.T) {
		p := testutil.NewPair(t, testutil.PairOptions{})
		for i := 0; i < 3; i++ {
			if err := p.B.QP.PostRecv([]verbs.RecvWR{{WRID: uint64(100 + i), SGList: []verbs.SGE{testutil.SGE(p.B.MR, 0, 64)}}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.B.QP.ToError(); err != nil {
			t.Fatal(err)
		}
		wcs := testutil.CompletionsAnyStatus(t, p.B.RecvCQ, 3)
		for i, wc := range wcs {
			if wc.Status != verbs.WCWRFlushErr || wc.WRID != uint64(100+i) || wc.QPNum != p.B.QP.QPN() {
				t.Fatalf("flushed receive %d: %+v (%s)", i, wc, wc.Status)
			}
		}
		if s := testutil.QPState(t, p.B.QP); s != qp.Error {
			t.Errorf("state after ToError: %s", s)
		}
		// Sends posted in ERR complete flushed too (siw never flushes a
		// send posted after its QP left RTS: qp refuses it).
		if testutil.IWARP(p.Ctx) {
			if err := p.B.QP.PostSend([]verbs.SendWR{{WRID: 5, Opcode: verbs.WRSend, InlineData: []byte("x")}}); !errors.Is(err, verbs.ErrQPState) {
				t.Fatalf("send in ERR on iWARP: %v, want %v", err, verbs.ErrQPState)
			}
			return
		}
		if err := p.B.QP.PostSend([]verbs.SendWR{testutil.Carry(t, p.B.QP, verbs.SendWR{WRID: 5, Opcode: verbs.WRSend, Flags: verbs.SendSignaled}, []byte("x"))}); err != nil {
			t.Fatal(err)
		}
		if wc := testutil.CompletionsAnyStatus(t, p.B.SendCQ, 1)[0]; wc.Status != verbs.WCWRFlushErr || wc.WRID != 5 {
			t.Fatalf("send in ERR: %+v (%s)", wc, wc.Status)
		}
	})
}

func TestUC(t *testing.T) {
	p := testutil.NewPair(t, testutil.PairOptions{Type: qp.UC})
	fill(p.A.MR.Bytes()[:2048], 21)
	if err := p.B.QP.PostRecv([]verbs.RecvWR{{WRID: 1, SGList: []verbs.SGE{testutil.SGE(p.B.MR, 0, 2048)}}}); err != nil {
		t.Fatal(err)
	}
	// The WRITE goes first: UC completes a send when it leaves, and a
	// plain WRITE completes nothing at the responder, so only the receive
	// of the SEND behind it (same QP, processed in order) says the
	// written bytes have landed. (Written the other way round, the check
	// raced 6.12's rxe, which places incoming packets from a workqueue.)
	if err := p.A.QP.PostSend([]verbs.SendWR{
		{WRID: 2, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, SGList: []verbs.SGE{testutil.SGE(p.A.MR, 0, 100)},
			RemoteAddr: p.B.MR.IOVA() + 5000, RKey: p.B.MR.RKey()},
		{WRID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGList: []verbs.SGE{testutil.SGE(p.A.MR, 0, 2048)}},
	}); err != nil {
		t.Fatal(err)
	}
	testutil.Completions(t, p.A.SendCQ, 2)
	wantWC(t, testutil.Completions(t, p.B.RecvCQ, 1)[0], verbs.WCRecv, 1, 2048, p.B.QP.QPN())
	if !bytes.Equal(p.B.MR.Bytes()[:2048], p.A.MR.Bytes()[:2048]) {
		t.Fatal("UC SEND: the received bytes differ from the sent ones")
	}
	if !bytes.Equal(p.B.MR.Bytes()[5000:5100], p.A.MR.Bytes()[:100]) {
		t.Fatal("UC RDMA WRITE: the written bytes differ")
	}
	// UC has no RDMA READ or atomics.
	err := p.A.QP.PostSend([]verbs.SendWR{{Opcode: verbs.WRRDMARead, SGList: []verbs.SGE{testutil.SGE(p.A.MR, 0, 8)}}})
	if !errors.Is(err, verbs.ErrBadOpcode) {
		t.Errorf("READ on UC: %v", err)
	}
}

func TestUD(t *testing.T) {
	p := testutil.NewPair(t, testutil.PairOptions{Type: qp.UD})
	ah, err := p.PD.CreateAH(func() *verbs.AHAttr { a := testutil.Path(t, p.Ctx); return &a }())
	testutil.SkipIfNotCapable(t, err, "address handles (CREATE_AH)")
	if err != nil {
		t.Fatal(err)
	}
	defer ah.Close()
	// A UD receive buffer starts with room for the 40-byte GRH.
	if err := p.B.QP.PostRecv([]verbs.RecvWR{{WRID: 4, SGList: []verbs.SGE{testutil.SGE(p.B.MR, 0, 40+1024)}}}); err != nil {
		t.Fatal(err)
	}
	fill(p.A.MR.Bytes()[:1000], 33)
	// The model carries no immediate data (every send is a plain SEND).
	op, want := verbs.WRSendWithImm, verbs.WCGRH|verbs.WCWithImm
	if testutil.HasModelBug(t, p.Ctx, testutil.QemuPvrdmaSendOnly) {
		op, want = verbs.WRSend, verbs.WCGRH
	}
	if err := p.A.QP.PostSend([]verbs.SendWR{{WRID: 6, Opcode: op, Flags: verbs.SendSignaled, Imm: 77,
		SGList: []verbs.SGE{testutil.SGE(p.A.MR, 0, 1000)}, AH: ah, RemoteQPN: p.B.QP.QPN(), RemoteQKey: testutil.QKey}}); err != nil {
		t.Fatal(err)
	}
	wantWC(t, testutil.Completions(t, p.A.SendCQ, 1)[0], verbs.WCSend, 6, 0, p.A.QP.QPN())
	wc := testutil.Completions(t, p.B.RecvCQ, 1)[0]
	wantWC(t, wc, verbs.WCRecv, 4, 40+1000, p.B.QP.QPN())
	if wc.SrcQP != p.A.QP.QPN() || wc.Flags&want != want || (op == verbs.WRSendWithImm && wc.Imm() != 77) {
		t.Errorf("UD receive %+v", wc)
	}
	if !bytes.Equal(p.B.MR.Bytes()[40:1040], p.A.MR.Bytes()[:1000]) {
		t.Fatal("UD payload differs")
	}
	// A wrong Q_Key is dropped silently; no AH is refused before the kernel.
	one := []verbs.SGE{testutil.SGE(p.A.MR, 0, 1)}
	err = p.A.QP.PostSend([]verbs.SendWR{{Opcode: verbs.WRSend, SGList: one, RemoteQPN: p.B.QP.QPN()}})
	if !errors.Is(err, verbs.ErrBadAH) {
		t.Errorf("UD send without AH: %v", err)
	}
	if err := p.A.QP.PostSend([]verbs.SendWR{{Opcode: verbs.WRRDMAWrite, SGList: one, AH: ah}}); !errors.Is(err, verbs.ErrBadOpcode) {
		t.Errorf("RDMA WRITE on UD: %v", err)
	}
	// A UD post, address handle included, allocates nothing (9 sends:
	// AllocsPerRun runs once more; no receive waits, so B drops them).
	ud := []verbs.SendWR{{WRID: 7, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGList: one,
		AH: ah, RemoteQPN: p.B.QP.QPN(), RemoteQKey: testutil.QKey}}
	if n := testing.AllocsPerRun(8, func() {
		if err := p.A.QP.PostSend(ud); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("UD PostSend: %v allocations per call", n)
	}
	for _, wc := range testutil.Completions(t, p.A.SendCQ, 9) {
		wantWC(t, wc, verbs.WCSend, 7, 0, p.A.QP.QPN())
	}
}
