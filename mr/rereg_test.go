package mr_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/verbs"
)

// rdmaWrite writes 64 bytes from A into m (on B's side of p) through rkey
// and returns the completion's status.
func rdmaWrite(t *testing.T, p *testutil.Pair, m *mr.MR, seed byte) verbs.WCStatus {
	t.Helper()
	src := p.A.MR.Bytes()[:64]
	for i := range src {
		src[i] = seed + byte(i)
	}
	if err := p.A.QP.PostSend([]verbs.SendWR{{WRID: uint64(seed), Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		SGList: []verbs.SGE{testutil.SGE(p.A.MR, 0, 64)}, RemoteAddr: m.IOVA(), RKey: m.RKey()}}); err != nil {
		t.Fatal(err)
	}
	wc := testutil.CompletionsAnyStatus(t, p.A.SendCQ, 1)[0]
	if wc.Status == verbs.WCSuccess && !bytes.Equal(m.Bytes()[:64], src) {
		t.Fatal("RDMA WRITE succeeded, but the data differs")
	}
	return wc.Status
}

// rereg re-registers m. A kernel whose driver has no rereg_user_mr answers
// EOPNOTSUPP (siw; rxe on 6.1): the MR must be unchanged and the test skips,
// naming the command; rxe on 6.12 has it for PD and access changes.
func rereg(t *testing.T, p *testutil.Pair, m *mr.MR, attr mr.ReregAttr) {
	t.Helper()
	access, lkey, rkey, pd := m.Access(), m.LKey(), m.RKey(), m.PD()
	err := m.Rereg(attr)
	if errors.Is(err, verbs.ErrNotCapable) {
		dev := p.Ctx.Device()
		if dev.Driver == verbs.DriverRXE && strings.HasPrefix(kernelRelease(t), "6.12.") {
			t.Fatalf("rxe on %s re-registers PD and access changes: %v", kernelRelease(t), err)
		}
		if m.Access() != access || m.LKey() != lkey || m.RKey() != rkey || m.PD() != pd {
			t.Fatal("a refused rereg changed the MR")
		}
		if m.PD() == p.PD && access&mr.RemoteWrite != 0 {
			if st := rdmaWrite(t, p, m, 9); st != verbs.WCSuccess {
				t.Fatalf("RDMA WRITE after a refused rereg: %v", st)
			}
		}
		testutil.SkipUnlessCap(t, false, "IB_USER_VERBS_CMD_REREG_MR "+attr.Flags.String()+" on "+
			dev.Driver.String()+", Linux "+kernelRelease(t)+" ("+err.Error()+")")
	}
	if err != nil {
		t.Fatal(err)
	}
}

// kernelRelease is uname -r.
func kernelRelease(t *testing.T) string {
	t.Helper()
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	return unix.ByteSliceToString(u.Release[:])
}

