package cmcommon

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCMGetopt(t *testing.T) {
	opts, operands := Getopt([]string{"-vV", "-C3", "x", "-S", "100", "-a", "-b", "-z", "--", "-s"}, "a:C:S:vVs")
	got := ""
	for _, o := range opts {
		if o.Opt == '?' {
			got += fmt.Sprintf("?%c ", o.Bad)
		} else {
			got += fmt.Sprintf("%c=%s ", o.Opt, o.Arg)
		}
	}
	if want := "v= V= C=3 S=100 a=-b ?z "; got != want {
		t.Errorf("options %q, want %q", got, want)
	}
	if !cmp.Equal(operands, []string{"x", "-s"}) {
		t.Errorf("operands %q", operands)
	}
	opts, _ = Getopt([]string{"-vC"}, "C:v")
	if len(opts) != 2 || opts[1].Opt != '?' || !opts[1].Missing || opts[1].Bad != 'C' {
		t.Errorf("missing argument: %+v", opts)
	}
}

func TestCMExit(t *testing.T) {
	for ret, want := range map[int]int{0: 0, -1: 255, 22: 22, 8: 8, -110: 146, 256: 1, -22: 234} {
		if got := Exit(ret); got != want {
			t.Errorf("Exit(%d) = %d, want %d", ret, got, want)
		}
	}
}

// A RoCEv2 GRH over IPv4 holds the IPv4 header in its last 20 bytes; a
// bad header checksum makes it an IPv6 GRH, as in libibverbs.
func TestCMGRHVersion(t *testing.T) {
	grh := make([]byte, GRHSize)
	ip := grh[20:]
	ip[0] = 0x45
	ip[8] = 64
	ip[9] = 17
	copy(ip[12:], []byte{169, 254, 77, 1})
	copy(ip[16:], []byte{169, 254, 77, 1})
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
	if v := GRHVersion(grh); v != 4 {
		t.Errorf("IPv4 header: version %d", v)
	}
	grh[0] = 0x60 // an IPv6 version field in front of it
	if v := GRHVersion(grh); v != 4 {
		t.Errorf("IPv4 header with a 6 in front: version %d", v)
	}
	ip[10]++
	if v := GRHVersion(grh); v != 6 {
		t.Errorf("bad checksum: version %d, want 6", v)
	}
	grh[0] = 0
	ip[0] = 0
	if v := GRHVersion(grh); v != -1 {
		t.Errorf("neither: version %d", v)
	}
}
