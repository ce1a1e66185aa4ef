// Package neigh finds the Ethernet address that a RoCE packet to a GID is
// sent to, for providers whose address handles live in user space: the
// device reads the destination MAC from each UD work request, and no
// kernel command resolves it (vmw_pvrdma has no user CREATE_AH). It does
// what libibverbs' ibv_resolve_eth_l2_from_gid does with libnl, with
// route netlink requests of its own: multicast and link-local GIDs carry
// the address in their bits; any other destination is looked up through
// the routing table (a local address is reached through the interface's
// own MAC, an off-link one through its gateway) and the neighbour table,
// and if the neighbour is not known yet, a datagram to the discard port
// makes the kernel resolve it (ARP or neighbour discovery) while Resolve
// waits.
package neigh

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/rdmanl"
)

// Timeout bounds the wait for the neighbour protocol when the caller's
// context has no deadline: libibverbs' NEIGH_GET_DEFAULT_TIMEOUT_MS.
const Timeout = 3 * time.Second

// ErrUnresolved is returned (wrapping EHOSTUNREACH) when no Ethernet
// address for the destination turned up before the deadline.
var ErrUnresolved = fmt.Errorf("neigh: no Ethernet address for the destination: %w", unix.EHOSTUNREACH)

// MAC is an Ethernet address.
type MAC [6]byte

// String formats m as colon-separated hex.
func (m MAC) String() string {
	return fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5])
}

// FromGID returns the Ethernet address that a GID carries in its bits:
// for a multicast GID (IPv6, or IPv4-mapped) the group's multicast MAC;
// for a link-local one (fe80::/64) the MAC its EUI-64 interface
// identifier was made from, as the kernel's rdma_get_ll_mac and
// libibverbs read it. ok is false for any other GID.
func FromGID(gid [16]byte) (m MAC, ok bool) {
	a := netip.AddrFrom16(gid)
	if u := a.Unmap(); u.Is4() {
		if !u.IsMulticast() {
			return MAC{}, false
		}
		v := u.As4() // 01:00:5e and the group's low 23 bits
		return MAC{0x01, 0x00, 0x5e, v[1] & 0x7f, v[2], v[3]}, true
	}
	switch {
	case gid[0] == 0xff: // 33:33 and the group's low 32 bits
		return MAC{0x33, 0x33, gid[12], gid[13], gid[14], gid[15]}, true
	case binary.BigEndian.Uint64(gid[:8]) == 0xfe80_0000_0000_0000:
		return MAC{gid[8] ^ 2, gid[9], gid[10], gid[13], gid[14], gid[15]}, true
	}
	return MAC{}, false
}

// Resolve returns the Ethernet address that packets from src, on the
// interface ifindex (the source GID's netdev), to dst are sent to. A GID
// that carries its MAC (FromGID) needs no lookup; otherwise the kernel's
// route decides: dst itself is on a local interface (the interface's own
// MAC: the device loops the packet back), on the link (dst's neighbour
// entry) or behind a gateway (the gateway's). An unknown neighbour is
// resolved by sending a datagram to dst's discard port from src, and
// Resolve waits for the entry until ctx ends, or for Timeout if ctx has no
// deadline (ErrUnresolved).
func Resolve(ctx context.Context, ifindex int, src, dst netip.Addr) (MAC, error) {
	if m, ok := FromGID(dst.As16()); ok {
		return m, nil
	}
	src, dst = src.Unmap(), dst.Unmap()
	if src.Is4() != dst.Is4() {
		return MAC{}, fmt.Errorf("neigh: %v from %v: %w", dst, src, unix.EAFNOSUPPORT)
	}
	c, err := rdmanl.DialRoute()
	if err != nil {
		return MAC{}, fmt.Errorf("neigh: %w", err)
	}
	defer c.Close()
	rt, err := getRoute(c, ifindex, dst)
	if err != nil {
		return MAC{}, fmt.Errorf("neigh: route to %v: %w", dst, err)
	}
	if rt.local {
		return linkAddr(c, ifindex)
	}
	oif := rt.oif
	if oif == 0 {
		oif = ifindex
	}
	hop := dst
	if rt.gateway.IsValid() {
		hop = rt.gateway
	}
	if m, ok, err := lookup(c, oif, hop); err != nil || ok {
		return m, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, Timeout)
		defer cancel()
	}
	return solicit(ctx, c, oif, src, dst, hop)
}

