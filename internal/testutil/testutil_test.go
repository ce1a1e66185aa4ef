package testutil

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/verbs"
)

// No test skips by itself: a skip goes through Unavailable (which fails
// when the device is required), SkipUnlessCap (which names a capability
// the device lacks) or SkipUnlessOptIn, so that no skip on the test bed
// can hide a missing capability.
func TestNoDirectSkips(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root not found: %v", err)
	}
	skip := regexp.MustCompile(`\.(Skip|Skipf|SkipNow)\(`)
	self := filepath.Join(root, "internal", "testutil")
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") || filepath.Dir(path) == self {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		checked++
		for i, line := range strings.Split(string(b), "\n") {
			if skip.MatchString(line) {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s:%d: skips directly (use testutil.Unavailable, SkipUnlessCap or SkipUnlessOptIn): %s", rel, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 10 {
		t.Fatalf("only %d test files found under %s", checked, root)
	}
}

// recorder is a testing.TB that records skips and failures instead of
// taking them, so that testing the skip helpers leaves no real skip in the
// log check-integration-log.sh reads.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper()                     {}
func (r *recorder) Skip(args ...any)            { r.skipped = fmt.Sprint(args...) }
func (r *recorder) Fatal(args ...any)           { r.failed = fmt.Sprint(args...) }
func (r *recorder) Skipf(f string, args ...any) { r.skipped = fmt.Sprintf(f, args...) }

func TestSkipUnlessCap(t *testing.T) {
	var r recorder
	SkipUnlessCap(&r, true, "IBV_DEVICE_MEM_WINDOW_TYPE_2B")
	if r.skipped != "" || r.failed != "" {
		t.Fatalf("device has the capability: skipped %q, failed %q", r.skipped, r.failed)
	}
	SkipUnlessCap(&r, false, "IBV_DEVICE_MEM_WINDOW_TYPE_2B")
	if want := CapabilityMarker + " IBV_DEVICE_MEM_WINDOW_TYPE_2B"; r.skipped != want || r.failed != "" {
		t.Fatalf("device lacks the capability: skipped %q (want %q), failed %q", r.skipped, want, r.failed)
	}
	r = recorder{}
	SkipUnlessCap(&r, false, " ")
	if r.failed == "" {
		t.Fatal("a skip naming no capability did not fail")
	}
}

// qemu's pvrdma model is told from VMware's device by the capabilities
// it leaves unset, and from other devices by the driver.
func TestQemuPvrdma(t *testing.T) {
	model := verbs.DeviceAttr{VendorPartID: 0x0820}
	vmware := model
	vmware.VendorID, vmware.MaxQPRDAtomic, vmware.MaxQPInitRDAtomic = 0x15ad, 16, 16
	var zero verbs.DeviceAttr
	for _, c := range []struct {
		name string
		drv  verbs.Driver
		a    verbs.DeviceAttr
		want bool
	}{
		{"qemu model", verbs.DriverPVRDMA, model, true},
		{"VMware device", verbs.DriverPVRDMA, vmware, false},
		{"rxe, zero attributes", verbs.DriverRXE, zero, false},
		{"siw, zero attributes", verbs.DriverSIW, zero, false},
	} {
		if got := qemuPvrdma(c.drv, &c.a); got != c.want {
			t.Errorf("%s: qemuPvrdma %v, want %v", c.name, got, c.want)
		}
	}
}
