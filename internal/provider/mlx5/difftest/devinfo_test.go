package difftest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/internal/tools/devinfo"
	"github.com/goverbs/goverbs/internal/uverbshook"
)

// TestDevinfo compares goverbs devinfo -v, run against the Go fake
// kernel, with rdma-core 44's ibv_devinfo -v (Debian's ibverbs-utils)
// run on libibverbs + libmlx5 against the C one: the two outputs must be
// equal line for line; and the same without -v, with -l, and with -d
// and -i. Both fakes present the device of
// testdata/device.txt: the extended QUERY_DEVICE with mlx5's driver
// response (TSO, RSS hash, packet pacing caps), QUERY_PORT, the GID table
// (sysfs' gids files for libibverbs, which the C fake refuses every
// ioctl; QUERY_GID_TABLE for goverbs) and the sysfs tree (board_id,
// GUIDs). The outputs differ in nothing on purpose. make test-mlx5 runs
// it; it needs the C side (MLX5_C_DIR, make mlx5-c) and skips without
// it.
func TestDevinfo(t *testing.T) {
	cdir := os.Getenv("MLX5_C_DIR")
	if cdir == "" {
		testutil.SkipOptIn(t, "make test-mlx5 runs it (MLX5_C_DIR: the C side that make mlx5-c builds)")
	}
	ibvDevinfo, err := exec.LookPath("ibv_devinfo")
	if err != nil {
		t.Fatalf("ibv_devinfo (Debian's ibverbs-utils, which make mlx5-c installs): %v", err)
	}
	dev := devicePath(t)
	d, err := loadDevice(dev)
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"-v"}, {}, {"-l"}, {"-d", d.Name, "-i", "1", "-v"}} {
		t.Run(strings.Join(append([]string{"args"}, args...), " "), func(t *testing.T) {
			cmd := exec.Command(ibvDevinfo, args...)
			// fake.so makes the sysfs tree and sets SYSFS_PATH and
			// MLX5_LOCAL_CPUS itself, as for the C driver; FAKE_QUIET
			// keeps its command trace off ibv_devinfo's output.
			cmd.Env = append(os.Environ(), "FAKE_DEVICE="+dev, "LD_PRELOAD="+filepath.Join(cdir, "fake.so"), "FAKE_QUIET=1")
			var stderr strings.Builder
			cmd.Stderr = &stderr
			cout, err := cmd.Output()
			if err != nil {
				t.Fatalf("ibv_devinfo %s: %v\n%s%s", strings.Join(args, " "), err, cout, stderr.String())
			}
			gout, err := runDevinfo(t, dev, args...)
			if err != nil {
				t.Fatalf("goverbs devinfo %s: %v\n%s", strings.Join(args, " "), err, gout)
			}
			if !strings.Contains(string(cout), d.Name) {
				t.Fatalf("ibv_devinfo %s did not list %s:\n%s%s", strings.Join(args, " "), d.Name, cout, stderr.String())
			}
			compare(t, string(cout), gout)
		})
	}
}

// TestGoDevinfo runs goverbs devinfo -v against the Go fake kernel alone,
// as make unit does without the C side: it must find the device through
// the fake's sysfs tree, open it, and print the board id and the GIDs of
// testdata/device.txt.
func TestGoDevinfo(t *testing.T) {
	out, err := runDevinfo(t, "testdata/device.txt", "-v")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	d, err := loadDevice("testdata/device.txt")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"hca_id:\t" + d.Name + "\n", "\tboard_id:\t\t\t" + d.BoardID + "\n"}
	for i, g := range d.GIDs {
		if g != ([16]byte{}) {
			want = append(want, fmt.Sprintf("\t\t\tGID[%3d]:\t\t%s\n", i, sysfsGID(g)))
		}
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("no line %q in:\n%s", w, out)
		}
	}
}

// runDevinfo runs goverbs devinfo with args against the Go fake kernel of
// the device described in dev, with its sysfs tree in a temporary
// directory, and returns its standard output.
func runDevinfo(t *testing.T, dev string, args ...string) (string, error) {
	d, err := loadDevice(dev)
	if err != nil {
		return "", err
	}
	var trace strings.Builder
	k := newFakeKernel(d, &trace)
	if err := k.makeSysfs(t.TempDir()); err != nil {
		return "", err
	}
	restore := uverbshook.Install(k)
	defer restore()
	defer k.close()
	var stdout, stderr bytes.Buffer
	if rc := devinfo.Main(args, &stdout, &stderr); rc != 0 {
		return stdout.String(), fmt.Errorf("exit status %d: %s", rc, stderr.String())
	}
	return stdout.String(), nil
}

// sysfsGID formats a GID as sysfs and ibv_devinfo (for IB and RoCE v1)
// do: eight groups of four hex digits.
func sysfsGID(g [16]byte) string {
	var b strings.Builder
	for i := 0; i < 16; i += 2 {
		if i > 0 {
			b.WriteByte(':')
		}
		fmt.Fprintf(&b, "%02x%02x", g[i], g[i+1])
	}
	return b.String()
}