// solicit makes the kernel resolve hop, the next hop to dst, by sending a
// one-byte datagram from src to dst's discard port (9), and polls the
// neighbour table until hop's entry is valid or ctx ends. The datagram
// is sent again every resend, as libibverbs sends its own up to ten
// times within the timeout.
func solicit(ctx context.Context, c *rdmanl.Conn, oif int, src, dst, hop netip.Addr) (MAC, error) {
	const (
		every  = 20 * time.Millisecond
		resend = 300 * time.Millisecond
	)
	fd, to, err := discardSocket(oif, src, dst)
	if err != nil {
		return MAC{}, fmt.Errorf("neigh: %v: %w", dst, err)
	}
	defer unix.Close(fd)
	t := time.NewTicker(every)
	defer t.Stop()
	var sent time.Time
	for {
		if now := time.Now(); now.Sub(sent) >= resend {
			// Errors here are the neighbour protocol's business (an
			// unreachable host fails the send once the entry fails):
			// the table says whether it worked.
			_ = unix.Sendto(fd, []byte("H"), unix.MSG_DONTWAIT, to)
			sent = now
		}
		select {
		case <-ctx.Done():
			return MAC{}, fmt.Errorf("neigh: %v via %v: %w (%v)", dst, hop, ErrUnresolved, ctx.Err())
		case <-t.C:
		}
		if m, ok, err := lookup(c, oif, hop); err != nil || ok {
			return m, err
		}
	}
}

// discardSocket returns a UDP socket bound to src and dst's discard port
// as a sockaddr.
func discardSocket(oif int, src, dst netip.Addr) (int, unix.Sockaddr, error) {
	var from, to unix.Sockaddr
	family := unix.AF_INET6
	if dst.Is4() {
		family = unix.AF_INET
		from = &unix.SockaddrInet4{Addr: src.As4()}
		to = &unix.SockaddrInet4{Addr: dst.As4(), Port: 9}
	} else {
		var zs, zd uint32
		if src.IsLinkLocalUnicast() {
			zs = uint32(oif)
		}
		if dst.IsLinkLocalUnicast() {
			zd = uint32(oif)
		}
		from = &unix.SockaddrInet6{Addr: src.As16(), ZoneId: zs}
		to = &unix.SockaddrInet6{Addr: dst.As16(), Port: 9, ZoneId: zd}
	}
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, nil, err
	}
	if src.IsValid() && !src.IsUnspecified() {
		if err := unix.Bind(fd, from); err != nil {
			unix.Close(fd)
			return -1, nil, fmt.Errorf("bind %v: %w", src, err)
		}
	}
	return fd, to, nil
}

// route is what RTM_GETROUTE says of a destination.
type route struct {
	local   bool       // RTN_LOCAL: an address of this host
	oif     int        // the output interface
	gateway netip.Addr // the next hop, if not dst itself
}

func family(a netip.Addr) uint8 {
	if a.Is4() {
		return unix.AF_INET
	}
	return unix.AF_INET6
}

// getRoute asks the kernel how it would send to dst out of ifindex (any
// interface if 0).
func getRoute(c *rdmanl.Conn, ifindex int, dst netip.Addr) (route, error) {
	body := make([]byte, unix.SizeofRtMsg)
	body[0] = family(dst)
	body[1] = uint8(dst.BitLen()) // rtm_dst_len
	var e rdmanl.Encoder
	e.Raw(unix.RTA_DST, dst.AsSlice())
	if ifindex > 0 {
		e.U32(unix.RTA_OIF, uint32(ifindex))
	}
	replies, err := c.Request("RTM_GETROUTE", unix.RTM_GETROUTE, false, append(body, e.Bytes()...))
	if err != nil {
		return route{}, err
	}
	if len(replies) == 0 {
		return route{}, errors.New("no RTM_NEWROUTE reply")
	}
	return parseRoute(replies[0])
}

