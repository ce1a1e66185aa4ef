package qp_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/verbs"
)

// ATOMIC WRITE and RDMA FLUSH: on a device that reports the capability
// (rxe from Linux 6.2, so 6.12) the value lands at the target and the
// FLUSH completes; on one that does not (6.1) the work request is refused
// before the kernel with verbs.ErrNotCapable and nothing is posted. Which
// branch runs is decided by the device's capability flags, and each
// branch checks what it must.
func TestAtomicWrite(t *testing.T) {
	p := testutil.NewPair(t, testutil.PairOptions{})
	caps, err := p.Ctx.CapFlags()
	if err != nil {
		t.Fatal(err)
	}
	target := p.B.MR.Bytes()[128:136]
	copy(target, "--------")
	wr := verbs.SendWR{WRID: 5, Opcode: verbs.WRAtomicWrite, Flags: verbs.SendSignaled,
		RemoteAddr: p.B.MR.IOVA() + 128, RKey: p.B.MR.RKey(), AtomicData: [8]byte{'a', 't', 'o', 'm', 'i', 'c', '!', 0}}
	err = p.A.QP.PostSend([]verbs.SendWR{wr})
	if caps&verbs.DeviceCapAtomicWrite == 0 {
		if !errors.Is(err, verbs.ErrNotCapable) {
			t.Fatalf("ATOMIC_WRITE without the capability (caps %#x): %v, want ErrNotCapable", caps, err)
		}
		testutil.NoCompletion(t, p.A.SendCQ)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	wc := testutil.Completions(t, p.A.SendCQ, 1)[0]
	if wc.Opcode != verbs.WCAtomicWrite || wc.WRID != 5 {
		t.Errorf("completion %+v, want ATOMIC_WRITE of WRID 5", wc)
	}
	if !bytes.Equal(target, wr.AtomicData[:]) {
		t.Errorf("target holds %q, want %q", target, wr.AtomicData[:])
	}
	// Refused whatever the device: unaligned, with local memory, not RC.
	bad := wr
	bad.RemoteAddr++
	if err := p.A.QP.PostSend([]verbs.SendWR{bad}); !errors.Is(err, verbs.ErrBadAtomic) {
		t.Errorf("unaligned ATOMIC_WRITE: %v", err)
	}
	bad = wr
	bad.SGList = []verbs.SGE{testutil.SGE(p.A.MR, 0, 8)}
	if err := p.A.QP.PostSend([]verbs.SendWR{bad}); !errors.Is(err, verbs.ErrBadOpcode) {
		t.Errorf("ATOMIC_WRITE with an SGE: %v", err)
	}
}

func TestFlush(t *testing.T) {
	p := testutil.NewPair(t, testutil.PairOptions{})
	caps, err := p.Ctx.CapFlags()
	if err != nil {
		t.Fatal(err)
	}
	flush := func(wrid uint64, m *mr.MR, off uint64, n uint32, typ verbs.PlacementType, lvl verbs.FlushSelectivity) error {
		return p.A.QP.PostSend([]verbs.SendWR{{WRID: wrid, Opcode: verbs.WRFlush, Flags: verbs.SendSignaled,
			RemoteAddr: m.IOVA() + off, RKey: m.RKey(), FlushLength: n, FlushPlacement: typ, FlushLevel: lvl}})
	}
	access := mr.LocalWrite | mr.RemoteWrite | mr.RemoteRead | mr.Access(verbs.AccessFlushGlobal)
	if caps&verbs.DeviceCapFlushGlobal == 0 {
		if err := p.Ctx.CheckAccess(uint32(access)); !errors.Is(err, verbs.ErrNotCapable) {
			t.Errorf("FLUSH_GLOBAL access without the capability (caps %#x): %v", caps, err)
		}
		for _, typ := range []verbs.PlacementType{verbs.FlushGlobal, verbs.FlushPersistent} {
			if err := flush(1, p.B.MR, 0, 8, typ, verbs.FlushRange); !errors.Is(err, verbs.ErrNotCapable) {
				t.Errorf("FLUSH %d without the capability: %v, want ErrNotCapable", typ, err)
			}
		}
		testutil.NoCompletion(t, p.A.SendCQ)
		return
	}
	if err := p.Ctx.CheckAccess(uint32(access)); err != nil {
		t.Fatal(err)
	}
	target, err := mr.New(p.PD, 4096, access)
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	// The responder also wants the placement type in the QP's access;
	// both, so that the persistent FLUSH below meets the region's check.
	qpAccess := access | mr.Access(verbs.AccessFlushPersistent)
	if err := p.B.QP.Modify(&qp.Attr{Access: qpAccess}, qp.MaskAccessFlags); err != nil {
		t.Fatal(err)
	}
	// Write, then flush that range, then the whole region.
	src := p.A.MR.Bytes()[:64]
	for i := range src {
		src[i] = byte(i + 1)
	}
	if err := p.A.QP.PostSend([]verbs.SendWR{{WRID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		SGList: []verbs.SGE{testutil.SGE(p.A.MR, 0, 64)}, RemoteAddr: target.IOVA() + 256, RKey: target.RKey()}}); err != nil {
		t.Fatal(err)
	}
	if err := flush(2, target, 256, 64, verbs.FlushGlobal, verbs.FlushRange); err != nil {
		t.Fatal(err)
	}
	if err := flush(3, target, 0, 0, verbs.FlushGlobal, verbs.FlushMR); err != nil {
		t.Fatal(err)
	}
	wcs := testutil.Completions(t, p.A.SendCQ, 3)
	for i, want := range []verbs.WCOpcode{verbs.WCRDMAWrite, verbs.WCFlush, verbs.WCFlush} {
		if wcs[i].Opcode != want || wcs[i].WRID != uint64(i+1) {
			t.Errorf("completion %d: %+v, want %v", i, wcs[i], want)
		}
	}
	if !bytes.Equal(target.Bytes()[256:320], src) {
		t.Errorf("flushed range holds %x", target.Bytes()[256:320])
	}
	// A persistent flush of a region registered only for global
	// placement is refused by the target: proof the type is read.
	if caps&verbs.DeviceCapFlushPersistent != 0 {
		if err := flush(4, target, 0, 8, verbs.FlushPersistent, verbs.FlushRange); err != nil {
			t.Fatal(err)
		}
		wc := testutil.CompletionsAnyStatus(t, p.A.SendCQ, 1)[0]
		if wc.Status != verbs.WCRemAccessErr || wc.WRID != 4 {
			t.Errorf("persistent FLUSH of a global-only region: %+v, want remote access error", wc)
		}
	}
	// Refused whatever the device: no placement type, a bad level, not RC.
	if err := flush(5, target, 0, 8, 0, verbs.FlushRange); !errors.Is(err, verbs.ErrBadOpcode) {
		t.Errorf("FLUSH without a placement type: %v", err)
	}
	if err := flush(6, target, 0, 8, verbs.FlushGlobal, 7); !errors.Is(err, verbs.ErrBadOpcode) {
		t.Errorf("FLUSH with level 7: %v", err)
	}
}

// FLUSH and ATOMIC WRITE are RC operations: other QP types refuse them
// before any capability check.
func TestFlushAtomicWriteNotRC(t *testing.T) {
	p := testutil.NewPair(t, testutil.PairOptions{Type: qp.UC})
	for _, op := range []verbs.WROpcode{verbs.WRFlush, verbs.WRAtomicWrite} {
		err := p.A.QP.PostSend([]verbs.SendWR{{Opcode: op, RemoteAddr: p.B.MR.IOVA(), RKey: p.B.MR.RKey(),
			FlushPlacement: verbs.FlushGlobal}})
		if !errors.Is(err, verbs.ErrBadOpcode) {
			t.Errorf("%v on UC: %v", op, err)
		}
	}
}
