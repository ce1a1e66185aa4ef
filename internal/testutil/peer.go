package testutil

import (
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// MulticastPeerAddr returns the IPv4 address of the other end of the test
// device's veth pair (the VM bed's veth1, which carries rxe1, when the
// device is rxe0 on veth0). Multicast traffic leaves one end and arrives
// at the other, so multicast tests put the receiver on one and the sender
// on the other.
//
// Both ends live in one network namespace, so each sees datagrams from the
// other as coming from one of its own addresses, and the IPv4 stack drops
// such multicast as martian (fib_validate_source) unless accept_local is
// set: MulticastPeerAddr sets it on both ends. (Unicast RoCE between them
// is routed as local and is not affected.) It changes nothing and fails
// when the test netdev is not one end of a veth pair.
func MulticastPeerAddr(t testing.TB) string {
	t.Helper()
	netdev := Netdev(t)
	b, err := os.ReadFile("/sys/class/net/" + netdev + "/iflink")
	if err != nil {
		t.Fatal(err)
	}
	idx, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	peer, err := net.InterfaceByIndex(idx)
	if err != nil {
		t.Fatalf("the peer of %s (ifindex %d): %v", netdev, idx, err)
	}
	if kind, _ := os.Readlink("/sys/class/net/" + netdev + "/device"); peer.Name == netdev || kind != "" {
		t.Fatalf("%s is not one end of a veth pair", netdev)
	}
	for _, dev := range []string{netdev, peer.Name} {
		if err := os.WriteFile("/proc/sys/net/ipv4/conf/"+dev+"/accept_local", []byte("1\n"), 0); err != nil {
			t.Fatalf("accept_local on %s: %v", dev, err)
		}
	}
	addrs, err := peer.Addrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	t.Fatalf("%s, the peer of %s, has no IPv4 address", peer.Name, netdev)
	return ""
}
