package difftest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
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
		{"tot_bfregs", "0", `error line 1: open: .*UARs dynamically`},
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
