package uverbs

import (
	"errors"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// threadMask is the calling thread's signal mask.
func threadMask(t *testing.T) unix.Sigset_t {
	t.Helper()
	var m unix.Sigset_t
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, nil, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// sigBit reports whether sig is in m.
func sigBit(m unix.Sigset_t, sig unix.Signal) bool {
	n := uint(sig) - 1
	return m.Val[n/64]>>(n%64)&1 != 0
}

// With BlockSignalsInUse, f runs with every blockable signal blocked on
// its thread (the preemption signal above all), and the thread's mask is
// as before once Use returns; without it, Use leaves the mask alone.
func TestFDBlockSignalsInUse(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before := threadMask(t)
	if sigBit(before, unix.SIGURG) {
		t.Fatal("SIGURG blocked before the test")
	}
	raw, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	fd := NewFD(raw)
	defer fd.Close()

	var inside unix.Sigset_t
	if err := fd.Use(func(int) error { inside = threadMask(t); return nil }); err != nil {
		t.Fatal(err)
	}
	if sigBit(inside, unix.SIGURG) {
		t.Error("SIGURG blocked in Use without BlockSignalsInUse")
	}

	fd.BlockSignalsInUse()
	want := errors.New("from f")
	err = fd.Use(func(got int) error {
		if got != raw {
			t.Errorf("f got fd %d, want %d", got, raw)
		}
		inside = threadMask(t)
		return want
	})
	if err != want {
		t.Errorf("Use returned %v, want f's error", err)
	}
	for _, sig := range []unix.Signal{unix.SIGURG, unix.SIGPROF, unix.SIGCHLD, unix.SIGINT, unix.SIGTERM, unix.SIGUSR1, unix.Signal(34) /* SIGRTMIN */} {
		if !sigBit(inside, sig) {
			t.Errorf("%v not blocked in Use", sig)
		}
	}
	if after := threadMask(t); after != before {
		t.Errorf("mask after Use %x, before %x", after.Val[0], before.Val[0])
	}

	fd.Close()
	if err := fd.Use(func(int) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("Use after Close: %v", err)
	}
}
