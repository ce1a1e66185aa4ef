package cmaddr

import (
	"context"
	"net/netip"
	"testing"
)

func TestResolve(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		network, address string
		listen           bool
		want             string // "" for an error
	}{
		{"tcp", "169.254.77.1:6379", false, "169.254.77.1:6379"},
		{"tcp4", "169.254.77.1:0", true, "169.254.77.1:0"},
		{"tcp", ":7471", true, "0.0.0.0:7471"},
		{"tcp6", ":7471", true, "[::]:7471"},
		{"tcp", "[::ffff:169.254.77.1]:1", false, "169.254.77.1:1"},
		{"tcp", ":7471", false, ""},              // a dial needs a host
		{"tcp6", "169.254.77.1:1", false, ""},    // wrong family
		{"udp", "169.254.77.1:1", false, ""},     // not a stream network
		{"tcp", "169.254.77.1", false, ""},       // no port
		{"tcp", "169.254.77.1:70000", false, ""}, // not a port
	} {
		got, err := Resolve(ctx, tc.network, tc.address, tc.listen)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("Resolve(%q, %q) = %v, want an error", tc.network, tc.address, got)
		case tc.want != "" && err != nil:
			t.Errorf("Resolve(%q, %q): %v", tc.network, tc.address, err)
		case tc.want != "" && got != netip.MustParseAddrPort(tc.want):
			t.Errorf("Resolve(%q, %q) = %v, want %s", tc.network, tc.address, got, tc.want)
		}
	}
}
