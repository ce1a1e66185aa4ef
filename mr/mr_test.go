package mr_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/verbs"
)

func TestAllocBuffer(t *testing.T) {
	b, err := mr.Alloc(5000)
	if err != nil {
		t.Fatal(err)
	}
	mem := b.Bytes()
	if len(mem) != 5000 || cap(mem) != 8192 || uintptr(unsafe.Pointer(&mem[0]))%4096 != 0 {
		t.Fatalf("len %d cap %d addr %p", len(mem), cap(mem), &mem[0])
	}
	mem[4999] = 1
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if b.Bytes() != nil || b.Close() != nil {
		t.Fatal("Close twice")
	}
	if _, err := mr.Alloc(0); err == nil {
		t.Fatal("Alloc(0) succeeded")
	}
}

func pd(t *testing.T) *verbs.PD {
	ctx := testutil.Open(t)
	p, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRegisterKeys(t *testing.T) {
	p := pd(t)
	local, err := mr.New(p, 4096, mr.LocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	// Without remote access rxe reports rkey 0 on Linux 6.1 and the lkey
	// on 6.12; either way the device refuses remote access to the MR.
	if (local.RKey() != 0 && local.RKey() != local.LKey()) || local.LKey() == 0 || local.Len() != 4096 {
		t.Errorf("local-only MR: lkey %#x rkey %#x len %d", local.LKey(), local.RKey(), local.Len())
	}
	remote, err := mr.New(p, 4096, mr.LocalWrite|mr.RemoteWrite|mr.RemoteRead|mr.RemoteAtomic)
	if err != nil {
		t.Fatal(err)
	}
	defer remote.Close()
	// rxe: rkey equals lkey when remote access is granted (fact sheet §4.8).
	if remote.RKey() != remote.LKey() {
		t.Errorf("remote MR: lkey %#x rkey %#x", remote.LKey(), remote.RKey())
	}
	if remote.IOVA() != uint64(uintptr(unsafe.Pointer(&remote.Bytes()[0]))) {
		t.Errorf("IOVA %#x is not the buffer address", remote.IOVA())
	}
}

func TestRegisterGoMemory(t *testing.T) {
	p := pd(t)
	heap := make([]byte, 64<<10)
	m, err := mr.Register(p, heap, mr.LocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	if &m.Bytes()[0] != &heap[0] {
		t.Error("MR does not reference the caller's memory")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	zb, err := mr.RegisterIOVA(p, heap, 0x1_0000_0000, mr.LocalWrite|mr.RemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	defer zb.Close()
	if zb.IOVA() != 0x1_0000_0000 {
		t.Errorf("IOVA %#x", zb.IOVA())
	}
}

func TestRegisterErrors(t *testing.T) {
	p := pd(t)
	if _, err := mr.Register(p, nil, mr.LocalWrite); !errors.Is(err, unix.EINVAL) {
		t.Errorf("empty buffer: %v", err)
	}
	if _, err := mr.New(p, 4096, mr.RemoteWrite); !errors.Is(err, mr.ErrInvalidAccess) {
		t.Errorf("remote write without local write: %v", err)
	}
	// On-demand paging only where the device reports it (rdma-core's
	// IBV_ODP_SUPPORT, bit 0 of the general ODP caps); elsewhere the
	// kernel refuses: EINVAL on Linux 6.1, EOPNOTSUPP on 6.12.
	attr, err := p.Context().QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	odp, err := mr.New(p, 4096, mr.LocalWrite|mr.OnDemand)
	switch {
	case attr.ODPGeneralCaps&1 != 0:
		if err != nil {
			t.Errorf("ODP registration on a device that reports ODP: %v", err)
		} else {
			odp.Close()
		}
	case !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.EOPNOTSUPP):
		t.Errorf("ODP on a device without ODP: %v, want EINVAL or EOPNOTSUPP", err)
	}
	// An unmapped range cannot be pinned.
	mem, err := unix.Mmap(-1, 0, 8192, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	gone := unsafe.Slice(&mem[0], len(mem))
	unix.Munmap(mem)
	if _, err := mr.Register(p, gone, mr.LocalWrite); !errors.Is(err, unix.EFAULT) {
		t.Errorf("unmapped range: %v", err)
	}
}

func TestPDBusyWhileMRRegistered(t *testing.T) {
	p := pd(t)
	m, err := mr.New(p, 4096, mr.LocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); !errors.Is(err, unix.EBUSY) {
		t.Fatalf("PD.Close with an MR: %v, want EBUSY", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("PD.Close after the MR: %v", err)
	}
	if _, err := mr.New(p, 4096, mr.LocalWrite); !errors.Is(err, verbs.ErrClosed) {
		t.Fatalf("register in a closed PD: %v", err)
	}
	if err := mr.CheckMR(m); !errors.Is(err, verbs.ErrClosed) {
		t.Fatalf("Check of a closed MR: %v", err)
	}
}

func TestContextCloseDeregisters(t *testing.T) {
	dev := testutil.Device(t)
	base := testutil.Resources(t, dev)
	ctx, err := verbs.OpenDevice(dev)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	var mrs []*mr.MR
	for i := 0; i < 4; i++ {
		m, err := mr.New(p, 4096, mr.LocalWrite)
		if err != nil {
			t.Fatal(err)
		}
		mrs = append(mrs, m)
	}
	// MRs before the PD: Close must order them.
	if err := ctx.Close(); err != nil {
		t.Fatal(err)
	}
	if got := testutil.Resources(t, dev); !cmp.Equal(got, base) {
		t.Fatalf("after Context.Close: %v, before %v", got, base)
	}
	for _, m := range mrs {
		if m.Bytes() != nil {
			t.Error("New's memory still mapped after Context.Close")
		}
	}
}

func TestRegisterCyclesLeakNothing(t *testing.T) {
	dev := testutil.Device(t)
	p := pd(t)
	base := testutil.Resources(t, dev)
	fds := testutil.OpenFDs(t)
	cycles := testutil.LeakCycles(10000)
	for i := 0; i < cycles; i++ {
		m, err := mr.New(p, 4096, mr.LocalWrite|mr.RemoteWrite)
		if err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		if err := m.Close(); err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
	}
	if got := testutil.Resources(t, dev); !cmp.Equal(got, base) {
		t.Errorf("after %d cycles: %v, before %v", cycles, got, base)
	}
	if got := testutil.OpenFDs(t); got != fds {
		t.Errorf("fds %d, before %d", got, fds)
	}
}

// Without CAP_IPC_LOCK and with RLIMIT_MEMLOCK 0 the kernel cannot pin:
// the error says what to raise.
func TestRegisterMemlockAdvice(t *testing.T) {
	p := pd(t)
	// Capabilities are per thread, and a thread that changed its
	// credentials may no longer write(2) to uverbs files (the kernel
	// checks the writer's credentials against the opener's): run on a
	// thread of its own that exits with the goroutine instead of going
	// back to the scheduler.
	skip := make(chan string, 1)
	go func() {
		defer close(skip)
		runtime.LockOSThread() // never unlocked: the thread ends with us
		if why := memlockAdvice(t, p); why != "" {
			skip <- why
		}
	}()
	if why := <-skip; why != "" {
		testutil.Unavailable(t, "%s (the test bed runs as root)", why)
	}
}

// memlockAdvice runs on a locked thread; it reports failures with Errorf
// (safe off the test goroutine) and returns why it cannot run, if so.
func memlockAdvice(t *testing.T, p *verbs.PD) string {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err.Error()
	}
	saved := data
	data[0].Effective &^= 1 << unix.CAP_IPC_LOCK
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Sprintf("cannot drop CAP_IPC_LOCK: %v", err)
	}
	defer unix.Capset(&hdr, &saved[0])
	var lim unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim)
	defer unix.Setrlimit(unix.RLIMIT_MEMLOCK, &lim)
	if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: 0, Max: lim.Max}); err != nil {
		t.Errorf("setrlimit: %v", err)
		return ""
	}
	_, err := mr.New(p, 4096, mr.LocalWrite)
	if !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.ENOMEM) {
		t.Errorf("registration with memlock 0: %v", err)
		return ""
	}
	if !strings.Contains(err.Error(), "RLIMIT_MEMLOCK") || !strings.Contains(err.Error(), "CAP_IPC_LOCK") {
		t.Errorf("error %q does not say what to raise", err)
	}
	return ""
}

// Bytes may run while another goroutine closes the MR: no data race (run
// with -race), and nil once Close has returned.
func TestBytesConcurrentWithClose(t *testing.T) {
	p := pd(t)
	for range 20 {
		m, err := mr.New(p, 4096, mr.LocalWrite)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range 100 {
				if b := m.Bytes(); b != nil && len(b) != 4096 {
					t.Errorf("Bytes: %d bytes", len(b))
					return
				}
			}
		}()
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		<-done
		if m.Bytes() != nil {
			t.Fatal("Bytes after Close is not nil")
		}
		if m.Len() != 4096 {
			t.Fatalf("Len after Close: %d", m.Len())
		}
	}
}
