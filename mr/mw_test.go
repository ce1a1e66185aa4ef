package mr_test

import (
	"bytes"
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/kobj"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/verbs"
)

// windowBed is a connected pair whose B side exposes target through
// memory windows.
type windowBed struct {
	p      *testutil.Pair
	target *mr.MR
}

func newWindowBed(t *testing.T) *windowBed {
	t.Helper()
	p := testutil.NewPair(t, testutil.PairOptions{})
	attr, err := p.Ctx.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	testutil.SkipUnlessCap(t, attr.MaxMW > 0, "memory windows (max_mw 0)")
	target, err := mr.New(p.PD, 64<<10, mr.LocalWrite|mr.RemoteWrite|mr.RemoteRead|mr.MWBind)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { target.Close() })
	return &windowBed{p: p, target: target}
}

func (b *windowBed) alloc(t *testing.T, typ mr.MWType) *mr.MW {
	t.Helper()
	w, err := mr.AllocMW(b.p.PD, typ)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// post posts wr on side s and returns its completion, whatever its
// status: callers check it.
func post(t *testing.T, s *testutil.Side, wr verbs.SendWR) verbs.WorkCompletion {
	t.Helper()
	wr.Flags |= verbs.SendSignaled
	if err := s.QP.PostSend([]verbs.SendWR{wr}); err != nil {
		t.Fatal(err)
	}
	return testutil.CompletionsAnyStatus(t, s.SendCQ, 1)[0]
}

// mustPost posts wr on side s and fails unless it completes successfully.
func mustPost(t *testing.T, s *testutil.Side, wr verbs.SendWR, what string) {
	t.Helper()
	if wc := post(t, s, wr); wc.Status != verbs.WCSuccess {
		t.Fatalf("%s: %v", what, wc.Status)
	}
}

// bind binds w to [off, off+n) of the target through B's QP.
func (b *windowBed) bind(t *testing.T, w *mr.MW, off, n int, access mr.Access) {
	t.Helper()
	b.bindVia(t, &b.p.B, w, b.target, off, n, access)
}

// bindVia binds w to [off, off+n) of m through side s's QP.
func (b *windowBed) bindVia(t *testing.T, s *testutil.Side, w *mr.MW, m *mr.MR, off, n int, access mr.Access) {
	t.Helper()
	var addr uint64
	if m != nil {
		addr = m.IOVA() + uint64(off)
	}
	wr, err := w.BindWR(7, m, addr, uint64(n), access, 0)
	if err != nil {
		t.Fatal(err)
	}
	if wc := post(t, s, wr); wc.Status != verbs.WCSuccess || wc.Opcode != verbs.WCBindMW || wc.WRID != 7 {
		t.Fatalf("bind completion: %v %v wrid %d", wc.Status, wc.Opcode, wc.WRID)
	}
}

// denied checks that an RDMA write through rkey at off is refused.
func (b *windowBed) denied(t *testing.T, rkey uint32, off int, what string) {
	t.Helper()
	if st := b.write(t, rkey, off, "denied"); st != verbs.WCRemAccessErr {
		t.Fatalf("write %s: %v, want %v", what, st, verbs.WCRemAccessErr)
	}
}

// write RDMA-writes data from A into the target at off through rkey and
// returns the completion status.
func (b *windowBed) write(t *testing.T, rkey uint32, off int, data string) verbs.WCStatus {
	t.Helper()
	copy(b.p.A.MR.Bytes(), data)
	return post(t, &b.p.A, verbs.SendWR{Opcode: verbs.WRRDMAWrite, SGList: []verbs.SGE{testutil.SGE(b.p.A.MR, 0, len(data))},
		RemoteAddr: b.target.IOVA() + uint64(off), RKey: rkey}).Status
}

func TestMemoryWindowType2(t *testing.T) {
	b := newWindowBed(t)
	w := b.alloc(t, mr.MWType2)
	if w.Type() != mr.MWType2 || w.RKey() == 0 {
		t.Fatalf("new window: %v rkey %#x", w.Type(), w.RKey())
	}
	first := w.RKey()
	b.bind(t, w, 4096, 4096, mr.RemoteWrite|mr.RemoteRead)
	if w.RKey() != verbs.IncRKey(first) || w.RKey()>>8 != first>>8 {
		t.Fatalf("rkey after bind %#x, allocated %#x", w.RKey(), first)
	}
	// Inside the window: write, then read back through it.
	if st := b.write(t, w.RKey(), 4096+100, "through the window"); st != verbs.WCSuccess {
		t.Fatalf("write through the window: %v", st)
	}
	if got := b.target.Bytes()[4196 : 4196+18]; string(got) != "through the window" {
		t.Fatalf("target holds %q", got)
	}
	clear(b.p.A.MR.Bytes()[:64])
	wc := post(t, &b.p.A, verbs.SendWR{Opcode: verbs.WRRDMARead, SGList: []verbs.SGE{testutil.SGE(b.p.A.MR, 0, 18)},
		RemoteAddr: b.target.IOVA() + 4196, RKey: w.RKey()})
	if wc.Status != verbs.WCSuccess || string(b.p.A.MR.Bytes()[:18]) != "through the window" {
		t.Fatalf("read through the window: %v %q", wc.Status, b.p.A.MR.Bytes()[:18])
	}
	// LOCAL_INV revokes it; the window can be bound again, with a new key.
	if wc := post(t, &b.p.B, w.InvalidateWR(8, 0)); wc.Status != verbs.WCSuccess || wc.Opcode != verbs.WCLocalInv {
		t.Fatalf("local invalidate: %v %v", wc.Status, wc.Opcode)
	}
	second := w.RKey()
	b.bind(t, w, 0, 8192, mr.RemoteWrite)
	if st := b.write(t, w.RKey(), 10, "rebound"); st != verbs.WCSuccess {
		t.Fatalf("write after rebinding: %v", st)
	}
	// The old key no longer works: the access error ends the connection.
	b.denied(t, second, 20, "through the invalidated rkey")
	if bytes.Contains(b.target.Bytes(), []byte("denied")) {
		t.Fatal("a write through a stale rkey landed")
	}
}

// Accesses through a window are checked against its access flags and its
// memory region. (rxe, 6.1 and later alike, checks the range against the
// MR, not against the window's own bounds: that part is the kernel's.)
func TestMemoryWindowAccessChecks(t *testing.T) {
	t.Run("past the end of the MR", func(t *testing.T) {
		b := newWindowBed(t)
		w := b.alloc(t, mr.MWType2)
		b.bind(t, w, 60<<10, 4<<10, mr.RemoteWrite)
		b.denied(t, w.RKey(), 64<<10-4, "past the MR")
	})
	t.Run("read-only window", func(t *testing.T) {
		b := newWindowBed(t)
		w := b.alloc(t, mr.MWType2)
		b.bind(t, w, 0, 4096, mr.RemoteRead)
		b.denied(t, w.RKey(), 0, "to a read-only window")
	})
	t.Run("unbound window", func(t *testing.T) {
		b := newWindowBed(t)
		w := b.alloc(t, mr.MWType2)
		b.denied(t, w.RKey(), 0, "through a window never bound")
	})
	t.Run("window bound through another QP", func(t *testing.T) {
		// A type 2 window belongs to the QP that bound it: A's peer is
		// B, so a window bound through A is not B's to grant.
		b := newWindowBed(t)
		w := b.alloc(t, mr.MWType2)
		b.bindVia(t, &b.p.A, w, b.target, 0, 4096, mr.RemoteWrite)
		b.denied(t, w.RKey(), 0, "through a window bound to another QP")
	})
}

func TestMemoryWindowSendWithInvalidate(t *testing.T) {
	b := newWindowBed(t)
	w := b.alloc(t, mr.MWType2)
	b.bind(t, w, 0, 4096, mr.RemoteWrite|mr.RemoteRead)
	rkey := w.RKey()
	if err := b.p.B.QP.PostRecv([]verbs.RecvWR{{WRID: 3, SGList: []verbs.SGE{testutil.SGE(b.p.B.MR, 0, 64)}}}); err != nil {
		t.Fatal(err)
	}
	wc := post(t, &b.p.A, verbs.SendWR{Opcode: verbs.WRSendWithInv, InlineData: []byte("done with it"), InvalidateRKey: rkey})
	if wc.Status != verbs.WCSuccess {
		t.Fatalf("SEND_WITH_INV: %v", wc.Status)
	}
	rc := testutil.Completions(t, b.p.B.RecvCQ, 1)[0]
	if rc.Status != verbs.WCSuccess || rc.Flags&verbs.WCWithInvalidate == 0 || rc.InvalidatedRKey() != rkey ||
		string(b.p.B.MR.Bytes()[:rc.ByteLen]) != "done with it" {
		t.Fatalf("receive: %v flags %v rkey %#x (want %#x) %q", rc.Status, rc.Flags, rc.InvalidatedRKey(), rkey,
			b.p.B.MR.Bytes()[:rc.ByteLen])
	}
	b.denied(t, rkey, 0, "through the remotely invalidated rkey")
}

func TestMemoryWindowType1(t *testing.T) {
	b := newWindowBed(t)
	w := b.alloc(t, mr.MWType1)
	b.bind(t, w, 0, 4096, mr.RemoteWrite)
	if st := b.write(t, w.RKey(), 64, "type one"); st != verbs.WCSuccess {
		t.Fatalf("write through a type 1 window: %v", st)
	}
	if got := string(b.target.Bytes()[64:72]); got != "type one" {
		t.Fatalf("target holds %q", got)
	}
	// A zero-length bind unbinds a type 1 window.
	b.bindVia(t, &b.p.B, w, nil, 0, 0, 0)
	b.denied(t, w.RKey(), 64, "through an unbound window")
}

func TestMemoryWindowErrors(t *testing.T) {
	b := newWindowBed(t)
	w := b.alloc(t, mr.MWType2)
	if _, err := mr.AllocMW(b.p.PD, 3); !errors.Is(err, unix.EINVAL) {
		t.Errorf("window type 3: %v", err)
	}
	otherPD, err := b.p.Ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	otherMR, err := mr.New(otherPD, 4096, mr.LocalWrite|mr.MWBind)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { otherMR.Close(); otherPD.Close() })
	base := b.target.IOVA()
	for _, tc := range []struct {
		name         string
		m            *mr.MR
		addr, length uint64
		access       mr.Access
	}{
		{"MR without MWBind", b.p.B.MR, b.p.B.MR.IOVA(), 8, mr.RemoteRead},
		{"MR of another PD", otherMR, otherMR.IOVA(), 8, mr.RemoteRead},
		{"starts before the MR", b.target, base - 1, 8, mr.RemoteRead},
		{"ends past the MR", b.target, base + 64<<10 - 4, 8, mr.RemoteRead},
		{"wraps around", b.target, base + 8, ^uint64(0), mr.RemoteRead},
		{"zero length type 2", b.target, base, 0, mr.RemoteRead},
		{"no MR for type 2", nil, 0, 0, 0},
		{"local access flags", b.target, base, 8, mr.LocalWrite | mr.MWBind},
	} {
		before := w.RKey()
		if _, err := w.BindWR(1, tc.m, tc.addr, tc.length, tc.access, 0); !errors.Is(err, mr.ErrBadMWBind) {
			t.Errorf("%s: %v, want %v", tc.name, err, mr.ErrBadMWBind)
		}
		if w.RKey() != before {
			t.Errorf("%s: a refused bind changed the rkey", tc.name)
		}
	}
	// A writable window needs LocalWrite on the MR.
	ro, err := mr.New(b.p.PD, 4096, mr.RemoteRead|mr.MWBind)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ro.Close() })
	if _, err := w.BindWR(1, ro, ro.IOVA(), 8, mr.RemoteWrite, 0); !errors.Is(err, mr.ErrBadMWBind) {
		t.Errorf("writable window on a read-only MR: %v", err)
	}
	// UD QPs have no memory windows; the QP refuses before the kernel.
	ud := testutil.NewPairIn(t, b.p.PD, testutil.PairOptions{Type: qp.UD})
	wr, err := w.BindWR(1, b.target, base, 8, mr.RemoteRead, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.SetRKey(wr.Bind.MWRKey)
	if err := ud.A.QP.PostSend([]verbs.SendWR{wr}); !errors.Is(err, verbs.ErrBadOpcode) {
		t.Errorf("bind on a UD QP: %v", err)
	}
	// Closed windows refuse binds; Close is idempotent.
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.BindWR(1, b.target, base, 8, mr.RemoteRead, 0); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("bind of a closed window: %v", err)
	}
}

