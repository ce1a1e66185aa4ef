package rdmanl

import (
	"encoding/binary"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

func TestEncodeParseRoundTrip(t *testing.T) {
	var e Encoder
	e.U32(1, 7)
	e.String(2, "rxe0")
	e.String(69, "uverbs")
	a, err := ParseAttrs(e.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if a.U32(1) != 7 || a.String(2) != "rxe0" || a.String(69) != "uverbs" || a.Has(3) {
		t.Fatalf("round trip: %v", a)
	}
	// NUL terminator and 4-byte padding: "rxe0\0" is 5 bytes + 4 header = 9 → 12.
	if len(e.Bytes()) != 8+12+12 {
		t.Fatalf("encoded length %d", len(e.Bytes()))
	}
}

func TestParseAttrsMalformed(t *testing.T) {
	for _, b := range [][]byte{
		{1},
		{3, 0, 1, 0},       // length < 4
		{9, 0, 1, 0, 1, 2}, // length beyond buffer
		{8, 0, 1, 0, 1, 2, 3, 4, 2},
	} {
		if _, err := ParseAttrs(b); err == nil {
			t.Errorf("ParseAttrs(%v) succeeded", b)
		}
	}
}

func msg(typ uint16, seq uint32, body []byte) []byte {
	b := make([]byte, 16)
	binary.NativeEndian.PutUint32(b, uint32(16+len(body)))
	binary.NativeEndian.PutUint16(b[4:], typ)
	binary.NativeEndian.PutUint32(b[8:], seq)
	return append(b, body...)
}

func TestParseMessages(t *testing.T) {
	var e Encoder
	e.U32(1, 0)
	data := msg(0x1401, 5, e.Bytes())
	stale := msg(0x1401, 4, e.Bytes())
	errMsg := msg(unix.NLMSG_ERROR, 5, binary.NativeEndian.AppendUint32(nil, uint32(0xffffffff-uint32(unix.EPERM)+1)))
	done := msg(unix.NLMSG_DONE, 5, make([]byte, 4))

	p, fin, err := parseMessages(append(append(stale, data...), done...), 5)
	if err != nil || !fin || len(p) != 1 || !cmp.Equal(p[0], e.Bytes()) {
		t.Fatalf("data+done: %v %v %v", p, fin, err)
	}
	if _, _, err := parseMessages(errMsg, 5); err != unix.EPERM {
		t.Fatalf("error message: %v", err)
	}
	failedDump := msg(unix.NLMSG_DONE, 5, binary.NativeEndian.AppendUint32(nil, uint32(0xffffffff-uint32(unix.EINVAL)+1)))
	if _, _, err := parseMessages(failedDump, 5); err != unix.EINVAL {
		t.Fatalf("failed dump: %v", err)
	}
	if _, _, err := parseMessages(data[:10], 5); err == nil {
		t.Fatal("truncated header accepted")
	}
}

func TestDecodeDev(t *testing.T) {
	if maj, min := DecodeDev(0xe7c0); maj != 231 || min != 192 {
		t.Fatalf("DecodeDev(0xe7c0) = %d:%d", maj, min)
	}
}

func FuzzParseAttrs(f *testing.F) {
	var e Encoder
	e.U32(1, 7)
	e.String(2, "rxe0")
	f.Add(e.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := ParseAttrs(b)
		if err != nil {
			return
		}
		for k := range a {
			_ = a.String(k)
			_ = a.U64(k)
		}
	})
}

func FuzzParseMessages(f *testing.F) {
	f.Add(msg(0x1401, 1, []byte{8, 0, 1, 0, 0, 0, 0, 0}))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, _ = parseMessages(b, 1)
	})
}
