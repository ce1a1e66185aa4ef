// Package cmaddr parses and resolves the "host:port" addresses of the
// stream transports built on rdma_cm's TCP port space (rsocket,
// valkeyrdma), and retries their address and route resolution as
// librdmacm's rsocket does.
package cmaddr

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cm"
)

// Resolve parses "host:port" for network ("tcp", "tcp4" or "tcp6"),
// looking up a host name or service name if it is not numeric. An empty
// host is the unspecified address, allowed only when listen is set.
func Resolve(ctx context.Context, network, address string, listen bool) (netip.AddrPort, error) {
	var family string
	switch network {
	case "tcp":
		family = "ip"
	case "tcp4":
		family = "ip4"
	case "tcp6":
		family = "ip6"
	default:
		return netip.AddrPort{}, net.UnknownNetworkError(network)
	}
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return netip.AddrPort{}, err
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		p, lerr := net.DefaultResolver.LookupPort(ctx, "tcp", portStr)
		if lerr != nil {
			return netip.AddrPort{}, lerr
		}
		port = uint64(p)
	}
	var ip netip.Addr
	switch {
	case host == "":
		if !listen {
			return netip.AddrPort{}, &net.AddrError{Err: "missing host", Addr: address}
		}
		ip = netip.IPv4Unspecified()
		if family == "ip6" {
			ip = netip.IPv6Unspecified()
		}
	default:
		if ip, err = netip.ParseAddr(host); err != nil {
			ips, lerr := net.DefaultResolver.LookupNetIP(ctx, family, host)
			if lerr != nil {
				return netip.AddrPort{}, lerr
			}
			if len(ips) == 0 {
				return netip.AddrPort{}, &net.AddrError{Err: "no address", Addr: host}
			}
			ip = ips[0]
		}
	}
	ip = ip.Unmap()
	if family == "ip4" && !ip.Is4() || family == "ip6" && !ip.Is6() {
		return netip.AddrPort{}, &net.AddrError{Err: "address of the wrong family for " + network, Addr: host}
	}
	return netip.AddrPortFrom(ip, uint16(port)), nil
}

// Retry runs a resolution step with rsocket's timeouts: 1 s, doubled
// after each timeout, at most retries+1 times, within ctx.
func Retry(ctx context.Context, retries int, step func(context.Context) error) error {
	for try := 0; ; try++ {
		sctx, cancel := context.WithTimeout(ctx, time.Second<<try)
		err := step(sctx)
		cancel()
		var ee *cm.EventError
		timedOut := errors.As(err, &ee) && ee.Status == -int(unix.ETIMEDOUT) ||
			errors.Is(err, context.DeadlineExceeded)
		if err == nil || !timedOut || try >= retries || ctx.Err() != nil {
			return err
		}
	}
}
