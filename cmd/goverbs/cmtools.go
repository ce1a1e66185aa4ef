package main

// What goverbs rping, udaddy and ucmatose share: the C tools' getopt(3)
// command cmLines, their address lookups, perror-style messages, exit
// statuses, rdma_accept's default parameters and ibv_create_ah_from_wc.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cm"
	"github.com/goverbs/goverbs/verbs"
)

// cmOut serializes the writes of several goroutines to one writer, as
// stdio's locking does for the C tools' threads.
type cmOut struct {
	mu sync.Mutex
	w  io.Writer
}

func (o *cmOut) printf(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Fprintf(o.w, format, args...)
}

// cmOpt is one option getopt(3) returned: the option character, or '?'
// for an unknown option or a missing argument (then bad is the offending
// character and missing tells which).
type cmOpt struct {
	opt     byte
	arg     string
	bad     byte
	missing bool
}

// cmGetopt parses args like glibc's getopt(3) with optstring: clustered
// short options ("-vV"), arguments attached ("-C3") or separate ("-C 3"),
// "--" ending the options, and GNU's permutation (options may follow
// operands). It returns the options in order and the operands.
func cmGetopt(args []string, optstring string) (opts []cmOpt, operands []string) {
	takesArg := func(c byte) (known, arg bool) {
		if c == ':' {
			return false, false
		}
		i := strings.IndexByte(optstring, c)
		if i < 0 {
			return false, false
		}
		return true, i+1 < len(optstring) && optstring[i+1] == ':'
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			operands = append(operands, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			operands = append(operands, a)
			continue
		}
		for j := 1; j < len(a); j++ {
			c := a[j]
			known, hasArg := takesArg(c)
			if !known {
				opts = append(opts, cmOpt{opt: '?', bad: c})
				continue
			}
			if !hasArg {
				opts = append(opts, cmOpt{opt: c})
				continue
			}
			switch {
			case j+1 < len(a):
				opts = append(opts, cmOpt{opt: c, arg: a[j+1:]})
			case i+1 < len(args):
				i++
				opts = append(opts, cmOpt{opt: c, arg: args[i]})
			default:
				opts = append(opts, cmOpt{opt: '?', bad: c, missing: true})
			}
			break // the rest of a was the argument
		}
	}
	return opts, operands
}

// cmGetoptError prints what glibc's getopt prints (opterr set) for a bad
// option.
func cmGetoptError(w *cmOut, prog string, o cmOpt) {
	if o.missing {
		w.printf("%s: option requires an argument -- '%c'\n", prog, o.bad)
	} else {
		w.printf("%s: invalid option -- '%c'\n", prog, o.bad)
	}
}

// cmAtoi is a strict atoi: a decimal int, or an error.
func cmAtoi(s string) (int, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("invalid number %q", s)
	}
	return int(n), nil
}

// cmParsePort parses a port number (or a service name, as getaddrinfo
// would).
func cmParsePort(s string) (uint16, error) {
	if n, err := strconv.ParseUint(s, 10, 16); err == nil {
		return uint16(n), nil
	}
	if s != "" && strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' }) >= 0 {
		if p, err := net.LookupPort("tcp", s); err == nil {
			return uint16(p), nil
		}
	}
	return 0, fmt.Errorf("invalid port %q", s)
}

// cmLookup resolves a host name or an IP address literal to one address,
// as getaddrinfo's first answer would (IPv4 preferred).
func cmLookup(host string) (netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap(), nil
	}
	if host == "" {
		return netip.Addr{}, errors.New("Name or service not known")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		var dnsErr *net.DNSError
		if errors.As(err, &dnsErr) && !dnsErr.IsNotFound {
			return netip.Addr{}, errors.New("Temporary failure in name resolution")
		}
		return netip.Addr{}, errors.New("Name or service not known")
	}
	for _, a := range addrs {
		if a.Unmap().Is4() {
			return a.Unmap(), nil
		}
	}
	return addrs[0], nil
}

// cmStrerror is strerror(3)'s text for the errno inside err, or err's own
// text.
func cmStrerror(err error) string {
	var errno unix.Errno
	if errors.As(err, &errno) {
		s := errno.Error()
		if s != "" {
			return strings.ToUpper(s[:1]) + s[1:]
		}
	}
	if errors.Is(err, context.Canceled) {
		return "Interrupted"
	}
	return err.Error()
}

// cmEventError returns the failure event inside err, if any.
func cmEventError(err error) (*cm.EventError, bool) {
	var ee *cm.EventError
	if errors.As(err, &ee) {
		return ee, true
	}
	return nil, false
}

// cmExit turns a C tool's return value into its exit status (the low
// byte), keeping failures non-zero.
func cmExit(ret int) int {
	if ret == 0 {
		return 0
	}
	if s := ret & 0xff; s != 0 {
		return s
	}
	return 1
}

