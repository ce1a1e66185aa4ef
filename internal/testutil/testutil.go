// Package testutil holds what goverbs' tests share: finding the RDMA
// device of the test bed, and leak accounting.
//
// Tests that need a device skip when there is none, unless the environment
// says one must be there: GOVERBS_REQUIRE_DEVICE=1 (the VM harness and CI
// set it) turns a missing device into a failure.
package testutil

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/verbs"
)

// Environment variables set by the test bed (hack/vm).
const (
	EnvRequire = "GOVERBS_REQUIRE_DEVICE" // "1": a missing device fails the test
	EnvDevice  = "GOVERBS_TEST_DEVICE"    // device to test on ("rxe0")
	EnvNetdev  = "GOVERBS_TEST_NETDEV"    // its network device ("veth0")
	EnvAddr    = "GOVERBS_TEST_ADDR"      // its IPv4 address ("169.254.77.1")
	// EnvLeakCycles "short": the leak tests' cycle loops run a tenth of
	// their count (LeakCycles).
	EnvLeakCycles = "GOVERBS_LEAK_CYCLES"
)

// LeakCycles returns how many create/destroy cycles a leak test runs:
// full, or a tenth of it under -short or GOVERBS_LEAK_CYCLES=short. The
// Makefile's stages other than integration-6.12 set that: a kernel object,
// fd or goroutine left behind by each cycle shows in the counts after any
// number of cycles, and the full loops (10,000 create/destroy cycles of
// MR, CQ, QP, SRQ and AH took 320 s of the 6.12 stage under -race on a
// slow machine, 180 s on 6.1, 207 s on arm64) run once per make test,
// on the newest kernel.
func LeakCycles(full int) int {
	if testing.Short() || os.Getenv(EnvLeakCycles) == "short" {
		return max(full/10, 1)
	}
	return full
}

// Required reports whether the environment demands a device.
func Required() bool { return os.Getenv(EnvRequire) == "1" }

// Unavailable skips the test on a bare host and fails it when the device
// is required: for anything the test bed provides (the device, its
// address, rdma-core's tools, root's privileges). Tests never call t.Skip
// themselves: see SkipUnlessCap for the one skip allowed on the test bed.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if Required() {
		t.Fatalf("required by %s=1: "+format, append([]any{EnvRequire}, args...)...)
	}
	t.Skipf("no RDMA test bed: "+format, args...)
}

// CapabilityMarker begins the message of a skip for a capability the
// test device lacks: the only skip hack/vm/check-integration-log.sh
// accepts from a run on the test bed (besides OptInMarker's).
const CapabilityMarker = "goverbs-skip: device lacks capability:"

// OptInMarker begins the message of a skip of a measurement that runs
// only when asked for (SkipUnlessOptIn).
const OptInMarker = "goverbs-skip: opt-in measurement:"

// SkipUnlessCap skips the test, on the test bed too, unless have: the
// device lacks capability, which names it the way the device reports it
// (for example "IBV_ODP_SUPPORT_WRITE in odp_caps.rc_odp_caps"). It is the
// only skip a device test may take when the device is required; use it
// only for what the device itself reports it cannot do.
func SkipUnlessCap(t testing.TB, have bool, capability string) {
	t.Helper()
	if have {
		return
	}
	if strings.TrimSpace(capability) == "" {
		t.Fatal("SkipUnlessCap: name the missing capability")
	}
	t.Skip(capabilityMessage(capability))
}

func capabilityMessage(capability string) string { return CapabilityMarker + " " + capability }

// SkipUnlessOptIn skips a measurement (not a check) unless the
// environment variable env is "1".
func SkipUnlessOptIn(t testing.TB, env string) {
	t.Helper()
	if os.Getenv(env) != "1" {
		SkipOptIn(t, "set "+env+"=1 to run it")
	}
}

// SkipOptIn skips a test that runs only where it is asked for (another
// test bed, a measurement), saying how to run it. It must not hide
// anything the test bed it skips on should provide: use Unavailable for
// that.
func SkipOptIn(t testing.TB, how string) {
	t.Helper()
	t.Skip(OptInMarker + " " + how)
}

// Device returns the device to test on: $GOVERBS_TEST_DEVICE, or else the
// first device goverbs has a provider for.
func Device(t testing.TB) verbs.Device {
	t.Helper()
	devs, err := verbs.Devices()
	if err != nil {
		Unavailable(t, "listing devices: %v", err)
	}
	want := os.Getenv(EnvDevice)
	for _, d := range devs {
		if (want == "" && d.Driver.Supported()) || d.Name == want {
			t.Logf("goverbs-integration: using RDMA device %s (%s, %s)", d.Name, d.Driver, d.Path)
			return d
		}
	}
	if want != "" {
		Unavailable(t, "device %q not found", want)
	}
	Unavailable(t, "no RDMA device with a goverbs provider")
	return verbs.Device{}
}

// Open opens the test device and closes it when the test ends.
func Open(t testing.TB) *verbs.Context {
	t.Helper()
	ctx, err := verbs.OpenDevice(Device(t))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := ctx.Close(); err != nil {
			t.Errorf("close context: %v", err)
		}
	})
	return ctx
}

// Addr returns the test device's IPv4 address.
func Addr(t testing.TB) string {
	t.Helper()
	if a := os.Getenv(EnvAddr); a != "" {
		return a
	}
	Unavailable(t, "%s not set", EnvAddr)
	return ""
}

// Netdev returns the test device's network device (its Ethernet
// interface).
func Netdev(t testing.TB) string {
	t.Helper()
	if n := os.Getenv(EnvNetdev); n != "" {
		return n
	}
	Unavailable(t, "%s not set", EnvNetdev)
	return ""
}

// LookPath finds a program the test needs (rdma-core's tools). When the
// device is required the program is required too.
func LookPath(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Unavailable(t, "%s not installed (hack/vm/install-deps.sh installs it)", name)
	}
	return p
}

// Resources returns the kernel's object counts on dev.
func Resources(t testing.TB, dev verbs.Device) map[string]uint64 {
	t.Helper()
	res, err := dev.Resources()
	if err != nil {
		t.Fatalf("resources of %s: %v", dev.Name, err)
	}
	return res
}

// OpenFDs counts this process's open file descriptors.
func OpenFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("counting fds: %v", err)
	}
	return len(ents) - 1 // the directory's own fd
}

// FDTargets lists what this process's fds point at, for leak reports.
func FDTargets() string {
	ents, _ := os.ReadDir("/proc/self/fd")
	var b strings.Builder
	for _, e := range ents {
		l, _ := os.Readlink("/proc/self/fd/" + e.Name())
		b.WriteString(e.Name() + "->" + l + " ")
	}
	return b.String()
}
