package verbs_test

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/verbs"
)

// ipv4GRH builds a receive buffer's GRH as rxe writes it for RoCE v2 over
// IPv4: 20 zero bytes, then the IPv4 header with a good checksum.
func ipv4GRH(src, dst netip.Addr, tos, ttl uint8, badSum bool) []byte {
	g := make([]byte, verbs.GRHLen)
	h := g[20:]
	h[0] = 0x45
	h[1] = tos
	binary.BigEndian.PutUint16(h[2:], 1000)
	h[8] = ttl
	h[9] = unix.IPPROTO_UDP
	s4, d4 := src.As4(), dst.As4()
	copy(h[12:], s4[:])
	copy(h[16:], d4[:])
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	if badSum {
		sum++
	}
	binary.BigEndian.PutUint16(h[10:], ^uint16(sum))
	return g
}

// ipv6GRH builds an IPv6-form GRH: version 6, traffic class, flow label,
// next header, hop limit, source and destination GIDs.
func ipv6GRH(src, dst verbs.GID, tc uint8, flow uint32, next, hop uint8) []byte {
	g := make([]byte, verbs.GRHLen)
	binary.BigEndian.PutUint32(g, 6<<28|uint32(tc)<<20|flow)
	g[6], g[7] = next, hop
	copy(g[8:], src[:])
	copy(g[24:], dst[:])
	return g
}

