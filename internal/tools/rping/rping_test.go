package rping

import (
	"bytes"
	"testing"

	"github.com/goverbs/goverbs/internal/tools/cmcommon"
)

// The options as parsed, and the -d lines that say so.
func TestRpingParseArgs(t *testing.T) {
	var stdout, stderr bytes.Buffer
	o, rc := parseRpingArgs([]string{"-d", "-c", "-a", "169.254.77.1", "-vVC7", "-S100", "-p", "9000", "-I", "169.254.77.2"},
		&cmcommon.Out{W: &stdout}, &cmcommon.Out{W: &stderr})
	if rc != -1 || o.server != 0 || o.addr.String() != "169.254.77.1" || o.src.String() != "169.254.77.2" ||
		o.count != 7 || o.size != 100 || o.port != 9000 || !o.verbose || !o.validate || !o.debug {
		t.Errorf("got %+v, %d", o, rc)
	}
	if want := "client\nverbose\nvalidate data\ncount 7\nsize 100\nport 9000\n"; stdout.String() != want {
		t.Errorf("debug output %q, want %q", stdout.String(), want)
	}
}
