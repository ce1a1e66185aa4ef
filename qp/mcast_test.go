package qp_test

import (
	"net/netip"
	"testing"

	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/verbs"
)

// Multicast GIDs as the kernel's rdma_is_multicast_addr tells them.
func TestIsMulticastGID(t *testing.T) {
	for _, c := range []struct {
		addr string
		want bool
	}{
		{"ff0e::ffff:239.1.1.1", true}, // RoCEv1's and IB's mapping of an IPv4 group
		{"ff12::1", true},
		{"::ffff:239.1.1.1", true}, // RoCEv2's
		{"::ffff:224.0.0.1", true},
		{"::ffff:169.254.77.1", false},
		{"::ffff:240.0.0.1", false},
		{"fe80::1", false},
		{"::239.1.1.1", false}, // IPv4-compatible, not mapped
		{"::", false},
	} {
		if got := qp.IsMulticastGID(verbs.GID(netip.MustParseAddr(c.addr).As16())); got != c.want {
			t.Errorf("IsMulticastGID(%s) = %v, want %v", c.addr, got, c.want)
		}
	}
}
