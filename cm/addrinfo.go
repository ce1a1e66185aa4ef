package cm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/qp"
)

// AIFlags are the flags of GetAddrInfo's hints and results, librdmacm's
// RAI_* values.
type AIFlags uint32

// The flags librdmacm defines (rdma_cma.h).
const (
	// AIPassive: the result is for the passive side, a listener: node
	// (or the wildcard when node is empty) is the source address.
	AIPassive AIFlags = 0x1
	// AINumericHost: node is a numeric address; no name lookup.
	AINumericHost AIFlags = 0x2
	// AINoRoute: librdmacm's hint not to resolve a route (an IB ACM
	// service's job); accepted and kept, it changes nothing here.
	AINoRoute AIFlags = 0x4
	// AIFamily: Hints.Family is to be honoured.
	AIFamily AIFlags = 0x8
)

// Hints are what GetAddrInfo's caller wants (struct rdma_addrinfo as the
// hints argument). The zero value asks for an active, reliable-connected
// (TCP port space, RC QP) result of any address family.
type Hints struct {
	Flags AIFlags
	// Family is unix.AF_INET or unix.AF_INET6, or 0 for either. rdma_cm
	// over IPv4 and IPv6 only: AF_IB (native InfiniBand addressing) has
	// no device here to run on and is refused.
	Family int
	// QPType is the QP type wanted (qp.RC or qp.UD); 0 derives it from
	// PortSpace.
	QPType qp.Type
	// PortSpace is TCP or UDP; 0 derives it from QPType (TCP when
	// neither is given).
	PortSpace PortSpace
	// Src is the source address to use when the result has none (an
	// active result); Dst the destination when neither node nor service
	// is given.
	Src, Dst netip.AddrPort
}

// EPInfo is one result of GetAddrInfo (struct rdma_addrinfo): the
// addresses and the kind of connection CreateEP makes from it.
type EPInfo struct {
	// Flags is AIPassive for a passive result, 0 otherwise (as
	// librdmacm, which keeps no other flag in a result).
	Flags     AIFlags
	Family    int // unix.AF_INET or unix.AF_INET6
	QPType    qp.Type
	PortSpace PortSpace
	// Src is the address to bind (passive) or to resolve from (active,
	// invalid for "any"); Dst the peer's (active only).
	Src, Dst netip.AddrPort
}

// ErrNoAddress is what GetAddrInfo returns when node names no address of
// the family asked for (getaddrinfo's EAI_NONAME).
var ErrNoAddress = errors.New("cm: getaddrinfo: no such host or address")

// GetAddrInfo is rdma_getaddrinfo: it resolves node (a host name or a
// numeric address) and service (a port number or a service name) into the
// EPInfo CreateEP takes. With AIPassive and an empty node the result
// binds the wildcard address (IPv4's unless Family is AF_INET6); without
// AIPassive node is the destination. Like librdmacm it keeps the first
// address the lookup returns. Name lookups use Go's resolver (the hosts
// file, then DNS), so they honour ctx.
//
// Route hints (librdmacm's ai_route from an IB ACM service) do not exist
// here: rdma_cm resolves the route when CreateEP asks.
func GetAddrInfo(ctx context.Context, node, service string, hints *Hints) (*EPInfo, error) {
	if node == "" && service == "" && hints == nil {
		return nil, fmt.Errorf("cm: getaddrinfo: no node, service or hints: %w", unix.EINVAL)
	}
	var h Hints
	if hints != nil {
		h = *hints
	}
	if h.Flags&AIFamily == 0 {
		h.Family = 0
	}
	switch h.Family {
	case 0, unix.AF_INET, unix.AF_INET6:
	case unix.AF_IB:
		return nil, fmt.Errorf("cm: getaddrinfo: AF_IB addressing: %w", unix.EAFNOSUPPORT)
	default:
		return nil, fmt.Errorf("cm: getaddrinfo: address family %d: %w", h.Family, unix.EAFNOSUPPORT)
	}
	ps, qpt, err := kind(h.PortSpace, h.QPType)
	if err != nil {
		return nil, err
	}
	info := &EPInfo{QPType: qpt, PortSpace: ps}
	if node == "" && service == "" {
		// No lookup: the hints are the result (as librdmacm).
		info.Flags, info.Family, info.Dst = h.Flags, h.Family, h.Dst
	} else {
		port, err := lookupPort(ctx, ps, service)
		if err != nil {
			return nil, err
		}
		addr, err := lookupAddr(ctx, node, h)
		if err != nil {
			return nil, err
		}
		ap := netip.AddrPortFrom(addr, port)
		info.Family = unix.AF_INET
		if addr.Is6() {
			info.Family = unix.AF_INET6
		}
		if h.Flags&AIPassive != 0 {
			info.Flags, info.Src = AIPassive, ap
		} else {
			info.Dst = ap
		}
	}
	if !info.Src.IsValid() && h.Src.IsValid() {
		info.Src = h.Src
	}
	return info, nil
}

