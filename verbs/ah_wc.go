package verbs

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"
)

// GRHLen is the size of the Global Routing Header that starts every UD
// receive buffer (struct ibv_grh). On RoCE v2 over IPv4 its last 20 bytes
// hold the IPv4 header instead.
const GRHLen = 40

// The next-header values that tell RoCE v2 (UDP) from IB/RoCE v1 GRHs.
const (
	grhNextUDP = unix.IPPROTO_UDP
	grhNextIB  = 0x1b
)

// grhRoute is what a GRH says about the reply path before the sender's GID
// is looked up: the AH attributes, and the GID (with the GID types that may
// carry it) our side was addressed at.
type grhRoute struct {
	attr     AHAttr
	sgid     GID
	sgidType [2]GIDType
	types    int
}

// routeFromWC is ibv_init_ah_from_wc without the GID table look-up: it
// parses grh (the first GRHLen bytes of the receive buffer) as rdma-core v44
// does, telling IPv4 (RoCE v2 over IPv4, found by the IPv6 version field, or
// by an IPv4 header of length 5 with a good checksum at byte 20) from IPv6
// (RoCE v2 over IPv6 by next header UDP, IB/RoCE v1 by next header 0x1b).
func routeFromWC(port int, wc *WorkCompletion, grh []byte) (grhRoute, error) {
	var r grhRoute
	if port < 1 || port > 255 {
		return r, fmt.Errorf("port %d out of range: %w", port, unix.EINVAL)
	}
	r.attr = AHAttr{DLID: wc.SLID, SL: wc.SL, SrcPathBits: wc.DLIDPathBits, Port: uint8(port)}
	if wc.Flags&WCGRH == 0 {
		return r, nil
	}
	if len(grh) < GRHLen {
		return r, fmt.Errorf("GRH of %d bytes, want %d: %w", len(grh), GRHLen, unix.EINVAL)
	}
	flow := binary.BigEndian.Uint32(grh[0:4])
	r.attr.IsGlobal = true
	r.attr.GRH.FlowLabel = flow & 0xfffff
	ip4 := grh[20:40]
	switch grhVersion(flow, ip4) {
	case 4:
		daddr, saddr := ip4[16:20], ip4[12:16]
		if daddr[0]&0xf0 == 0xe0 { // IN_CLASSD: no multicast GIDs in the table
			return r, fmt.Errorf("GRH to multicast %d.%d.%d.%d: %w", daddr[0], daddr[1], daddr[2], daddr[3], unix.EINVAL)
		}
		r.sgid = v4Mapped(daddr)
		r.sgidType, r.types = [2]GIDType{GIDTypeRoCEv2}, 1
		r.attr.GRH.DGID = v4Mapped(saddr)
		r.attr.GRH.HopLimit = ip4[8]
		r.attr.GRH.TrafficClass = ip4[1]
	case 6:
		if grh[24] == 0xff {
			return r, fmt.Errorf("GRH to multicast GID: %w", unix.EINVAL)
		}
		switch grh[6] {
		case grhNextUDP:
			r.sgidType, r.types = [2]GIDType{GIDTypeRoCEv2}, 1
		case grhNextIB:
			// sysfs calls both "IB/RoCE v1"; the kernel's table tells them apart.
			r.sgidType, r.types = [2]GIDType{GIDTypeIB, GIDTypeRoCEv1}, 2
		default:
			return r, fmt.Errorf("GRH next header %#x: %w", grh[6], unix.EPROTONOSUPPORT)
		}
		copy(r.attr.GRH.DGID[:], grh[8:24])
		copy(r.sgid[:], grh[24:40])
		r.attr.GRH.HopLimit = grh[7]
		r.attr.GRH.TrafficClass = uint8(flow >> 20)
	default:
		return r, fmt.Errorf("GRH version %d: %w", flow>>28, unix.EPROTONOSUPPORT)
	}
	return r, nil
}

