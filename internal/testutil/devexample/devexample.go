// Package devexample runs the Examples of goverbs' packages that need an
// RDMA device (the device "rxe0", which they open by name) only where
// there is one.
//
// go test runs every Example with an "// Output:" comment and compares
// what it printed. An Example that opens rxe0 cannot print its output on
// a machine without RDMA, and an Example must not hide a missing device
// behind a code path of its own (users copy Examples). So a package's
// TestMain names its device Examples and calls Main: where rxe0 exists,
// or the environment requires a device (testutil.EnvRequire, set in the
// test bed's VM) and the tests were not sent to another device
// ($GOVERBS_TEST_DEVICE), they run like any other and must print their
// Output; elsewhere they are left out through -test.skip, and a line on
// stderr says so, the way device tests skip on a bare host.
package devexample

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/verbs"
)

// Device is the device the Examples open.
const Device = "rxe0"

// Main runs the package's tests and exits; need names the Examples that
// open Device.
func Main(m *testing.M, need ...string) {
	flag.Parse()
	if len(need) > 0 && !present() && (!testutil.Required() || elsewhere()) {
		skip := "^(" + strings.Join(quote(need), "|") + ")$"
		if cur := flag.Lookup("test.skip").Value.String(); cur != "" {
			skip = cur + "|" + skip
		}
		if err := flag.Set("test.skip", skip); err != nil {
			fmt.Fprintln(os.Stderr, "devexample:", err)
			os.Exit(2)
		}
		fmt.Fprintf(os.Stderr, "no RDMA device %s here: the Examples that need it are left out (%s); the test bed (hack/vm) runs them\n",
			Device, strings.Join(need, ", "))
	}
	os.Exit(m.Run())
}

// elsewhere reports whether the tests were sent to a device other than
// Device ($GOVERBS_TEST_DEVICE): a bed whose only device is another one
// (the pvrdma bed's vmw_pvrdma0) requires that device, not rxe0.
func elsewhere() bool {
	d := os.Getenv(testutil.EnvDevice)
	return d != "" && d != Device
}

func present() bool {
	_, err := verbs.LookupDevice(Device)
	return err == nil
}

func quote(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = regexp.QuoteMeta(n)
	}
	return out
}
