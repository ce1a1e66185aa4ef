package rsocket

import (
	"bytes"
	"errors"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/verbs"
)

// A default x86 peer's private data, laid out as rs_format_conn_data
// fills it (rsocket-44.md §1.2): version 1, flags 0x02 (iomap, little
// endian), 384 credits, target SGL and data buffer big-endian with the
// key before the length.
func TestConnDataLayout(t *testing.T) {
	d := connData{
		Version: 1, Flags: connFlagIOMap, Credits: 384, IOMapSize: scaleIOMap(1000),
		TargetSGL: sge{Addr: 0x0000_7f00_1234_5000, Key: 0x1122, Length: 2},
		DataBuf:   sge{Addr: 0x0000_7f00_8000_0000, Key: 0x3344, Length: 64 << 10},
	}
	got := d.marshal()
	want := []byte{
		0x01, 0x02, 0x01, 0x80, 0, 0, 0, 0x83,
		0x00, 0x00, 0x7f, 0x00, 0x12, 0x34, 0x50, 0x00, // target_sgl.addr
		0x00, 0x00, 0x11, 0x22, // key
		0x00, 0x00, 0x00, 0x02, // length: entries
		0x00, 0x00, 0x7f, 0x00, 0x80, 0x00, 0x00, 0x00, // data_buf.addr
		0x00, 0x00, 0x33, 0x44, // key
		0x00, 0x01, 0x00, 0x00, // length: half the buffer
	}
	if !bytes.Equal(got[:], want) {
		t.Fatalf("marshal:\n got % x\nwant % x", got, want)
	}
	// The kernel pads private data to the CM message: parse ignores the
	// rest.
	back, err := parseConnData(append(want, make([]byte, 16)...))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(d, back, cmp.AllowUnexported(connData{}, sge{})); diff != "" {
		t.Fatalf("round trip (-want +got):\n%s", diff)
	}
	if back.order() != littleEndian {
		t.Errorf("flags 0x02: order %v, want little endian", back.order())
	}
}

func TestConnDataRejects(t *testing.T) {
	good := (&connData{Version: 1, TargetSGL: sge{Length: 2}}).marshal()
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"short", good[:39]},
		{"empty", nil},
		{"version 0", func() []byte { b := good; b[0] = 0; return b[:] }()},
		{"version 2", func() []byte { b := good; b[0] = 2; return b[:] }()},
		{"no SGL entries", func() []byte { b := good; b[23] = 0; return b[:] }()},
	} {
		if _, err := parseConnData(tc.b); !errors.Is(err, ErrProtocol) {
			t.Errorf("%s: err %v, want ErrProtocol", tc.name, err)
		}
	}
}

// The iomap size's one-byte scale (rs_value_to_scale/rs_scale_to_value
// with 8 bits).
func TestIOMapScale(t *testing.T) {
	for _, tc := range []struct{ v, b, back int }{
		{0, 0, 0}, {1, 1, 1}, {128, 128, 128},
		{129, 0x80, 128}, {255, 0x80, 128}, // C's quirk: 0x80 decodes as 128
		{256, 0x81, 256}, {1000, 0x83, 768}, {0x7f << 8, 0xff, 0x7f << 8},
	} {
		if b := scaleIOMap(tc.v); int(b) != tc.b {
			t.Errorf("scale(%d) = %#x, want %#x", tc.v, b, tc.b)
		}
		if back := unscaleIOMap(uint8(tc.b)); back != tc.back {
			t.Errorf("unscale(%#x) = %d, want %d", tc.b, back, tc.back)
		}
	}
	if got := roundIOMap(1 << 20); got != MaxIOMapSize {
		t.Errorf("roundIOMap(1M) = %d, want %d", got, MaxIOMapSize)
	}
}

func TestImmediate(t *testing.T) {
	for _, tc := range []struct {
		op, data, imm uint32
	}{
		{opData, 65536, 0x0001_0000},
		{opSGL, 0x17f + 384, 0x8000_02ff},
		{opIOMapSGL, 3, 0xC000_0003},
		{opCtrl, ctrlDisconnect, 0xE000_0000},
		{opCtrl, ctrlShutdown, 0xE000_0002},
	} {
		if got := msg(tc.op, tc.data); got != tc.imm {
			t.Errorf("msg(%d, %d) = %#x, want %#x", tc.op, tc.data, got, tc.imm)
		}
		if msgOp(tc.imm) != tc.op || msgData(tc.imm) != tc.data {
			t.Errorf("split %#x = %d, %d", tc.imm, msgOp(tc.imm), msgData(tc.imm))
		}
	}
}

func TestSGEByteOrder(t *testing.T) {
	e := sge{Addr: 0x0102030405060708, Key: 0x11121314, Length: 0x21222324}
	var le, be [sgeSize]byte
	e.put(le[:], littleEndian)
	e.put(be[:], bigEndian)
	if want := []byte{8, 7, 6, 5, 4, 3, 2, 1, 0x14, 0x13, 0x12, 0x11, 0x24, 0x23, 0x22, 0x21}; !bytes.Equal(le[:], want) {
		t.Errorf("little endian % x", le)
	}
	if want := []byte{1, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x12, 0x13, 0x14, 0x21, 0x22, 0x23, 0x24}; !bytes.Equal(be[:], want) {
		t.Errorf("big endian % x", be)
	}
	if getSGE(le[:], littleEndian) != e || getSGE(be[:], bigEndian) != e {
		t.Error("round trip")
	}
}

// A completion error's errno: what the peer's death looks like on each
// transport (siw completes the request it was transmitting with
// LOC_QP_OP_ERR and flushes the rest; on RoCE the peer's side refuses).
func TestCompletionErrorErrno(t *testing.T) {
	for _, tc := range []struct {
		st    verbs.WCStatus
		iwarp bool
		want  error
	}{
		{verbs.WCWRFlushErr, true, syscall.ECONNRESET},
		{verbs.WCLocQPOpErr, true, syscall.ECONNRESET},
		{verbs.WCWRFlushErr, false, syscall.EIO},
		{verbs.WCLocQPOpErr, false, syscall.EIO},
		{verbs.WCRemAccessErr, false, syscall.ECONNRESET},
		{verbs.WCRetryExcErr, false, syscall.ETIMEDOUT},
		{verbs.WCLocProtErr, true, syscall.EIO},
	} {
		err := &CompletionError{Msg: "data", Status: tc.st, iwarp: tc.iwarp}
		if !errors.Is(err, tc.want) {
			t.Errorf("%v (iWARP %v): %v, want %v", tc.st, tc.iwarp, errors.Unwrap(err), tc.want)
		}
	}
}
