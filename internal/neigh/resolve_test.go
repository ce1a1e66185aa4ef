package neigh_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/neigh"
	"github.com/goverbs/goverbs/internal/testutil"
)

// TestResolveLoopback resolves an address of the host itself through the
// routing table: the loopback interface's own (all-zero) address. It
// needs no RDMA device, only route netlink.
func TestResolveLoopback(t *testing.T) {
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Fatalf("no loopback interface: %v", err)
	}
	a := netip.MustParseAddr("::ffff:127.0.0.1")
	m, err := neigh.Resolve(context.Background(), lo.Index, a, netip.MustParseAddr("::ffff:127.0.0.2"))
	if err != nil {
		t.Fatal(err)
	}
	var want neigh.MAC // package net leaves an all-zero address out
	copy(want[:], lo.HardwareAddr)
	if m != want {
		t.Errorf("127.0.0.2: %v, want lo's %v", m, want)
	}
}

// TestResolveOnTestBed resolves, on the test device's netdev (the source
// GID's netdev, where verbs.CreateAH asks; iWARP's siw has no IP GIDs, so
// the netdev and address come from the bed): the device's own address
// (the netdev's MAC), a neighbour entry made for the test, an address
// behind a route whose gateway is that neighbour, and an address nobody
// answers for (ErrUnresolved once the context ends).
func TestResolveOnTestBed(t *testing.T) {
	ifc, err := net.InterfaceByName(testutil.Netdev(t))
	if err != nil {
		t.Fatal(err)
	}
	src := netip.MustParseAddr(testutil.Addr(t))
	src = netip.AddrFrom16(src.As16()) // as a GID holds it: IPv4-mapped
	m, err := neigh.Resolve(context.Background(), ifc.Index, src, src)
	if err != nil || net.HardwareAddr(m[:]).String() != ifc.HardwareAddr.String() {
		t.Fatalf("own address %v on %s: %v %v, want %v", src, ifc.Name, m, err, ifc.HardwareAddr)
	}

	ip := testutil.LookPath(t, "ip")
	v4 := src.Unmap().As4()
	known, unknown := v4, v4
	known[3], unknown[3] = 201, 202 // in the bed's 169.254.77.0/24, unused
	kn := netip.AddrFrom4(known)
	if out, err := exec.Command(ip, "neigh", "replace", kn.String(), "lladdr", "02:00:00:00:02:01", "dev", ifc.Name, "nud", "permanent").CombinedOutput(); err != nil {
		t.Fatalf("ip neigh replace: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command(ip, "neigh", "del", kn.String(), "dev", ifc.Name).Run() })
	m, err = neigh.Resolve(context.Background(), ifc.Index, src, netip.AddrFrom16(kn.As16()))
	if err != nil || m != (neigh.MAC{2, 0, 0, 0, 2, 1}) {
		t.Errorf("neighbour %v: %v %v", kn, m, err)
	}

	// Off the link: the route's gateway, the known neighbour, decides.
	const far = "10.99.77.0/24"
	if out, err := exec.Command(ip, "route", "replace", far, "via", kn.String(), "dev", ifc.Name).CombinedOutput(); err != nil {
		t.Fatalf("ip route replace: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command(ip, "route", "del", far).Run() })
	dst := netip.MustParseAddr("::ffff:10.99.77.5")
	if m, err := neigh.Resolve(context.Background(), ifc.Index, src, dst); err != nil || m != (neigh.MAC{2, 0, 0, 0, 2, 1}) {
		t.Errorf("%v via %v: %v %v", dst, kn, m, err)
	}

	c, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	un := netip.AddrFrom4(unknown)
	m, err = neigh.Resolve(c, ifc.Index, src, un)
	if !errors.Is(err, neigh.ErrUnresolved) || !errors.Is(err, unix.EHOSTUNREACH) {
		t.Errorf("nobody's address %v: %v %v, want ErrUnresolved", un, m, err)
	}
}
