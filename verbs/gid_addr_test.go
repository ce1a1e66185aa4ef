package verbs_test

import (
	"encoding/json"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"unsafe"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/verbs"
)

func TestGIDAddr(t *testing.T) {
	for _, tc := range []struct {
		addr string
		gid  verbs.GID
		back string // Addr() of the GID, when it differs from addr
	}{
		{"169.254.77.1", verbs.GID{10: 0xff, 11: 0xff, 12: 169, 13: 254, 14: 77, 15: 1}, ""},
		{"::ffff:10.0.0.1", verbs.GID{10: 0xff, 11: 0xff, 12: 10, 15: 1}, "10.0.0.1"},
		{"fe80::1810:2dff:fe32:3f2d", verbs.GID{0: 0xfe, 1: 0x80, 8: 0x18, 9: 0x10, 10: 0x2d, 11: 0xff, 12: 0xfe, 13: 0x32, 14: 0x3f, 15: 0x2d}, ""},
		{"fe80::1%eth0", verbs.GID{0: 0xfe, 1: 0x80, 15: 1}, "fe80::1"},
	} {
		a := netip.MustParseAddr(tc.addr)
		if got := verbs.GIDFromAddr(a); got != tc.gid {
			t.Errorf("GIDFromAddr(%s) = %v, want %v", tc.addr, got, tc.gid)
		}
		want := tc.back
		if want == "" {
			want = tc.addr
		}
		if got := tc.gid.Addr(); got.String() != want {
			t.Errorf("%v.Addr() = %v, want %s", tc.gid, got, want)
		}
	}
	if verbs.GIDFromAddr(netip.Addr{}) != (verbs.GID{}) {
		t.Error("the zero Addr does not give the zero GID")
	}
}

func TestGIDText(t *testing.T) {
	g := verbs.GIDFromAddr(netip.MustParseAddr("169.254.77.1"))
	b, err := json.Marshal(struct{ GID verbs.GID }{g})
	if err != nil || string(b) != `{"GID":"::ffff:169.254.77.1"}` {
		t.Fatalf("JSON %s %v", b, err)
	}
	for _, text := range []string{"::ffff:169.254.77.1", "169.254.77.1"} {
		var back verbs.GID
		if err := back.UnmarshalText([]byte(text)); err != nil || back != g {
			t.Errorf("UnmarshalText(%q) = %v %v", text, back, err)
		}
	}
	var bad verbs.GID
	for _, text := range []string{"", "rxe0", "fe80::1%eth0"} {
		if err := bad.UnmarshalText([]byte(text)); err == nil {
			t.Errorf("UnmarshalText(%q) accepted", text)
		}
	}
}

// A failed completion's error carries its status, vendor error and work
// request, and errors.Is matches the status; a good one has none.
func TestWorkCompletionErr(t *testing.T) {
	ok := verbs.WorkCompletion{WRID: 1, Status: verbs.WCSuccess}
	if err := ok.Err(); err != nil {
		t.Fatalf("success: %v", err)
	}
	bad := verbs.WorkCompletion{WRID: 0x2a, Status: verbs.WCRetryExcErr, VendorErr: 0x81, QPNum: 17}
	err := bad.Err()
	var we *verbs.WCError
	if !errors.As(err, &we) || *we != (verbs.WCError{Status: verbs.WCRetryExcErr, VendorErr: 0x81, WRID: 0x2a, QPNum: 17}) {
		t.Fatalf("error %#v", err)
	}
	if !errors.Is(err, verbs.WCRetryExcErr) || errors.Is(err, verbs.WCWRFlushErr) {
		t.Error("errors.Is does not match the status alone")
	}
	const want = "verbs: work request 0x2a on QP 17: transport retry counter exceeded (vendor error 0x81)"
	if err.Error() != want {
		t.Errorf("%q, want %q", err, want)
	}
	if testing.AllocsPerRun(100, func() { _ = ok.Err() }) != 0 {
		t.Error("Err of a successful completion allocates")
	}
}

// Immediate data: SendWR.Imm is host order, WorkCompletion.ImmData holds
// the wire's bytes (network order), Imm and HostToImm convert.
func TestImmByteOrder(t *testing.T) {
	const v = 0x01020304
	wc := verbs.WorkCompletion{Flags: verbs.WCWithImm, ImmData: verbs.HostToImm(v)}
	if b := *(*[4]byte)(unsafe.Pointer(&wc.ImmData)); b != [4]byte{1, 2, 3, 4} {
		t.Errorf("HostToImm(%#x) lays out % x, want the wire order 01 02 03 04", v, b[:])
	}
	if wc.Imm() != v {
		t.Errorf("Imm() = %#x, want %#x", wc.Imm(), v)
	}
}

// RoutableGID on the test device is the GID of its IPv4 address, of RoCE
// v2 where the port offers v2 (rxe), else v1 (qemu's pvrdma).
func TestRoutableGID(t *testing.T) {
	dev := testutil.Open(t)
	e, err := dev.RoutableGID(1)
	if dev.Device().NodeType.Transport() == verbs.TransportIWARP {
		// iWARP ports may list no GID at all (no RoCE GID table).
		if err != nil && !errors.Is(err, verbs.ErrNoGID) {
			t.Fatal(err)
		}
		t.Logf("iWARP: %+v %v", e, err)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	table, err := dev.QueryGIDTable()
	if err != nil {
		t.Fatal(err)
	}
	wantType := verbs.GIDTypeRoCEv1
	for _, g := range table {
		if g.Type == verbs.GIDTypeRoCEv2 {
			wantType = verbs.GIDTypeRoCEv2
		}
	}
	if e.Type != wantType || e.GID.Addr().String() != testutil.Addr(t) || e.Port != 1 {
		t.Errorf("routable GID %+v (%v)", e, e.GID.Addr())
	}
	if p := e.PathTo(e.GID); !p.IsGlobal || int(p.GRH.SGIDIndex) != e.Index || p.Port != 1 || p.GRH.DGID != e.GID {
		t.Errorf("PathTo %+v", p)
	}
	if _, err := dev.RoutableGID(2); err == nil || !strings.Contains(err.Error(), "ports 1 to 1") {
		t.Errorf("port 2: %v", err)
	}
}