// Closing a context with a window still bound through a QP releases
// everything.
func TestMemoryWindowContextClose(t *testing.T) {
	b := newWindowBed(t)
	for range 3 {
		w := b.alloc(t, mr.MWType2)
		b.bind(t, w, 0, 4096, mr.RemoteRead)
	}
	if n := kobj.ContextOf(b.p.Ctx).Count(kobj.KindMW); n != 3 {
		t.Fatalf("%d windows tracked, want 3", n)
	}
	if err := b.p.Ctx.Close(); err != nil {
		t.Fatalf("context close with bound windows: %v", err)
	}
}

// Binds built by hand, past BindWR's checks, are refused by the device
// with a bind error completion: proof that it reads the range and keys
// where goverbs writes them.
func TestMemoryWindowDeviceChecks(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(b *windowBed, m *verbs.MWBind)
	}{
		{"lkey of no MR", func(b *windowBed, m *verbs.MWBind) { m.MRLKey = 0xffffff00 }},
		{"range past the MR", func(b *windowBed, m *verbs.MWBind) { m.Length = 64<<10 + 1 }},
		{"range before the MR", func(b *windowBed, m *verbs.MWBind) { m.Addr-- }},
		{"MR without MW_BIND", func(b *windowBed, m *verbs.MWBind) { m.MRLKey, m.Addr = b.p.B.MR.LKey(), b.p.B.MR.IOVA() }},
		{"stale window rkey", func(b *windowBed, m *verbs.MWBind) { m.MWRKey = verbs.IncRKey(m.MWRKey) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newWindowBed(t)
			w := b.alloc(t, mr.MWType2)
			wr, err := w.BindWR(1, b.target, b.target.IOVA(), 4096, mr.RemoteWrite, 0)
			if err != nil {
				t.Fatal(err)
			}
			tc.edit(b, &wr.Bind)
			// 6.1 reports MW_BIND_ERR; 6.12 moves the QP to ERR and its
			// completer flushes the failed bind (WR_FLUSH_ERR), see
			// docs/kernels.md.
			if wc := post(t, &b.p.B, wr); wc.Status != verbs.WCMWBindErr && wc.Status != verbs.WCWRFlushErr {
				t.Fatalf("bind: %v, want %v (or %v)", wc.Status, verbs.WCMWBindErr, verbs.WCWRFlushErr)
			}
		})
	}
}

