package common

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

// glibc's rand() after srand(seed), as printed by a C program.
func TestRPMAExampleGlibcRand(t *testing.T) {
	for seed, want := range map[uint32][]int32{
		0:          {1804289383, 846930886, 1681692777}, // srand(0) is srand(1)
		1:          {1804289383, 846930886, 1681692777, 1714636915, 1957747793},
		2:          {1505335290, 1738766719, 190686788},
		3:          {1205554746, 483147985, 844158168, 953350440, 612121425},
		4000000000: {1111130805}, // a seed that is negative as an int32_t
	} {
		r := GlibcRand(seed)
		for i, w := range want {
			if got := r(); got != w {
				t.Errorf("seed %d: rand #%d = %d, want %d", seed, i+1, got, w)
			}
		}
	}
}

// The GPSPM messages as protobuf-c packs them.
func TestRPMAExampleGPSPM(t *testing.T) {
	req := GPSPMFlushRequest{Offset: 0, Length: 0x400, OpContext: 0xF01D}
	want := []byte{0x09, 0, 0, 0, 0, 0, 0, 0, 0,
		0x11, 0x00, 0x04, 0, 0, 0, 0, 0, 0,
		0x19, 0x1d, 0xf0, 0, 0, 0, 0, 0, 0}
	if got := req.Marshal(); !bytes.Equal(got, want) {
		t.Errorf("request = % x\nwant      % x", got, want)
	}
	if got, err := UnmarshalGPSPMFlushRequest(want); err != nil || got != req {
		t.Errorf("unmarshal request = %+v, %v", got, err)
	}
	resp := GPSPMFlushResponse{OpContext: 0xF01D}
	if got := resp.Marshal(); !bytes.Equal(got, []byte{0x09, 0x1d, 0xf0, 0, 0, 0, 0, 0, 0}) {
		t.Errorf("response = % x", got)
	}
	// Unknown fields of every wire type are skipped; the last value wins.
	in := append([]byte{0x20, 0x96, 0x01, 0x2a, 2, 'h', 'i', 0x35, 1, 2, 3, 4, 0x39, 1, 0, 0, 0, 0, 0, 0, 0}, resp.Marshal()...)
	if got, err := UnmarshalGPSPMFlushResponse(in); err != nil || got != resp {
		t.Errorf("unmarshal with unknown fields = %+v, %v", got, err)
	}
	for _, bad := range [][]byte{
		{},                             // op_context is required
		{0x09, 1, 2, 3},                // cut short
		{0x08, 0x01},                   // field 1 as a varint
		{0x2a, 5, 'h'},                 // length beyond the end
		{0x80},                         // key cut short
		append([]byte{0x0f}, 0, 0, 0),  // wire type 7
		{0x09, 0, 0, 0, 0, 0, 0, 0, 0}, // a request without length and op_context
	} {
		if _, err := UnmarshalGPSPMFlushRequest(bad); err == nil {
			t.Errorf("unmarshal request % x succeeded", bad)
		}
	}
	if _, err := UnmarshalGPSPMFlushResponse([]byte{0x08, 0x01}); err == nil {
		t.Error("a varint op_context was accepted")
	}
}

func TestRPMAExampleFormats(t *testing.T) {
	d := CommonData{DataOffset: 0x0102, MRDescSize: 21, PCfgDescSize: 1}
	copy(d.Descriptors[:], bytes.Repeat([]byte{0xAA}, 21))
	d.Descriptors[21] = 1
	b := d.Bytes()
	if len(b) != 28 || binary.NativeEndian.Uint16(b) != 0x0102 || b[2] != 21 || b[3] != 1 || b[25] != 1 {
		t.Errorf("common_data = % x", b)
	}
	// What the peer gets: padded by the kernel.
	got, ok := CommonDataOf(append(b, make([]byte, 196-28)...))
	if !ok || got != d || len(got.MRDesc()) != 21 || !bytes.Equal(got.PCfgDesc(), []byte{1}) {
		t.Errorf("common_data back = %+v, %v", got, ok)
	}
	if _, ok := CommonDataOf(b[:27]); ok {
		t.Error("27 bytes of private data taken for common_data")
	}
	big := CommonData{MRDescSize: 30, PCfgDescSize: 9}
	if len(big.MRDesc()) != 24 || len(big.PCfgDesc()) != 0 {
		t.Error("descriptor sizes beyond the array are not cut")
	}

	h := make([]byte, HelloTSize)
	WriteHello(h, 0)
	if binary.NativeEndian.Uint32(h) != 0 || HelloText(h) != "Hello world!" {
		t.Errorf("hello = % x", h[:20])
	}
	var out bytes.Buffer
	e := &Env{Stdout: &out}
	e.Translate(h)
	e.Translate(h)
	e.Translate(h)
	if binary.NativeEndian.Uint32(h) != 1 || HelloText(h) != "¡Hola Mundo!" || out.String() != strings.Repeat("translating...\n", 3) {
		t.Errorf("translated hello = % x, %q", h[:20], out.String())
	}

	for s, want := range map[string]uint64{"42": 42, " +7x": 7, "abc": 0, "-1": ^uint64(0), "18446744073709551615": ^uint64(0)} {
		if got, ok := Strtoul(s); !ok || got != want {
			t.Errorf("strtoul(%q) = %d, %v; want %d", s, got, ok, want)
		}
	}
	if _, ok := Strtoul("18446744073709551616"); ok {
		t.Error("strtoul overflow not detected")
	}
	if Atoi("4") != 4 || Atoi("x") != 0 {
		t.Error("atoi")
	}
}
