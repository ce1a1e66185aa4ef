package cm

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/qp"
)

// GetAddrInfo as rdma_getaddrinfo answers, for the hints rdma-core's
// programs pass (rdma_server: passive TCP with no node; rdma_client: a
// numeric server; mckey/udaddy-style UDP), without a device.
func TestGetAddrInfo(t *testing.T) {
	ctx := context.Background()
	ap := netip.MustParseAddrPort
	for _, tc := range []struct {
		name          string
		node, service string
		hints         *Hints
		want          EPInfo
	}{
		{"rdma_server", "", "7471", &Hints{Flags: AIPassive, PortSpace: TCP},
			EPInfo{Flags: AIPassive, Family: unix.AF_INET, QPType: qp.RC, PortSpace: TCP, Src: ap("0.0.0.0:7471")}},
		{"rdma_client", "169.254.77.2", "7471", &Hints{PortSpace: TCP},
			EPInfo{Family: unix.AF_INET, QPType: qp.RC, PortSpace: TCP, Dst: ap("169.254.77.2:7471")}},
		{"no hints", "169.254.77.2", "", nil,
			EPInfo{Family: unix.AF_INET, QPType: qp.RC, PortSpace: TCP, Dst: ap("169.254.77.2:0")}},
		{"UD from the QP type", "169.254.77.2", "7174", &Hints{QPType: qp.UD},
			EPInfo{Family: unix.AF_INET, QPType: qp.UD, PortSpace: UDP, Dst: ap("169.254.77.2:7174")}},
		{"RC from the port space", "169.254.77.2", "1", &Hints{PortSpace: UDP},
			EPInfo{Family: unix.AF_INET, QPType: qp.UD, PortSpace: UDP, Dst: ap("169.254.77.2:1")}},
		{"passive IPv6 wildcard", "", "9", &Hints{Flags: AIPassive | AIFamily, Family: unix.AF_INET6},
			EPInfo{Flags: AIPassive, Family: unix.AF_INET6, QPType: qp.RC, PortSpace: TCP, Src: ap("[::]:9")}},
		{"active with a source", "fe80::1", "9", &Hints{Src: ap("[fe80::2]:0")},
			EPInfo{Family: unix.AF_INET6, QPType: qp.RC, PortSpace: TCP, Src: ap("[fe80::2]:0"), Dst: ap("[fe80::1]:9")}},
		{"v4-mapped unmapped", "::ffff:169.254.77.3", "9", nil,
			EPInfo{Family: unix.AF_INET, QPType: qp.RC, PortSpace: TCP, Dst: ap("169.254.77.3:9")}},
		{"hints only", "", "", &Hints{Flags: AINoRoute, Dst: ap("169.254.77.3:5")},
			EPInfo{Flags: AINoRoute, QPType: qp.RC, PortSpace: TCP, Dst: ap("169.254.77.3:5")}},
		{"localhost by name", "localhost", "9", &Hints{Flags: AIFamily, Family: unix.AF_INET},
			EPInfo{Family: unix.AF_INET, QPType: qp.RC, PortSpace: TCP, Dst: ap("127.0.0.1:9")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := GetAddrInfo(ctx, tc.node, tc.service, tc.hints)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, *got, cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); d != "" {
				t.Errorf("(-want +got)\n%s", d)
			}
		})
	}
}

func TestGetAddrInfoErrors(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name          string
		node, service string
		hints         *Hints
		want          error
	}{
		{"nothing", "", "", nil, unix.EINVAL},
		{"AF_IB", "::1", "1", &Hints{Flags: AIFamily, Family: unix.AF_IB}, unix.EAFNOSUPPORT},
		{"unknown family", "::1", "1", &Hints{Flags: AIFamily, Family: 77}, unix.EAFNOSUPPORT},
		{"numeric host wanted", "localhost", "1", &Hints{Flags: AINumericHost}, ErrNoAddress},
		{"family mismatch", "169.254.77.2", "1", &Hints{Flags: AIFamily, Family: unix.AF_INET6}, ErrNoAddress},
		{"UD in TCP", "169.254.77.2", "1", &Hints{PortSpace: TCP, QPType: qp.UD}, unix.EINVAL},
		{"unknown port space", "169.254.77.2", "1", &Hints{PortSpace: 0x3f}, unix.EINVAL},
		{"unknown service", "169.254.77.2", "no-such-service-goverbs", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := GetAddrInfo(ctx, tc.node, tc.service, tc.hints)
			if err == nil {
				t.Fatalf("accepted: %+v", got)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("error %v, want %v", err, tc.want)
			}
		})
	}
}

// CreateEP refuses what it cannot use before it opens anything.
func TestCreateEPBadInput(t *testing.T) {
	if _, err := CreateEP(context.Background(), nil, nil, nil); err == nil {
		t.Error("nil EPInfo accepted")
	}
	if _, err := CreateEP(context.Background(), &EPInfo{PortSpace: TCP, QPType: qp.UD}, nil, nil); !errors.Is(err, unix.EINVAL) {
		t.Errorf("UD in TCP: %v", err)
	}
}
