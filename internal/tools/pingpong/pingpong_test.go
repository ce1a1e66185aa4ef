package pingpong

import (
	"math"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/verbs"
)

func TestPingpongWireFormat(t *testing.T) {
	d := ppDest{LID: 0x12, QPN: 0x11, PSN: 0xabcdef,
		GID: verbs.GID{10: 0xff, 11: 0xff, 12: 169, 13: 254, 14: 77, 15: 1}}
	msg := d.wire()
	want := "0012:000011:abcdef:00000000000000000000ffffa9fe4d01\x00"
	if string(msg) != want || len(msg) != 52 {
		t.Fatalf("wire = %q (%d bytes), want %q (52)", msg, len(msg), want)
	}
	got, err := parseDest(msg)
	if err != nil || got != d {
		t.Fatalf("parseDest(wire) = %+v, %v; want %+v", got, err, d)
	}
	// What the C tools write: garbage after the NUL is ignored.
	c := []byte("0000:0000a3:7e1c2d:fe800000000000000000000000000001\x00xyz")
	got, err = parseDest(c)
	if err != nil || got.QPN != 0xa3 || got.PSN != 0x7e1c2d || got.GID[0] != 0xfe || got.GID[15] != 1 {
		t.Fatalf("parseDest(C message) = %+v, %v", got, err)
	}
	for _, bad := range []string{"", "0000:000011:abcdef", "zz:1:2:00000000000000000000ffffa9fe4d01", "0:1:2:00ff"} {
		if _, err := parseDest([]byte(bad)); err == nil {
			t.Errorf("parseDest(%q) succeeded", bad)
		}
	}
}

func TestPingpongArgs(t *testing.T) {
	o, _, err := parsePingpongArgs([]string{"169.254.77.1", "-t", "srq", "-ecg1", "--size=0x10", "--rx", "600", "-q", "010", "-n", "7", "--mtu", "2048"})
	if err != nil {
		t.Fatal(err)
	}
	want := ppOptions{typ: ppSRQ, port: 18515, ibPort: 1, size: 16, mtu: verbs.MTU2048, numQP: 8, rxDepth: 600,
		iters: 7, gidIndex: 1, events: true, validate: true, server: "169.254.77.1"}
	if *o != want {
		t.Errorf("got %+v\nwant %+v", *o, want)
	}
	o, _, err = parsePingpongArgs([]string{"-t", "ud"})
	if err != nil || o.size != 1024 || o.typ != ppUD || o.server != "" {
		t.Errorf("ud defaults: %+v %v", o, err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-t", "xrc"}, "unknown transport type"},
		{[]string{"-m", "1000"}, "MTU must be"},
		{[]string{"-t", "ud", "-m", "1024"}, "ibv_ud_pingpong has no such option"},
		{[]string{"-t", "uc", "-q", "2"}, "ibv_uc_pingpong has no such option"},
		{[]string{"-o"}, "-o is not supported"},
		{[]string{"-t", "srq", "--odp"}, "--odp is not supported"},
		{[]string{"--ts"}, "--ts is not supported"},
		{[]string{"-O"}, "-O is not supported"},
		{[]string{"-P"}, "-P is not supported"},
		{[]string{"-j"}, "-j is not supported"},
		{[]string{"-N"}, "-N is not supported"},
		{[]string{"-x"}, "invalid option"},
		{[]string{"-s"}, "requires an argument"},
		{[]string{"--events=1"}, "doesn't allow an argument"},
		{[]string{"--i", "1"}, "ambiguous"},
		{[]string{"-s", "12abc"}, "invalid number"},
		{[]string{"-n", "-1"}, "invalid iteration count"},
		{[]string{"-p", "65536"}, "port must be"},
		{[]string{"-i", "0"}, "IB port must be"},
		{[]string{"-t", "srq", "-s", "0"}, "size must be"},
		{[]string{"a", "b"}, "unexpected argument"},
	} {
		if _, _, err := parsePingpongArgs(c.args); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.args, err, c.want)
		}
	}
}

func TestPingpongCFormat(t *testing.T) {
	for v, want := range map[float64]string{1.005: "1.00", 2.5: "2.50", math.Inf(1): "inf", math.NaN(): "nan", math.Copysign(math.NaN(), -1): "-nan"} {
		if got := cfmt2(v); got != want {
			t.Errorf("cfmt2(%v) = %q, want %q", v, got, want)
		}
	}
}