// parseRoute decodes an RTM_NEWROUTE body (struct rtmsg and attributes).
func parseRoute(b []byte) (route, error) {
	if len(b) < unix.SizeofRtMsg {
		return route{}, fmt.Errorf("route message of %d bytes", len(b))
	}
	a, err := rdmanl.ParseAttrs(b[unix.SizeofRtMsg:])
	if err != nil {
		return route{}, err
	}
	rt := route{local: b[7] == unix.RTN_LOCAL, oif: int(a.U32(unix.RTA_OIF))}
	if gw, ok := netip.AddrFromSlice(a[unix.RTA_GATEWAY]); ok && (len(gw.AsSlice()) == 4) == (b[0] == unix.AF_INET) {
		rt.gateway = gw
	}
	return rt, nil
}

// linkAddr returns the Ethernet address of the interface ifindex.
func linkAddr(c *rdmanl.Conn, ifindex int) (MAC, error) {
	body := make([]byte, unix.SizeofIfInfomsg)
	binary.NativeEndian.PutUint32(body[4:], uint32(ifindex))
	replies, err := c.Request("RTM_GETLINK", unix.RTM_GETLINK, false, body)
	if err != nil {
		return MAC{}, fmt.Errorf("neigh: interface %d: %w", ifindex, err)
	}
	if len(replies) == 0 {
		return MAC{}, fmt.Errorf("neigh: interface %d: no RTM_NEWLINK reply", ifindex)
	}
	m, err := parseLink(replies[0])
	if err != nil {
		return MAC{}, fmt.Errorf("neigh: interface %d: %w", ifindex, err)
	}
	return m, nil
}

// parseLink decodes an RTM_NEWLINK body's Ethernet address.
func parseLink(b []byte) (MAC, error) {
	if len(b) < unix.SizeofIfInfomsg {
		return MAC{}, fmt.Errorf("link message of %d bytes", len(b))
	}
	a, err := rdmanl.ParseAttrs(b[unix.SizeofIfInfomsg:])
	if err != nil {
		return MAC{}, err
	}
	v := a[unix.IFLA_ADDRESS]
	if len(v) != len(MAC{}) {
		return MAC{}, fmt.Errorf("link address of %d bytes, not Ethernet", len(v))
	}
	return MAC(v), nil
}

// nudValid are the neighbour states whose link-layer address may be used
// (the kernel's NUD_VALID).
const nudValid = unix.NUD_PERMANENT | unix.NUD_NOARP | unix.NUD_REACHABLE | unix.NUD_PROBE | unix.NUD_STALE | unix.NUD_DELAY

// lookup returns hop's Ethernet address on the interface oif from the
// neighbour table, if it has a valid entry.
func lookup(c *rdmanl.Conn, oif int, hop netip.Addr) (MAC, bool, error) {
	body := make([]byte, unix.SizeofNdMsg)
	body[0] = family(hop)
	replies, err := c.Request("RTM_GETNEIGH", unix.RTM_GETNEIGH, true, body)
	if err != nil {
		return MAC{}, false, fmt.Errorf("neigh: %w", err)
	}
	for _, r := range replies {
		n, err := parseNeigh(r)
		if err != nil {
			return MAC{}, false, fmt.Errorf("neigh: %w", err)
		}
		if n.ifindex == oif && n.dst == hop && n.valid {
			return n.mac, true, nil
		}
	}
	return MAC{}, false, nil
}

// entry is one neighbour table entry.
type entry struct {
	ifindex int
	dst     netip.Addr
	mac     MAC
	valid   bool // a usable state and an Ethernet address
}

// parseNeigh decodes an RTM_NEWNEIGH body (struct ndmsg and attributes).
func parseNeigh(b []byte) (entry, error) {
	if len(b) < unix.SizeofNdMsg {
		return entry{}, fmt.Errorf("neighbour message of %d bytes", len(b))
	}
	a, err := rdmanl.ParseAttrs(b[unix.SizeofNdMsg:])
	if err != nil {
		return entry{}, err
	}
	e := entry{ifindex: int(int32(binary.NativeEndian.Uint32(b[4:])))}
	e.dst, _ = netip.AddrFromSlice(a[unix.NDA_DST])
	ll := a[unix.NDA_LLADDR]
	state := binary.NativeEndian.Uint16(b[8:])
	if len(ll) == len(MAC{}) && state&nudValid != 0 {
		e.mac, e.valid = MAC(ll), true
	}
	return e, nil
}
