package verbs

import (
	"net/netip"
	"testing"
)

// gidRank orders RoutableGID's candidates: RoCE v2 before InfiniBand
// before RoCE v1, and within each RoCE version IPv4-mapped before global
// IPv6 before link-local.
func TestGIDRankOrder(t *testing.T) {
	gid := func(s string) GID { return GIDFromAddr(netip.MustParseAddr(s)) }
	order := []GIDEntry{
		{GID: gid("::ffff:169.254.77.1"), Type: GIDTypeRoCEv2},
		{GID: gid("2001:db8::1"), Type: GIDTypeRoCEv2},
		{GID: gid("fe80::1"), Type: GIDTypeRoCEv2},
		{GID: gid("fe80::2"), Type: GIDTypeIB},
		{GID: gid("::ffff:169.254.77.10"), Type: GIDTypeRoCEv1},
		{GID: gid("2001:db8::2"), Type: GIDTypeRoCEv1},
		{GID: gid("fe80::5054:ff:feaa:bb01"), Type: GIDTypeRoCEv1},
		{GID: gid("fe80::3"), Type: GIDType(99)},
		{Type: GIDTypeRoCEv2}, // unused
	}
	for i := 1; i < len(order); i++ {
		if a, b := gidRank(order[i-1]), gidRank(order[i]); a <= b {
			t.Errorf("%s %v ranks %d, not above %s %v (%d)", order[i-1].Type, order[i-1].GID, a, order[i].Type, order[i].GID, b)
		}
	}
	if r := gidRank(order[len(order)-1]); r != 0 {
		t.Errorf("an all-zero GID ranks %d", r)
	}
}
