package verbs

import (
	"errors"
	"fmt"
	"net/netip"
)

// ErrNoGID is the error of RoutableGID for a port whose GID table has no
// entry to address it by (on RoCE: the network device has no IP address,
// or is down). errors.Is(err, ErrNoGID) holds for it.
var ErrNoGID = errors.New("no usable GID on the port")

// Addr returns the GID as an IP address: on RoCE a GID is the IP address of
// the network device it belongs to. An IPv4-mapped GID
// (::ffff:169.254.77.1) gives the IPv4 address (169.254.77.1), as
// netip.Addr.Unmap does; any other GID gives its IPv6 address. The zone is
// always empty.
func (g GID) Addr() netip.Addr { return netip.AddrFrom16(g).Unmap() }

// GIDFromAddr returns the GID of an IP address, the inverse of Addr: an
// IPv4 address becomes its IPv4-mapped IPv6 form, which is how RoCE GID
// tables hold IPv4 addresses; an IPv6 address is taken as it is, without
// its zone. The zero netip.Addr gives the zero GID.
func GIDFromAddr(a netip.Addr) GID {
	if !a.IsValid() {
		return GID{}
	}
	return GID(a.As16())
}

// MarshalText implements encoding.TextMarshaler: the GID as String formats
// it, so that a GID travels in JSON (a qp.PeerInfo, for one) as
// "::ffff:169.254.77.1" rather than as 16 numbers.
func (g GID) MarshalText() ([]byte, error) { return []byte(g.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler: it parses any textual
// IPv4 or IPv6 address (IPv4 becomes IPv4-mapped, as in GIDFromAddr).
func (g *GID) UnmarshalText(text []byte) error {
	a, err := netip.ParseAddr(string(text))
	if err != nil {
		return fmt.Errorf("verbs: GID %q: %w", text, err)
	}
	if a.Zone() != "" {
		return fmt.Errorf("verbs: GID %q: a GID has no zone", text)
	}
	*g = GIDFromAddr(a)
	return nil
}

// RoutableGID returns the entry of port's GID table that a peer should
// address this port by, the choice every RoCE program otherwise makes by
// hand (walk the table, skip unused entries, prefer RoCE v2 with an IPv4
// address). In order of preference:
//
//  1. RoCE v2 with an IPv4-mapped address;
//  2. RoCE v2 with an IPv6 address that is not link-local;
//  3. RoCE v2 with a link-local IPv6 address (fe80::/10, reachable only on
//     the same link);
//  4. an InfiniBand GID (on InfiniBand ports, the port GID: index 0);
//  5. RoCE v1, in the same order of addresses as RoCE v2 (a port that
//     offers only v1, such as qemu's pvrdma, is addressed by its IPv4
//     GID like any other);
//  6. any other valid entry (iWARP).
//
// Within one rank the lowest index wins. The table is read anew on every
// call: GIDs come and go with the network device's addresses. A port with
// no valid entry fails with an error matching ErrNoGID.
func (c *Context) RoutableGID(port int) (GIDEntry, error) {
	if err := c.checkOpen(); err != nil {
		return GIDEntry{}, fmt.Errorf("verbs: routable GID: %w", err)
	}
	if port < 1 || port > c.dev.Ports {
		return GIDEntry{}, fmt.Errorf("verbs: routable GID of port %d: %s has ports 1 to %d", port, c.dev.Name, c.dev.Ports)
	}
	table, err := c.QueryGIDTable()
	if err != nil {
		return GIDEntry{}, err
	}
	best, bestRank := GIDEntry{}, 0
	for _, e := range table {
		if e.Port != port {
			continue
		}
		r := gidRank(e)
		if r > bestRank || (r == bestRank && r > 0 && e.Index < best.Index) {
			best, bestRank = e, r
		}
	}
	if bestRank == 0 {
		return GIDEntry{}, fmt.Errorf("verbs: port %d of %s (is its network device up, with an IP address?): %w", port, c.dev.Name, ErrNoGID)
	}
	return best, nil
}

// gidRank orders GID entries for RoutableGID: higher is preferred, 0 is
// unusable.
func gidRank(e GIDEntry) int {
	if e.GID == (GID{}) {
		return 0
	}
	a := netip.AddrFrom16(e.GID)
	byAddr := func(base int) int {
		switch {
		case a.Is4In6():
			return base + 2
		case !a.IsLinkLocalUnicast():
			return base + 1
		}
		return base
	}
	switch e.Type {
	case GIDTypeRoCEv2:
		return byAddr(6)
	case GIDTypeIB:
		return 5
	case GIDTypeRoCEv1:
		return byAddr(2)
	}
	return 1
}

// PathTo returns the path from this GID entry's port and GID to the peer
// whose GID is dgid, over RoCE (a global route, hop limit 64): the
// AHAttr of a UD address handle, or of the RTR transition of a connected
// QP (qp.RTRAttr.Path). It converts the entry's int Port and Index to the
// kernel's 8-bit fields; QP.Connect in package qp builds it for you.
func (e GIDEntry) PathTo(dgid GID) AHAttr {
	return AHAttr{IsGlobal: true, Port: uint8(e.Port),
		GRH: GlobalRoute{DGID: dgid, SGIDIndex: uint8(e.Index), HopLimit: DefaultHopLimit}}
}

// DefaultHopLimit is the IP hop limit (TTL) of the paths PathTo and
// qp.QP.Connect build: 64, Linux's default for IPv4 and IPv6, enough to
// cross routers. (ibv_rc_pingpong uses 1, which keeps RoCE v2 traffic on
// the local subnet.)
const DefaultHopLimit = 64
