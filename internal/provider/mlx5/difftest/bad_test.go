package difftest

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/provider/mlx5"
	"github.com/goverbs/goverbs/internal/uverbshook"
	"github.com/goverbs/goverbs/verbs"
)

// A kernel whose answers the provider cannot use (the fake device with
// one value changed) makes the command fail with an error that says why;
// nothing panics and nothing is left open.
func TestBadAnswers(t *testing.T) {
	orig, err := os.ReadFile("testdata/device.txt")
	if err != nil {
		t.Fatal(err)
	}
	scenario := filepath.Join(t.TempDir(), "s.scn")
	if err := os.WriteFile(scenario, []byte("open\npd pd0\ncq cq0 16\nqp qp0 pd0 cq0 cq0 rc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key, value string
		want       string // a regular expression the trace must match
	}{
		{"tot_bfregs", "0", `error line 1: open: .*no static BlueFlame registers`},
		{"tot_bfregs", "1", `error line 1: open: .*bfregs`},
		{"cache_line_size", "48", `error line 1: open: .*cannot be used`},
		{"cache_line_size", "0", `error line 1: open: .*cannot be used`},
		{"bf_reg_size", "0", `error line 1: open: .*cannot be used`},
		{"bf_reg_size", "8192", `error line 1: open: .*cannot be used`},
		{"num_uars_per_page", "0", `error line 1: open: .*cannot be used`},
		{"num_uars_per_page", "4", `error line 1: open: .*UARs in a page`},
		{"cqe_version", "3", `error line 1: open: .*CQE version 3`},
		{"first_bfreg", "1000", `qp = qp: .*bfreg index 1000`},
		{"max_sq_desc_sz", "64", `qp = qp: create .*unsupported queue size`},
		{"max_recv_wr", "4", `qp = qp: create .*unsupported queue size`},
	} {
		t.Run(tc.key+"="+tc.value, func(t *testing.T) {
			re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(tc.key) + `\s+\S+`)
			if !re.Match(orig) {
				t.Fatalf("no key %s in device.txt", tc.key)
			}
			dev := filepath.Join(t.TempDir(), "device.txt")
			if err := os.WriteFile(dev, re.ReplaceAll(orig, []byte(tc.key+" "+tc.value)), 0o644); err != nil {
				t.Fatal(err)
			}
			out, _, err := runGo(dev, scenario)
			if err != nil {
				t.Fatal(err)
			}
			if !regexp.MustCompile(tc.want).MatchString(out) {
				t.Errorf("trace does not match %q:\n%s", tc.want, out)
			}
			if strings.Contains(out, "panic") {
				t.Errorf("trace:\n%s", out)
			}
		})
	}
}

// Address handles on a RoCE port that the provider or the kernel refuses
// fail with an error that says why (in the error chain: unix.EINVAL
// without a GRH, before any command; the kernel's unix.ENODATA for an
// unused source GID; mlx5.ErrNotYet when the kernel does not answer
// CREATE_AH with the MAC), and one that works has a kernel handle.
func TestRoCEAHErrors(t *testing.T) {
	dev, err := loadDevice("testdata/device.txt")
	if err != nil {
		t.Fatal(err)
	}
	dgid := verbs.GID{0xfe, 0x80, 8: 0x0e, 9: 0x42, 10: 0xa1, 11: 0xff, 12: 0xfe, 13: 0xa1, 14: 0xb2, 15: 0xc4}
	for _, tc := range []struct {
		name string
		supp uint32 // cmds_supp_uhw
		attr verbs.AHAttr
		want error // nil: the AH is made
	}{
		{"no GRH", 3, verbs.AHAttr{Port: 1, DLID: 5}, unix.EINVAL},
		{"unused source GID", 3, verbs.AHAttr{Port: 1, IsGlobal: true, GRH: verbs.GlobalRoute{DGID: dgid, SGIDIndex: 9}}, unix.ENODATA},
		{"no MAC from the kernel", 1, verbs.AHAttr{Port: 1, IsGlobal: true, GRH: verbs.GlobalRoute{DGID: dgid, SGIDIndex: 1}}, mlx5.ErrNotYet},
		{"good", 3, verbs.AHAttr{Port: 1, IsGlobal: true, GRH: verbs.GlobalRoute{DGID: dgid, SGIDIndex: 1, FlowLabel: 1}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := *dev
			d.CmdsSuppUHW = tc.supp
			var out strings.Builder
			k := newFakeKernel(&d, &out)
			k.roce = true
			restore := uverbshook.Install(k)
			defer restore()
			defer k.close()
			ctx, err := verbs.OpenDevice(verbs.Device{Name: d.Name, Driver: verbs.DriverMLX5, Path: "/dev/infiniband/uverbs0", Ports: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer ctx.Close()
			pd, err := ctx.AllocPD()
			if err != nil {
				t.Fatal(err)
			}
			defer pd.Close()
			ah, err := pd.CreateAH(&tc.attr)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if ah.Handle() == 0 {
					t.Errorf("a RoCE AH without a kernel handle")
				}
				if err := ah.Close(); err != nil {
					t.Error(err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("CreateAH = %v, want %v in the chain", err, tc.want)
			}
			if tc.want == unix.EINVAL && strings.Contains(out.String(), "CREATE_AH") {
				t.Errorf("a command for an AH refused before it:\n%s", out.String())
			}
		})
	}
}