// grhVersion is get_grh_header_version: 4, 6, or 0 for neither.
func grhVersion(flow uint32, ip4 []byte) int {
	if flow>>28 != 6 {
		if ip4[0]>>4 == 4 {
			return 4
		}
		return 0
	}
	if ip4[0]&0xf != 5 { // an IPv4 header of RoCE v2 is 20 bytes
		return 6
	}
	// Believe an IPv4 header whose checksum is right; the sum is the one
	// of rdma-core (native-order halfwords, one fold), so that it agrees
	// with the C library on every GRH.
	var sum uint32
	for i := 0; i < 20; i += 2 {
		if i == 10 {
			continue // the checksum field counts as zero
		}
		sum += uint32(binary.NativeEndian.Uint16(ip4[i:]))
	}
	sum = sum&0xffff + sum>>16
	if binary.NativeEndian.Uint16(ip4[10:]) == uint16(^sum) {
		return 4
	}
	return 6
}

func v4Mapped(a []byte) GID {
	var g GID
	g[10], g[11] = 0xff, 0xff
	copy(g[12:], a)
	return g
}

// InitAHFromWC returns the attributes of an address handle that reaches the
// sender of a receive completion: ibv_init_ah_from_wc. grh is the start of
// the receive buffer (at least GRHLen bytes) when wc.Flags has WCGRH, and
// may be nil otherwise. The source GID index is the entry of port's GID table
// that holds the GRH's destination GID with the matching type (RoCE v2 for
// UDP-encapsulated GRHs and IPv4 headers, IB or RoCE v1 otherwise); hop
// limit, traffic class and flow label are the received ones, the
// destination GID is the sender's (IPv4-mapped for RoCE v2 over IPv4).
//
// Errors wrap unix.EINVAL (a short GRH, a GRH to a multicast group),
// unix.EPROTONOSUPPORT (a GRH that is neither IPv4 nor IPv6 or names
// another next header) or unix.ENOENT (no entry of the GID table holds the
// destination GID).
func (c *Context) InitAHFromWC(port int, wc *WorkCompletion, grh []byte) (AHAttr, error) {
	if err := c.checkOpen(); err != nil {
		return AHAttr{}, fmt.Errorf("verbs: AH from WC: %w", err)
	}
	if wc == nil {
		return AHAttr{}, fmt.Errorf("verbs: AH from WC: nil completion: %w", unix.EINVAL)
	}
	r, err := routeFromWC(port, wc, grh)
	if err != nil {
		return AHAttr{}, fmt.Errorf("verbs: AH from WC: %w", err)
	}
	if !r.attr.IsGlobal {
		return r.attr, nil
	}
	table, err := c.QueryGIDTable()
	if err != nil {
		return AHAttr{}, fmt.Errorf("verbs: AH from WC: %w", err)
	}
	idx, ok := r.sgidIndex(table)
	if !ok {
		return AHAttr{}, fmt.Errorf("verbs: AH from WC: GID %v (%v) not in port %d's table: %w", r.sgid, r.sgidType[0], port, unix.ENOENT)
	}
	r.attr.GRH.SGIDIndex = uint8(idx)
	return r.attr, nil
}

// sgidIndex finds the lowest index of the route's port whose GID and type
// match, as ibv_find_gid_index does.
func (r *grhRoute) sgidIndex(table []GIDEntry) (int, bool) {
	best := -1
	for _, e := range table {
		if e.Port != int(r.attr.Port) || e.GID != r.sgid || e.Index > 255 {
			continue
		}
		for _, t := range r.sgidType[:r.types] {
			if e.Type == t && (best < 0 || e.Index < best) {
				best = e.Index
			}
		}
	}
	return best, best >= 0
}

// CreateAHFromWC creates an address handle that reaches the sender of a
// receive completion on port: ibv_create_ah_from_wc (InitAHFromWC, then
// CreateAH). An iWARP device has no address handles: it fails with
// ErrNotCapable there.
func (pd *PD) CreateAHFromWC(wc *WorkCompletion, grh []byte, port int) (*AH, error) {
	if err := pd.check(); err != nil {
		return nil, fmt.Errorf("verbs: create AH from WC: %w", err)
	}
	if t := pd.ctx.dev.NodeType.Transport(); t == TransportIWARP {
		return nil, fmt.Errorf("verbs: create AH from WC: transport %v has no address handles: %w", t, ErrNotCapable)
	}
	attr, err := pd.ctx.InitAHFromWC(port, wc, grh)
	if err != nil {
		return nil, err
	}
	return pd.CreateAH(&attr)
}