// cmAcceptParam is what rdma_accept(id, NULL) accepts with: the RDMA read
// depths the request asked for, capped by the device, and 7 retries.
func cmAcceptParam(id *cm.ID, req cm.Event) cm.ConnParam {
	p := cm.ConnParam{ResponderResources: req.Conn.ResponderResources, InitiatorDepth: req.Conn.InitiatorDepth,
		RetryCount: 7, RNRRetryCount: 7}
	if dev := id.Context(); dev != nil {
		if a, err := dev.QueryDevice(); err == nil {
			p.ResponderResources = uint8(min(int(p.ResponderResources), a.MaxQPRDAtomic))
			p.InitiatorDepth = uint8(min(int(p.InitiatorDepth), a.MaxQPInitRDAtomic))
		}
	}
	return p
}

// cmGRHSize is the size of the global route header a UD receive buffer
// starts with (struct ibv_grh).
const cmGRHSize = 40

// cmAHFromWC does what ibv_init_ah_from_wc does: the address handle
// attributes that answer the sender of a UD receive completion, from the
// completion and the GRH at the start of its buffer. On RoCEv2 over IPv4
// the last 20 bytes of the GRH hold the packet's IPv4 header.
func cmAHFromWC(dev *verbs.Context, port uint8, wc *verbs.WorkCompletion, grh []byte) (verbs.AHAttr, error) {
	var a verbs.AHAttr
	if len(grh) < cmGRHSize {
		return a, errors.New("short GRH")
	}
	flow := binary.BigEndian.Uint32(grh[0:4])
	a.GRH.FlowLabel = flow & 0xfffff
	a.DLID = wc.SLID
	a.SL = wc.SL
	a.SrcPathBits = wc.DLIDPathBits
	a.Port = port
	if wc.Flags&verbs.WCGRH == 0 {
		return a, nil
	}
	a.IsGlobal = true
	ip4 := grh[20:40]
	v4mapped := func(b []byte) verbs.GID {
		var g verbs.GID
		g[10], g[11] = 0xff, 0xff
		copy(g[12:], b)
		return g
	}
	switch cmGRHVersion(grh) {
	case 4:
		if ip4[16]&0xf0 == 0xe0 {
			return a, errors.New("multicast destination")
		}
		idx, err := cmFindGID(dev, port, v4mapped(ip4[16:20]), verbs.GIDTypeRoCEv2)
		if err != nil {
			return a, err
		}
		a.GRH.DGID = v4mapped(ip4[12:16])
		a.GRH.SGIDIndex = uint8(idx)
		a.GRH.HopLimit = ip4[8]
		a.GRH.TrafficClass = ip4[1]
	case 6:
		var sgid, dgid verbs.GID
		copy(sgid[:], grh[8:24])
		copy(dgid[:], grh[24:40])
		if dgid[0] == 0xff {
			return a, errors.New("multicast destination")
		}
		var typ verbs.GIDType
		switch grh[6] {
		case unix.IPPROTO_UDP:
			typ = verbs.GIDTypeRoCEv2
		case 0x1b:
			typ = verbs.GIDTypeRoCEv1
		default:
			return a, errors.New("unknown next header in GRH")
		}
		idx, err := cmFindGID(dev, port, dgid, typ)
		if err != nil {
			return a, err
		}
		a.GRH.DGID = sgid
		a.GRH.SGIDIndex = uint8(idx)
		a.GRH.HopLimit = grh[7]
		a.GRH.TrafficClass = uint8(flow >> 20)
	default:
		return a, errors.New("unknown GRH version")
	}
	return a, nil
}

// cmGRHVersion tells an IPv6 GRH from an IPv4 header in the GRH's last 20
// bytes, the way libibverbs does: by the IPv6 version field, then the
// IPv4 header length and checksum.
func cmGRHVersion(grh []byte) int {
	ip4 := grh[20:40]
	if grh[0]>>4 != 6 {
		if ip4[0]>>4 == 4 {
			return 4
		}
		return -1
	}
	if ip4[0]&0xf != 5 {
		return 6
	}
	var sum uint32
	for i := 0; i < 20; i += 2 {
		if i == 10 {
			continue // the checksum itself
		}
		sum += uint32(binary.NativeEndian.Uint16(ip4[i:]))
	}
	sum = sum&0xffff + sum>>16
	if uint16(^sum) == binary.NativeEndian.Uint16(ip4[10:]) {
		return 4
	}
	return 6
}

// cmFindGID returns the index of gid, of type typ, in port's GID table.
func cmFindGID(dev *verbs.Context, port uint8, gid verbs.GID, typ verbs.GIDType) (int, error) {
	tbl, err := dev.QueryGIDTable()
	if err != nil {
		return 0, err
	}
	for _, e := range tbl {
		if e.Port == int(port) && e.GID == gid && e.Type == typ {
			return e.Index, nil
		}
	}
	return 0, fmt.Errorf("GID %v not in the table of port %d", netip.AddrFrom16(gid), port)
}

// cmNewChannel opens an event channel, failing as
// create_first_event_channel does.
func cmNewChannel(errw *cmOut) (*cm.Channel, int) {
	ch, err := cm.NewChannel()
	if err != nil {
		if errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENOENT) {
			errw.printf("No RDMA devices were detected\n")
		} else {
			errw.printf("failed to create RDMA CM event channel: %s\n", cmStrerror(err))
		}
		var errno unix.Errno
		if errors.As(err, &errno) {
			return nil, int(errno)
		}
		return nil, 1
	}
	return ch, 0
}