// kind completes a port space and QP type from whichever is given, as
// librdmacm does through getaddrinfo's socket type and protocol.
func kind(ps PortSpace, t qp.Type) (PortSpace, qp.Type, error) {
	switch {
	case ps == 0 && t == 0:
		ps, t = TCP, qp.RC
	case ps == 0:
		ps = TCP
		if t == qp.UD {
			ps = UDP
		}
	case t == 0:
		t = ps.qpType()
	}
	if ps != TCP && ps != UDP {
		return 0, 0, fmt.Errorf("cm: getaddrinfo: port space %v: %w", ps, unix.EINVAL)
	}
	if t != ps.qpType() {
		// rdma_cm ties the QP type to the port space for IP addressing
		// (RC in TCP, UD in UDP).
		return 0, 0, fmt.Errorf("cm: getaddrinfo: QP type %v in port space %v: %w", t, ps, unix.EINVAL)
	}
	return ps, t, nil
}

func lookupPort(ctx context.Context, ps PortSpace, service string) (uint16, error) {
	if service == "" {
		return 0, nil
	}
	if n, err := strconv.ParseUint(service, 10, 16); err == nil {
		return uint16(n), nil
	}
	network := "tcp"
	if ps == UDP {
		network = "udp"
	}
	n, err := net.DefaultResolver.LookupPort(ctx, network, service)
	if err != nil {
		return 0, fmt.Errorf("cm: getaddrinfo: service %q: %w", service, err)
	}
	return uint16(n), nil
}

func lookupAddr(ctx context.Context, node string, h Hints) (netip.Addr, error) {
	if node == "" {
		if h.Flags&AIPassive == 0 {
			// getaddrinfo's loopback for a missing node, active side.
			if h.Family == unix.AF_INET6 {
				return netip.IPv6Loopback(), nil
			}
			return netip.AddrFrom4([4]byte{127, 0, 0, 1}), nil
		}
		if h.Family == unix.AF_INET6 {
			return netip.IPv6Unspecified(), nil
		}
		return netip.IPv4Unspecified(), nil
	}
	want := func(a netip.Addr) bool {
		switch h.Family {
		case unix.AF_INET:
			return a.Is4()
		case unix.AF_INET6:
			return a.Is6()
		}
		return true
	}
	if a, err := netip.ParseAddr(node); err == nil {
		a = a.Unmap()
		if !want(a) {
			return netip.Addr{}, fmt.Errorf("%w: %s is not of family %d", ErrNoAddress, node, h.Family)
		}
		return a, nil
	}
	if h.Flags&AINumericHost != 0 {
		return netip.Addr{}, fmt.Errorf("%w: %q is not a numeric address", ErrNoAddress, node)
	}
	network := "ip"
	switch h.Family {
	case unix.AF_INET:
		network = "ip4"
	case unix.AF_INET6:
		network = "ip6"
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, network, node)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%w: %q: %w", ErrNoAddress, node, err)
	}
	for _, a := range addrs {
		if a = a.Unmap(); want(a) {
			return a, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("%w: %q", ErrNoAddress, node)
}
