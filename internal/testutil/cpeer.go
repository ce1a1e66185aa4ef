package testutil

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// BuildC compiles C sources (paths relative to the test's package
// directory) into an executable in a temporary directory and returns its
// path. It links with librpma, libibverbs and librdmacm (Debian's
// librpma-dev, installed by hack/vm/install-deps.sh). When the device is
// required, a missing compiler or library fails the test.
func BuildC(t testing.TB, name string, srcs ...string) string {
	t.Helper()
	cc := LookPath(t, "gcc")
	out := filepath.Join(t.TempDir(), name)
	args := append([]string{"-O2", "-Wall", "-Werror", "-o", out}, srcs...)
	args = append(args, "-lrpma", "-libverbs", "-lrdmacm", "-lpthread")
	cmd := exec.Command(cc, args...)
	if b, err := cmd.CombinedOutput(); err != nil {
		if strings.Contains(string(b), "librpma.h") || strings.Contains(string(b), "cannot find -l") {
			Unavailable(t, "building %s needs librpma-dev: %s", name, b)
		}
		t.Fatalf("gcc %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return out
}
