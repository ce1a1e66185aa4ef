package verbs_test

import (
	"testing"

	"github.com/goverbs/goverbs/verbs"
)

// TestRateTables checks the rate helpers against libibverbs' tables
// (rdma-core v44 libibverbs/verbs.c: ibv_rate_to_mult, mult_to_ibv_rate,
// ibv_rate_to_mbps, mbps_to_ibv_rate; enum ibv_rate from verbs.h), row by
// row as the C switch statements have them.
func TestRateTables(t *testing.T) {
	// enum ibv_rate value, ibv_rate_to_mult, ibv_rate_to_mbps.
	table := []struct {
		rate verbs.Rate
		val  uint8
		mult int
		mbps int
	}{
		{verbs.Rate2_5Gbps, 2, 1, 2500},
		{verbs.Rate5Gbps, 5, 2, 5000},
		{verbs.Rate10Gbps, 3, 4, 10000},
		{verbs.Rate20Gbps, 6, 8, 20000},
		{verbs.Rate30Gbps, 4, 12, 30000},
		{verbs.Rate40Gbps, 7, 16, 40000},
		{verbs.Rate60Gbps, 8, 24, 60000},
		{verbs.Rate80Gbps, 9, 32, 80000},
		{verbs.Rate120Gbps, 10, 48, 120000},
		{verbs.Rate14Gbps, 11, -1, 14062},
		{verbs.Rate56Gbps, 12, -1, 56250},
		{verbs.Rate112Gbps, 13, -1, 112500},
		{verbs.Rate168Gbps, 14, -1, 168750},
		{verbs.Rate25Gbps, 15, -1, 25781},
		{verbs.Rate100Gbps, 16, -1, 103125},
		{verbs.Rate200Gbps, 17, -1, 206250},
		{verbs.Rate300Gbps, 18, -1, 309375},
		{verbs.Rate28Gbps, 19, 11, 28125},
		{verbs.Rate50Gbps, 20, 20, 53125},
		{verbs.Rate400Gbps, 21, 160, 425000},
		{verbs.Rate600Gbps, 22, 240, 637500},
		{verbs.Rate800Gbps, 23, 320, 850000},
		{verbs.Rate1200Gbps, 24, 480, 1275000},
	}
	for _, tc := range table {
		if uint8(tc.rate) != tc.val {
			t.Errorf("%v = %d, enum ibv_rate has %d", tc.rate, uint8(tc.rate), tc.val)
		}
		if got := tc.rate.Mult(); got != tc.mult {
			t.Errorf("%v.Mult() = %d, ibv_rate_to_mult %d", tc.rate, got, tc.mult)
		}
		if got := tc.rate.Mbps(); got != tc.mbps {
			t.Errorf("%v.Mbps() = %d, ibv_rate_to_mbps %d", tc.rate, got, tc.mbps)
		}
		if got := verbs.RateFromMbps(tc.mbps); got != tc.rate {
			t.Errorf("RateFromMbps(%d) = %v, mbps_to_ibv_rate %v", tc.mbps, got, tc.rate)
		}
		if tc.mult > 0 {
			if got := verbs.RateFromMult(tc.mult); got != tc.rate {
				t.Errorf("RateFromMult(%d) = %v, mult_to_ibv_rate %v", tc.mult, got, tc.rate)
			}
		}
	}
	// The defaults of the C switches: -1 and IBV_RATE_MAX.
	for _, r := range []verbs.Rate{verbs.RateMax, 1, 25, 255} {
		if r.Mult() != -1 || r.Mbps() != -1 {
			t.Errorf("%v: Mult %d Mbps %d, want -1 -1", r, r.Mult(), r.Mbps())
		}
	}
	for _, v := range []int{-1, 0, 3, 14, 100000, 1 << 30} {
		if verbs.RateFromMult(v) != verbs.RateMax || verbs.RateFromMbps(v) != verbs.RateMax {
			t.Errorf("RateFromMult/Mbps(%d) not RateMax", v)
		}
	}
	if s := verbs.Rate2_5Gbps.String(); s != "2.5 Gbps" {
		t.Errorf("String %q", s)
	}
	if s := verbs.Rate(99).String(); s != "Rate(99)" {
		t.Errorf("String %q", s)
	}
}

// TestNodeTypeString checks NodeType.String against ibv_node_type_str
// (rdma-core v44 libibverbs/enum_strs.c).
func TestNodeTypeString(t *testing.T) {
	for n, want := range map[verbs.NodeType]string{
		0: "unknown", verbs.NodeCA: "InfiniBand channel adapter", verbs.NodeSwitch: "InfiniBand switch",
		verbs.NodeRouter: "InfiniBand router", verbs.NodeRNIC: "iWARP NIC", verbs.NodeUSNIC: "usNIC",
		verbs.NodeUSNICUDP: "usNIC UDP", verbs.NodeUnspecified: "unspecified", 8: "unknown",
	} {
		if got := n.String(); got != want {
			t.Errorf("NodeType(%d) = %q, want %q", n, got, want)
		}
	}
}
