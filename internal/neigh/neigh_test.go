package neigh

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/rdmanl"
)

func TestFromGID(t *testing.T) {
	for _, tc := range []struct {
		gid string
		mac string
		ok  bool
		why string
	}{
		{"fe80::5054:ff:feaa:bb01", "52:54:00:aa:bb:01", true, "EUI-64 link-local: U/L bit flipped back"},
		{"fe80::250:56ff:fe01:203", "00:50:56:01:02:03", true, "a universal MAC: the identifier has the bit set"},
		{"ff0e::1:ff01:203", "33:33:ff:01:02:03", true, "IPv6 multicast: the low 32 bits"},
		{"::ffff:224.1.2.3", "01:00:5e:01:02:03", true, "IPv4-mapped multicast"},
		{"::ffff:239.129.2.3", "01:00:5e:01:02:03", true, "only the group's low 23 bits"},
		{"::ffff:169.254.77.10", "", false, "IPv4-mapped unicast needs the tables"},
		{"2001:db8::1", "", false, "global IPv6 needs the tables"},
		{"fe80:0:0:1::1", "", false, "not fe80::/64"},
	} {
		m, ok := FromGID(netip.MustParseAddr(tc.gid).As16())
		if ok != tc.ok || (ok && m.String() != tc.mac) {
			t.Errorf("%s (%s): %v %v, want %s %v", tc.gid, tc.why, m, ok, tc.mac, tc.ok)
		}
	}
}

// msg builds a route netlink body: the family header hdr, then attributes.
func msg(hdr []byte, attrs ...func(*rdmanl.Encoder)) []byte {
	var e rdmanl.Encoder
	for _, a := range attrs {
		a(&e)
	}
	return append(hdr, e.Bytes()...)
}

func TestParse(t *testing.T) {
	rt := make([]byte, unix.SizeofRtMsg)
	rt[0], rt[7] = unix.AF_INET, unix.RTN_UNICAST
	r, err := parseRoute(msg(rt, func(e *rdmanl.Encoder) { e.U32(unix.RTA_OIF, 3) },
		func(e *rdmanl.Encoder) { e.Raw(unix.RTA_GATEWAY, []byte{10, 0, 0, 1}) }))
	if err != nil || r.local || r.oif != 3 || r.gateway != netip.MustParseAddr("10.0.0.1") {
		t.Errorf("unicast route via a gateway: %+v %v", r, err)
	}
	rt[7] = unix.RTN_LOCAL
	if r, err := parseRoute(msg(rt, func(e *rdmanl.Encoder) { e.U32(unix.RTA_OIF, 1) })); err != nil || !r.local || r.gateway.IsValid() {
		t.Errorf("local route: %+v %v", r, err)
	}
	// A gateway of the other family (RTA_VIA's business) is not taken.
	if r, err := parseRoute(msg(rt, func(e *rdmanl.Encoder) { e.Raw(unix.RTA_GATEWAY, make([]byte, 16)) })); err != nil || r.gateway.IsValid() {
		t.Errorf("IPv6 gateway on an IPv4 route: %+v %v", r, err)
	}

	nd := make([]byte, unix.SizeofNdMsg)
	binary.NativeEndian.PutUint32(nd[4:], 7)
	binary.NativeEndian.PutUint16(nd[8:], unix.NUD_STALE)
	dst := func(e *rdmanl.Encoder) { e.Raw(unix.NDA_DST, []byte{169, 254, 77, 2}) }
	ll := func(e *rdmanl.Encoder) { e.Raw(unix.NDA_LLADDR, []byte{2, 0, 0, 0, 0, 9}) }
	n, err := parseNeigh(msg(nd, dst, ll))
	if err != nil || !n.valid || n.ifindex != 7 || n.dst != netip.MustParseAddr("169.254.77.2") || n.mac != (MAC{2, 0, 0, 0, 0, 9}) {
		t.Errorf("stale entry: %+v %v", n, err)
	}
	binary.NativeEndian.PutUint16(nd[8:], unix.NUD_INCOMPLETE)
	if n, err := parseNeigh(msg(nd, dst)); err != nil || n.valid {
		t.Errorf("incomplete entry: %+v %v", n, err)
	}
	binary.NativeEndian.PutUint16(nd[8:], unix.NUD_FAILED)
	if n, err := parseNeigh(msg(nd, dst, ll)); err != nil || n.valid {
		t.Errorf("failed entry: %+v %v", n, err)
	}

	ifi := make([]byte, unix.SizeofIfInfomsg)
	if m, err := parseLink(msg(ifi, func(e *rdmanl.Encoder) { e.Raw(unix.IFLA_ADDRESS, []byte{1, 2, 3, 4, 5, 6}) })); err != nil || m != (MAC{1, 2, 3, 4, 5, 6}) {
		t.Errorf("link: %v %v", m, err)
	}
	if _, err := parseLink(msg(ifi, func(e *rdmanl.Encoder) { e.Raw(unix.IFLA_ADDRESS, make([]byte, 20)) })); err == nil {
		t.Error("an InfiniBand link address was taken for Ethernet")
	}
	for _, short := range [][]byte{nil, rt[:5], nd[:3], ifi[:15]} {
		if _, err := parseRoute(short); err == nil && len(short) < unix.SizeofRtMsg {
			t.Errorf("route of %d bytes parsed", len(short))
		}
		if _, err := parseNeigh(short); err == nil && len(short) < unix.SizeofNdMsg {
			t.Errorf("neighbour of %d bytes parsed", len(short))
		}
		if _, err := parseLink(short); err == nil {
			t.Errorf("link of %d bytes parsed", len(short))
		}
	}
}

// FuzzParse feeds the decoders the kernel's answers, made hostile: an
// error is fine, a panic is not.
func FuzzParse(f *testing.F) {
	rt := make([]byte, unix.SizeofRtMsg)
	f.Add(msg(rt, func(e *rdmanl.Encoder) { e.U32(unix.RTA_OIF, 3) }))
	nd := make([]byte, unix.SizeofNdMsg)
	f.Add(msg(nd, func(e *rdmanl.Encoder) { e.Raw(unix.NDA_DST, []byte{1, 2, 3, 4}) }))
	f.Add([]byte{0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		parseRoute(b)
		parseNeigh(b)
		parseLink(b)
	})
}