// Closing a QP a type 2 window is bound through deallocates the window
// first (rxe 6.1 would otherwise stall the destroy for a minute and warn);
// windows invalidated through it, bound elsewhere or of type 1 stay.
func TestMemoryWindowQPClose(t *testing.T) {
	b := newWindowBed(t)
	held := b.alloc(t, mr.MWType2)
	b.bind(t, held, 0, 4096, mr.RemoteWrite)
	freed := b.alloc(t, mr.MWType2)
	b.bind(t, freed, 0, 4096, mr.RemoteWrite)
	mustPost(t, &b.p.B, freed.InvalidateWR(2, 0), "invalidate")
	one := b.alloc(t, mr.MWType1)
	b.bind(t, one, 0, 4096, mr.RemoteWrite)
	elsewhere := b.alloc(t, mr.MWType2)
	b.bindVia(t, &b.p.A, elsewhere, b.target, 0, 4096, mr.RemoteWrite)
	if err := b.p.B.QP.Close(); err != nil {
		t.Fatalf("closing the QP a window is bound through: %v", err)
	}
	if mr.CheckMW(held) == nil {
		t.Error("the window held by the closed QP is still open")
	}
	for _, w := range []*mr.MW{freed, one, elsewhere} {
		if err := mr.CheckMW(w); err != nil {
			t.Errorf("%v window: %v", w.Type(), err)
		}
	}
	if n := kobj.ContextOf(b.p.Ctx).Count(kobj.KindMW); n != 3 {
		t.Errorf("%d windows tracked, want 3", n)
	}
	for _, w := range []*mr.MW{freed, one, elsewhere} {
		if err := w.Close(); err != nil {
			t.Errorf("closing a %v window: %v", w.Type(), err)
		}
	}
}

// rxe invalidates only memory windows (and kernel fast-registration MRs):
// LOCAL_INV of a user MR's key fails.
func TestLocalInvalidateOfMRFails(t *testing.T) {
	b := newWindowBed(t)
	wc := post(t, &b.p.B, verbs.SendWR{Opcode: verbs.WRLocalInv, InvalidateRKey: b.target.RKey()})
	// 6.12 flushes the failed local operation instead (docs/kernels.md).
	if wc.Status != verbs.WCLocQPOpErr && wc.Status != verbs.WCWRFlushErr {
		t.Fatalf("LOCAL_INV of a registered MR: %v, want %v (or %v)", wc.Status, verbs.WCLocQPOpErr, verbs.WCWRFlushErr)
	}
}