// TestInitAHFromWCParse checks the GRH parsing of ibv_init_ah_from_wc
// (rdma-core v44 libibverbs/verbs.c) on hand-made GRHs, host-only.
func TestInitAHFromWCParse(t *testing.T) {
	me4, peer4 := netip.MustParseAddr("169.254.77.1"), netip.MustParseAddr("169.254.77.2")
	me6 := verbs.GIDFromAddr(netip.MustParseAddr("fe80::1"))
	peer6 := verbs.GIDFromAddr(netip.MustParseAddr("fe80::2"))
	table := []verbs.GIDEntry{
		{GID: me6, Index: 0, Port: 1, Type: verbs.GIDTypeRoCEv1},
		{GID: me6, Index: 1, Port: 1, Type: verbs.GIDTypeRoCEv2},
		{GID: verbs.GIDFromAddr(me4), Index: 2, Port: 1, Type: verbs.GIDTypeRoCEv1},
		{GID: verbs.GIDFromAddr(me4), Index: 3, Port: 1, Type: verbs.GIDTypeRoCEv2},
		{GID: verbs.GIDFromAddr(me4), Index: 0, Port: 2, Type: verbs.GIDTypeRoCEv2},
	}
	wc := verbs.WorkCompletion{Flags: verbs.WCGRH, SLID: 7, SL: 3, DLIDPathBits: 1}
	base := verbs.AHAttr{DLID: 7, SL: 3, SrcPathBits: 1, Port: 1, IsGlobal: true}
	with := func(g verbs.GlobalRoute) verbs.AHAttr { a := base; a.GRH = g; return a }
	for _, tc := range []struct {
		name string
		port int
		wc   verbs.WorkCompletion
		grh  []byte
		want verbs.AHAttr
		err  error
	}{
		{"no GRH", 1, verbs.WorkCompletion{SLID: 7, SL: 3, DLIDPathBits: 1}, nil,
			verbs.AHAttr{DLID: 7, SL: 3, SrcPathBits: 1, Port: 1}, nil},
		{"RoCE v2 IPv4", 1, wc, ipv4GRH(peer4, me4, 0x28, 63, false),
			with(verbs.GlobalRoute{DGID: verbs.GIDFromAddr(peer4), SGIDIndex: 3, HopLimit: 63, TrafficClass: 0x28}), nil},
		{"RoCE v2 IPv4 port 2", 2, wc, ipv4GRH(peer4, me4, 0, 1, false),
			func() verbs.AHAttr {
				a := with(verbs.GlobalRoute{DGID: verbs.GIDFromAddr(peer4), SGIDIndex: 0, HopLimit: 1})
				a.Port = 2
				return a
			}(), nil},
		{"RoCE v2 IPv6", 1, wc, ipv6GRH(peer6, me6, 0x10, 0xabcde, unix.IPPROTO_UDP, 64),
			with(verbs.GlobalRoute{DGID: peer6, SGIDIndex: 1, HopLimit: 64, TrafficClass: 0x10, FlowLabel: 0xabcde}), nil},
		{"RoCE v1", 1, wc, ipv6GRH(peer6, me6, 0, 5, 0x1b, 9),
			with(verbs.GlobalRoute{DGID: peer6, SGIDIndex: 0, HopLimit: 9, FlowLabel: 5}), nil},
		// An IPv4-mapped GID in an IPv6 GRH whose bytes 20..39 do not
		// checksum as an IPv4 header stays IPv6.
		{"RoCE v2 IPv6 with mapped GIDs", 1, wc,
			ipv6GRH(verbs.GIDFromAddr(peer4), verbs.GIDFromAddr(me4), 0, 0, unix.IPPROTO_UDP, 2),
			with(verbs.GlobalRoute{DGID: verbs.GIDFromAddr(peer4), SGIDIndex: 3, HopLimit: 2}), nil},
		{"bad IPv4 checksum, no version 6", 1, wc, ipv4GRH(peer4, me4, 0, 1, true),
			with(verbs.GlobalRoute{DGID: verbs.GIDFromAddr(peer4), SGIDIndex: 3, HopLimit: 1}), nil},
		{"IPv4 multicast", 1, wc, ipv4GRH(peer4, netip.MustParseAddr("239.1.1.1"), 0, 1, false), verbs.AHAttr{}, unix.EINVAL},
		{"IPv6 multicast", 1, wc, ipv6GRH(peer6, verbs.GIDFromAddr(netip.MustParseAddr("ff02::1")), 0, 0, unix.IPPROTO_UDP, 1), verbs.AHAttr{}, unix.EINVAL},
		{"next header TCP", 1, wc, ipv6GRH(peer6, me6, 0, 0, unix.IPPROTO_TCP, 1), verbs.AHAttr{}, unix.EPROTONOSUPPORT},
		{"version 5", 1, wc, make([]byte, verbs.GRHLen), verbs.AHAttr{}, unix.EPROTONOSUPPORT},
		{"short GRH", 1, wc, make([]byte, 39), verbs.AHAttr{}, unix.EINVAL},
		{"unknown GID", 1, wc, ipv6GRH(peer6, peer6, 0, 0, unix.IPPROTO_UDP, 1), verbs.AHAttr{}, unix.ENOENT},
		{"RoCE v1 to an IPv4 GID of another port", 2, wc, ipv6GRH(peer6, me6, 0, 0, 0x1b, 1), verbs.AHAttr{}, unix.ENOENT},
		{"port 0", 0, wc, ipv4GRH(peer4, me4, 0, 1, false), verbs.AHAttr{}, unix.EINVAL},
	} {
		got, err := verbs.InitAHFromWCTable(tc.port, &tc.wc, tc.grh, table)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("%s: err %v, want %v", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("%s: (-want +got)\n%s", tc.name, d)
		}
	}
}

// TestInitAHFromWCBadInput: the calls refuse bad input and closed objects.
func TestInitAHFromWCBadInput(t *testing.T) {
	ctx := testutil.Open(t)
	if _, err := ctx.InitAHFromWC(1, nil, nil); !errors.Is(err, unix.EINVAL) {
		t.Errorf("nil WC: %v", err)
	}
	wc := verbs.WorkCompletion{Flags: verbs.WCGRH}
	if _, err := ctx.InitAHFromWC(1, &wc, make([]byte, 10)); !errors.Is(err, unix.EINVAL) {
		t.Errorf("short GRH: %v", err)
	}
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	if err := pd.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := pd.CreateAHFromWC(&wc, make([]byte, verbs.GRHLen), 1); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("closed PD: %v", err)
	}
}
