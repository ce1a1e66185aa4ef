package perf

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPerfArgs(t *testing.T) {
	o, _, _, err := parsePerfArgs([]string{"write-bw", "169.254.77.1", "-n", "50", "-s0x1000", "--gid-index=1", "-NF", "-Q", "4", "-t", "16"})
	if err != nil {
		t.Fatal(err)
	}
	want := perfOptions{test: Tests[0], port: 18515, ibPort: 1, size: 4096, iters: 50, txDepth: 16, rxDepth: 512,
		cqMod: 4, cqModSet: true, gidIndex: 1, qpTimeout: 14, noPeak: true, server: "169.254.77.1"}
	if diff := cmp.Diff(want, *o, cmp.AllowUnexported(perfOptions{}, Test{})); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	// The defaults of each tool (perftest's init_perftest_params and
	// force_dependecies).
	for _, c := range []struct {
		args                  []string
		size                  uint64
		iters, txDepth, cqMod int
	}{
		{[]string{"write-bw"}, 65536, 5000, 128, 1},
		{[]string{"ib_write_bw", "-s", "64"}, 64, 5000, 128, 100},
		{[]string{"write-lat"}, 2, 1000, 1, 1},
		{[]string{"read-bw", "-s", "8192"}, 8192, 1000, 128, 100},
		{[]string{"read-lat"}, 2, 1000, 1, 1},
		{[]string{"atomic-lat", "-A", "CMP_AND_SWAP"}, 8, 1000, 1, 1},
		{[]string{"atomic-bw"}, 8, 1000, 128, 100},
		{[]string{"ib_atomic_bw", "-A", "CMP_AND_SWAP", "-n", "50", "-t", "16", "-o", "4"}, 8, 50, 16, 16},
		{[]string{"write-bw", "-n", "5"}, 65536, 5, 5, 1},
		{[]string{"write-bw", "-a", "-n", "10"}, perfMaxSize, 10, 10, 10},
	} {
		o, _, _, err := parsePerfArgs(c.args)
		if err != nil {
			t.Errorf("%q: %v", c.args, err)
			continue
		}
		if o.size != c.size || o.iters != c.iters || o.txDepth != c.txDepth || o.cqMod != c.cqMod {
			t.Errorf("%q: size %d iters %d tx %d cq_mod %d; want %d %d %d %d", c.args, o.size, o.iters, o.txDepth, o.cqMod,
				c.size, c.iters, c.txDepth, c.cqMod)
		}
	}
	if o, _, _, _ := parsePerfArgs([]string{"write-bw", "-n", "20001"}); o == nil || !o.noPeak {
		t.Error("-n 20001: the peak is not turned off")
	}
	if o, _, _, err := parsePerfArgs([]string{"atomic-bw", "--atomic_type=CMP_AND_SWAP", "-o", "4"}); err != nil || !o.cmpSwap || o.outReads != 4 || o.test.Tool != "ib_atomic_bw" {
		t.Errorf("atomic-bw -A CMP_AND_SWAP -o 4: %+v, %v", o, err)
	}
	for _, args := range [][]string{{"send-bw", "-R"}, {"read-lat", "--rdma_cm"}, {"atomic-bw", "-R"}} {
		if o, _, _, err := parsePerfArgs(args); err != nil || !o.rdmaCM {
			t.Errorf("%q: rdma_cm not set (%v)", args, err)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "missing test"},
		{[]string{"atomic_bw"}, "unknown test"},
		{[]string{"ib_atomic_bw2"}, "unknown test"},
		{[]string{"write-bw", "-b"}, "'-b' is not supported"},
		{[]string{"write-bw", "-z"}, "'-z' is not supported"},
		{[]string{"write-bw", "--duration=5"}, "'--duration' is not supported"},
		{[]string{"write-bw", "--perform_warm_up"}, "not supported"},
		{[]string{"write-bw", "-q", "2"}, "one QP"},
		{[]string{"write-bw", "-o", "2"}, "ib_write_bw has no such option"},
		{[]string{"write-lat", "-r", "2"}, "ib_write_lat has no such option"},
		{[]string{"write-lat", "-A", "CMP_AND_SWAP"}, "ib_write_lat has no such option"},
		{[]string{"atomic-lat", "-A", "SWAP"}, "want CMP_AND_SWAP or FETCH_AND_ADD"},
		{[]string{"atomic-lat", "-s", "16"}, "cannot be changed for atomic"},
		{[]string{"atomic-lat", "-a"}, "cannot be changed for atomic"},
		{[]string{"atomic-bw", "-s", "16"}, "cannot be changed for atomic"},
		{[]string{"atomic-bw", "-a"}, "cannot be changed for atomic"},
		{[]string{"atomic-bw", "-A", "fetch_and_add"}, "want CMP_AND_SWAP or FETCH_AND_ADD"},
		{[]string{"atomic-bw", "-r", "8"}, "ib_atomic_bw has no such option"},
		{[]string{"atomic-bw", "-b"}, "'-b' is not supported"},
		{[]string{"atomic-bw", "-o", "0"}, "outstanding reads must be"},
		{[]string{"write-bw", "-n", "4"}, "iterations must be"},
		{[]string{"write-bw", "-s", "0"}, "size must be"},
		{[]string{"write-bw", "-m", "1000"}, "MTU must be"},
		{[]string{"write-bw", "-s"}, "requires an argument"},
		{[]string{"write-bw", "--noPeak=1"}, "doesn't allow an argument"},
		{[]string{"write-bw", "-n", "1x"}, "invalid number"},
		{[]string{"write-bw", "a", "b"}, "unexpected argument"},
	} {
		_, _, _, err := parsePerfArgs(c.args)
		var ue errPerfUsage
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, &ue) {
			t.Errorf("%q: error %v, want a usage error with %q", c.args, err, c.want)
		}
	}
}

// Refused options exit 2 and say why, before touching any device.
func TestPerfRefusesExit2(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if got := Main([]string{"write-bw", "--bidirectional"}, &stdout, &stderr); got != 2 {
		t.Errorf("exit status %d, want 2", got)
	}
	if !strings.Contains(stderr.String(), "'--bidirectional' is not supported by goverbs perf") {
		t.Errorf("stderr %q", stderr.String())
	}
	stdout.Reset()
	if got := Main([]string{"write-bw", "-V"}, &stdout, &stderr); got != 0 || stdout.String() != "Version: 6.06\n" {
		t.Errorf("-V: %d %q", got, stdout.String())
	}
}

func TestPerfCAltHex(t *testing.T) {
	for _, c := range []struct {
		v     uint64
		width int
		want  string
	}{{0, 4, "0000"}, {0x11, 6, "0x0011"}, {0xabcdef, 6, "0xabcdef"}, {0x1234567, 6, "0x1234567"}, {0x7f00, 16, "0x00000000007f00"}} {
		if got := cAltHex(c.v, c.width); got != c.want {
			t.Errorf("cAltHex(%#x, %d) = %q, want %q", c.v, c.width, got, c.want)
		}
	}
}
