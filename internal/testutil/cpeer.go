package testutil

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// BuildC compiles C sources (paths relative to the test's package
// directory) into an executable and returns its path. It links with
// librpma, libibverbs and librdmacm (Debian's librpma-dev, installed by
// hack/vm/install-deps.sh). When the device is required, a missing
// compiler or library fails the test.
//
// The executable is kept for the rest of the machine's boot, in a
// directory of os.TempDir() named for the boot, the compiler, the
// arguments and the sources' contents: the test binaries a guest of the
// test bed runs one after another (hack/vm/batch.sh) build the same peer
// once, not once each (gcc under TCG takes 15-30 s a build). A new boot,
// an edited source or other arguments build again.
func BuildC(t testing.TB, name string, srcs ...string) string {
	t.Helper()
	cc := LookPath(t, "gcc")
	tail := append(append([]string{}, srcs...), "-lrpma", "-libverbs", "-lrdmacm", "-lpthread")
	dir := filepath.Join(os.TempDir(), "goverbs-c-"+buildKey(t, cc, name, tail))
	out := filepath.Join(dir, name)
	if fi, err := os.Stat(out); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o100 != 0 {
		return out
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// gcc writes a name of this process's own; the rename that publishes
	// it is atomic, so a reader never sees half an executable.
	tmp, err := os.CreateTemp(dir, name+".*.part")
	if err != nil {
		t.Fatal(err)
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	args := append([]string{"-O2", "-Wall", "-Werror", "-o", tmp.Name()}, tail...)
	cmd := exec.Command(cc, args...)
	if b, err := cmd.CombinedOutput(); err != nil {
		if strings.Contains(string(b), "librpma.h") || strings.Contains(string(b), "cannot find -l") {
			Unavailable(t, "building %s needs librpma-dev: %s", name, b)
		}
		t.Fatalf("gcc %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		t.Fatal(err)
	}
	return out
}

// buildKey names a build: the boot (/proc/sys/kernel/random/boot_id), the
// compiler's path, the executable's name, and the arguments with each
// source's contents and the headers beside it.
func buildKey(t testing.TB, cc, name string, args []string) string {
	t.Helper()
	h := sha256.New()
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Fatalf("the boot's id: %v", err)
	}
	for _, s := range []string{string(boot), cc, name} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	file := func(f string) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("C source: %v", err)
		}
		h.Write([]byte(f))
		h.Write([]byte{0})
		h.Write(b)
		h.Write([]byte{0})
	}
	var dirs []string // the sources' directories, whose headers count too
	for _, a := range args {
		h.Write([]byte(a))
		h.Write([]byte{0})
		if strings.HasPrefix(a, "-") {
			continue
		}
		file(a)
		if d := filepath.Dir(a); !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	for _, d := range dirs {
		hdrs, err := filepath.Glob(filepath.Join(d, "*.h"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range hdrs {
			file(f)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