// TestReregAccess: adding remote write lets the peer write, taking it away
// makes the next write fail with a remote access error.
func TestReregAccess(t *testing.T) {
	p := testutil.NewPair(t, testutil.PairOptions{})
	m, err := mr.New(p.PD, 4096, mr.LocalWrite|mr.RemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	lkey, rkey, handle := m.LKey(), m.RKey(), m.Handle()
	rereg(t, p, m, mr.ReregAttr{Flags: mr.ReregAccess, Access: mr.LocalWrite | mr.RemoteRead | mr.RemoteWrite})
	t.Logf("keys %#x/%#x before, %#x/%#x after", lkey, rkey, m.LKey(), m.RKey())
	if m.Access() != mr.LocalWrite|mr.RemoteRead|mr.RemoteWrite || m.Handle() != handle {
		t.Errorf("after rereg: access %#x handle %d", m.Access(), m.Handle())
	}
	if st := rdmaWrite(t, p, m, 1); st != verbs.WCSuccess {
		t.Fatalf("RDMA WRITE after adding remote write: %v", st)
	}
	rereg(t, p, m, mr.ReregAttr{Flags: mr.ReregAccess, Access: mr.LocalWrite})
	if st := rdmaWrite(t, p, m, 2); st != verbs.WCRemAccessErr {
		t.Fatalf("RDMA WRITE after removing remote write: %v, want %v", st, verbs.WCRemAccessErr)
	}
}

// TestReregPD: an MR moved into the QP's PD takes the peer's write; moved
// out again, it refuses it.
func TestReregPD(t *testing.T) {
	p := testutil.NewPair(t, testutil.PairOptions{})
	other, err := p.Ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	m, err := mr.New(other, 4096, mr.LocalWrite|mr.RemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	rereg(t, p, m, mr.ReregAttr{Flags: mr.ReregPD, PD: p.PD})
	if m.PD() != p.PD {
		t.Error("PD() is not the new PD")
	}
	if st := rdmaWrite(t, p, m, 1); st != verbs.WCSuccess {
		t.Fatalf("RDMA WRITE into the MR moved to the QP's PD: %v", st)
	}
	rereg(t, p, m, mr.ReregAttr{Flags: mr.ReregPD | mr.ReregAccess, PD: other, Access: mr.LocalWrite | mr.RemoteWrite})
	if st := rdmaWrite(t, p, m, 2); st != verbs.WCRemAccessErr {
		t.Fatalf("RDMA WRITE into an MR of another PD: %v, want %v", st, verbs.WCRemAccessErr)
	}
}

// TestReregTranslation moves an MR to other memory. rxe does not implement
// it (its rereg_user_mr takes PD and access changes only): refused with
// ErrNotCapable there, and the MR still works.
func TestReregTranslation(t *testing.T) {
	p := testutil.NewPair(t, testutil.PairOptions{})
	m, err := mr.New(p.PD, 4096, mr.LocalWrite|mr.RemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	buf, err := mr.Alloc(8192)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	err = m.Rereg(mr.ReregAttr{Flags: mr.ReregTranslation, Mem: buf.Bytes()})
	if p.Ctx.Device().Driver == verbs.DriverRXE {
		if !errors.Is(err, verbs.ErrNotCapable) || !errors.Is(err, unix.EOPNOTSUPP) {
			t.Fatalf("translation change on rxe: %v, want ErrNotCapable", err)
		}
		if m.Len() != 4096 {
			t.Errorf("refused rereg changed the MR: length %d", m.Len())
		}
		if st := rdmaWrite(t, p, m, 1); st != verbs.WCSuccess {
			t.Fatalf("RDMA WRITE after a refused rereg: %v", st)
		}
		return
	}
	if errors.Is(err, verbs.ErrNotCapable) {
		testutil.SkipUnlessCap(t, false, "IB_USER_VERBS_CMD_REREG_MR translation ("+err.Error()+")")
	}
	if err != nil {
		t.Fatal(err)
	}
	if m.Len() != 8192 || &m.Bytes()[0] != &buf.Bytes()[0] {
		t.Fatalf("after rereg: length %d", m.Len())
	}
	if st := rdmaWrite(t, p, m, 1); st != verbs.WCSuccess {
		t.Fatalf("RDMA WRITE into the new memory: %v", st)
	}
}

func TestReregBadInput(t *testing.T) {
	p := pd(t)
	m, err := mr.New(p, 4096, mr.LocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		attr mr.ReregAttr
		want error
	}{
		{mr.ReregAttr{}, unix.EINVAL},
		{mr.ReregAttr{Flags: 8}, unix.EINVAL},
		{mr.ReregAttr{Flags: mr.ReregAccess, Access: mr.RemoteWrite}, mr.ErrInvalidAccess},
		{mr.ReregAttr{Flags: mr.ReregTranslation}, unix.EINVAL},
		{mr.ReregAttr{Flags: mr.ReregPD}, unix.EINVAL},
	} {
		if err := m.Rereg(tc.attr); !errors.Is(err, tc.want) {
			t.Errorf("Rereg(%+v): %v, want %v", tc.attr, err, tc.want)
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Rereg(mr.ReregAttr{Flags: mr.ReregAccess, Access: mr.LocalWrite}); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("Rereg after Close: %v", err)
	}
	if s := (mr.ReregPD | mr.ReregAccess | 16).String(); s != "pd|access|0x10" {
		t.Errorf("String %q", s)
	}
}
