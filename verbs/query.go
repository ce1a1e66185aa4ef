package verbs

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/uverbs"
)

// AtomicCap is the device's atomic operation guarantee (enum ibv_atomic_cap).
type AtomicCap uint32

// Atomic capabilities.
const (
	AtomicNone AtomicCap = 0
	AtomicHCA  AtomicCap = 1
	AtomicGlob AtomicCap = 2
)

func (a AtomicCap) String() string {
	switch a {
	case AtomicNone:
		return "ATOMIC_NONE"
	case AtomicHCA:
		return "ATOMIC_HCA"
	case AtomicGlob:
		return "ATOMIC_GLOB"
	}
	return "invalid atomic capability"
}

// DeviceAttr are the device's attributes and limits (extended query
// device; what ibv_query_device_ex returns).
type DeviceAttr struct {
	FWVersion             string // formatted as the provider's rdma-core library does
	RawFWVersion          uint64
	NodeGUID              GUID
	SysImageGUID          GUID
	MaxMRSize             uint64
	PageSizeCap           uint64
	VendorID              uint32
	VendorPartID          uint32
	HWVersion             uint32
	MaxQP                 int
	MaxQPWR               int
	DeviceCapFlags        uint32 // IB_DEVICE_* (low 32 bits)
	MaxSGE                int
	MaxSGERD              int
	MaxCQ                 int
	MaxCQE                int
	MaxMR                 int
	MaxPD                 int
	MaxQPRDAtomic         int
	MaxEERDAtomic         int
	MaxResRDAtomic        int
	MaxQPInitRDAtomic     int
	MaxEEInitRDAtomic     int
	AtomicCap             AtomicCap
	MaxEE                 int
	MaxRDD                int
	MaxMW                 int
	MaxRawIPv6QP          int
	MaxRawEthyQP          int
	MaxMcastGrp           int
	MaxMcastQPAttach      int
	MaxTotalMcastQPAttach int
	MaxAH                 int
	MaxFMR                int
	MaxMapPerFMR          int
	MaxSRQ                int
	MaxSRQWR              int
	MaxSRQSGE             int
	MaxPkeys              int
	LocalCAAckDelay       uint8
	PhysPortCnt           int

	ODPGeneralCaps             uint64
	RCODPCaps                  uint32
	UCODPCaps                  uint32
	UDODPCaps                  uint32
	XRCODPCaps                 uint32
	CompletionTimestampMask    uint64
	HCACoreClock               uint64 // kHz
	DeviceCapFlagsEx           uint64 // all 64 bits of the device capability flags
	MaxRWQIndirectionTables    uint32
	MaxRWQIndirectionTableSize uint32
	RSSSupportedQPTs           uint32
	MaxWQTypeRQ                uint32
	RawPacketCaps              uint32
	TMMaxRndvHdrSize           uint32
	TMMaxNumTags               uint32
	TMFlags                    uint32
	TMMaxOps                   uint32
	TMMaxSGE                   uint32
	CQModMaxCount              uint16
	CQModMaxPeriod             uint16
	MaxDMSize                  uint64

	// From the provider's driver data (mlx5; zero for the others), as
	// ibv_query_device_ex reports them.
	MaxTSO                    uint32 // largest TSO payload, in bytes
	TSOSupportedQPTs          uint32 // 1 << QP type, for each type TSO works on
	RSSRxHashFunction         uint8
	RSSRxHashFieldsMask       uint64
	QPRateLimitMin            uint32 // packet pacing, in kbps
	QPRateLimitMax            uint32 // packet pacing, in kbps
	PacketPacingSupportedQPTs uint32 // 1 << QP type
}

// Capability flags of DeviceAttr.DeviceCapFlagsEx (IB_UVERBS_DEVICE_*)
// that decide which work requests and memory access flags a device
// takes. rxe reports all three from Linux 6.2 on (6.12: yes, 6.1: no).
const (
	DeviceCapFlushGlobal     uint64 = uverbs.IB_UVERBS_DEVICE_FLUSH_GLOBAL
	DeviceCapFlushPersistent uint64 = uverbs.IB_UVERBS_DEVICE_FLUSH_PERSISTENT
	DeviceCapAtomicWrite     uint64 = uverbs.IB_UVERBS_DEVICE_ATOMIC_WRITE
)

// Memory region access flags (IB_UVERBS_ACCESS_*) for the targets of an
// RDMA FLUSH, usable as mr.Access: a FLUSH of a placement type needs the
// matching flag on the target region. Only devices with the matching
// capability (DeviceCapFlushGlobal, DeviceCapFlushPersistent) take them;
// CheckAccess tells before registering.
const (
	AccessFlushGlobal     = uverbs.IB_UVERBS_ACCESS_FLUSH_GLOBAL
	AccessFlushPersistent = uverbs.IB_UVERBS_ACCESS_FLUSH_PERSISTENT
)

// ErrNotCapable is what an operation or access flag the device does not
// report in its capability flags (DeviceAttr.DeviceCapFlagsEx) fails
// with, before anything reaches the kernel, and what every kernel command
// refused with EOPNOTSUPP matches (the driver has no such command or
// object: see uverbs.OpError.Is); errors.Is also matches
// unix.EOPNOTSUPP. It is uverbs.ErrNotCapable.
var ErrNotCapable = uverbs.ErrNotCapable

// CapFlags returns the device's capability flags (DeviceAttr's
// DeviceCapFlagsEx), queried once per Context.
func (c *Context) CapFlags() (uint64, error) {
	if c.isClosed() {
		return 0, ErrClosed
	}
	c.capsOnce.Do(func() {
		a, err := c.QueryDevice()
		if err != nil {
			c.capsErr = err
			return
		}
		c.caps = a.DeviceCapFlagsEx
	})
	return c.caps, c.capsErr
}

// CheckWR reports ErrNotCapable if the device lacks the capability the
// opcode needs (FLUSH of a placement type, ATOMIC WRITE); any other opcode
// passes. It allocates nothing once CapFlags has been queried.
func (c *Context) CheckWR(op WROpcode, placement PlacementType) error {
	if c.isClosed() {
		return ErrClosed
	}
	var need uint64
	switch op {
	case WRAtomicWrite:
		need = DeviceCapAtomicWrite
	case WRFlush:
		switch placement {
		case FlushGlobal:
			need = DeviceCapFlushGlobal
		case FlushPersistent:
			need = DeviceCapFlushPersistent
		default:
			return ErrBadOpcode
		}
	default:
		return nil
	}
	caps, err := c.CapFlags()
	if err != nil {
		return err
	}
	if caps&need != need {
		return ErrNotCapable
	}
	return nil
}

// CheckAccess reports ErrNotCapable if access (IB_UVERBS_ACCESS_* bits)
// has a flush flag the device lacks the capability for.
func (c *Context) CheckAccess(access uint32) error {
	if c.isClosed() {
		return ErrClosed
	}
	var need uint64
	if access&AccessFlushGlobal != 0 {
		need |= DeviceCapFlushGlobal
	}
	if access&AccessFlushPersistent != 0 {
		need |= DeviceCapFlushPersistent
	}
	if need == 0 {
		return nil
	}
	caps, err := c.CapFlags()
	if err != nil {
		return err
	}
	if caps&need != need {
		return fmt.Errorf("verbs: access %#x: %w", access, ErrNotCapable)
	}
	return nil
}

// QueryDevice returns the device's attributes (EX_QUERY_DEVICE).
func (c *Context) QueryDevice() (*DeviceAttr, error) {
	if err := c.checkOpen(); err != nil {
		return nil, fmt.Errorf("verbs: query device: %w", err)
	}
	req := uverbs.ExQueryDevice{}
	resp := new(uverbs.ExQueryDeviceResp)
	var r uverbs.Ioctl
	r.InitInvokeWrite("EX_QUERY_DEVICE", uverbs.IB_USER_VERBS_CMD_FLAG_EXTENDED|uverbs.IB_USER_VERBS_EX_CMD_QUERY_DEVICE, c.driver())
	r.In(uverbs.UVERBS_ATTR_CORE_IN, unsafe.Pointer(&req), unsafe.Sizeof(req))
	r.Out(uverbs.UVERBS_ATTR_CORE_OUT, unsafe.Pointer(resp), unsafe.Sizeof(*resp))
	var readCaps func(*provider.DeviceCaps)
	if q, ok := c.k.Provider.(provider.DeviceQuerier); ok {
		var u provider.Udata
		u, readCaps = q.QueryDevice()
		u.Add(&r)
	}
	if err := c.do(&r); err != nil {
		return nil, err
	}
	var caps provider.DeviceCaps
	if readCaps != nil {
		readCaps(&caps)
	}
	b := &resp.Base
	a := &DeviceAttr{
		RawFWVersion: b.Fw_ver,
		MaxMRSize:    b.Max_mr_size, PageSizeCap: b.Page_size_cap,
		VendorID: b.Vendor_id, VendorPartID: b.Vendor_part_id, HWVersion: b.Hw_ver,
		MaxQP: int(b.Max_qp), MaxQPWR: int(b.Max_qp_wr), DeviceCapFlags: b.Device_cap_flags,
		MaxSGE: int(b.Max_sge), MaxSGERD: int(b.Max_sge_rd), MaxCQ: int(b.Max_cq), MaxCQE: int(b.Max_cqe),
		MaxMR: int(b.Max_mr), MaxPD: int(b.Max_pd), MaxQPRDAtomic: int(b.Max_qp_rd_atom),
		MaxEERDAtomic: int(b.Max_ee_rd_atom), MaxResRDAtomic: int(b.Max_res_rd_atom),
		MaxQPInitRDAtomic: int(b.Max_qp_init_rd_atom), MaxEEInitRDAtomic: int(b.Max_ee_init_rd_atom),
		AtomicCap: AtomicCap(b.Atomic_cap), MaxEE: int(b.Max_ee), MaxRDD: int(b.Max_rdd), MaxMW: int(b.Max_mw),
		MaxRawIPv6QP: int(b.Max_raw_ipv6_qp), MaxRawEthyQP: int(b.Max_raw_ethy_qp),
		MaxMcastGrp: int(b.Max_mcast_grp), MaxMcastQPAttach: int(b.Max_mcast_qp_attach),
		MaxTotalMcastQPAttach: int(b.Max_total_mcast_qp_attach), MaxAH: int(b.Max_ah),
		MaxFMR: int(b.Max_fmr), MaxMapPerFMR: int(b.Max_map_per_fmr), MaxSRQ: int(b.Max_srq),
		MaxSRQWR: int(b.Max_srq_wr), MaxSRQSGE: int(b.Max_srq_sge), MaxPkeys: int(b.Max_pkeys),
		LocalCAAckDelay: b.Local_ca_ack_delay, PhysPortCnt: int(b.Phys_port_cnt),

		ODPGeneralCaps:          resp.Odp_caps.General_caps,
		RCODPCaps:               resp.Odp_caps.Per_transport_caps.Rc_odp_caps,
		UCODPCaps:               resp.Odp_caps.Per_transport_caps.Uc_odp_caps,
		UDODPCaps:               resp.Odp_caps.Per_transport_caps.Ud_odp_caps,
		XRCODPCaps:              resp.Xrc_odp_caps,
		CompletionTimestampMask: resp.Timestamp_mask, HCACoreClock: resp.Hca_core_clock,
		DeviceCapFlagsEx:           resp.Device_cap_flags_ex,
		MaxRWQIndirectionTables:    resp.Rss_caps.Max_rwq_indirection_tables,
		MaxRWQIndirectionTableSize: resp.Rss_caps.Max_rwq_indirection_table_size,
		RSSSupportedQPTs:           resp.Rss_caps.Supported_qpts,
		MaxWQTypeRQ:                resp.Max_wq_type_rq, RawPacketCaps: resp.Raw_packet_caps,
		TMMaxRndvHdrSize: resp.Tm_caps.Rndv_hdr_size, TMMaxNumTags: resp.Tm_caps.Num_tags,
		TMFlags: resp.Tm_caps.Flags, TMMaxOps: resp.Tm_caps.Ops, TMMaxSGE: resp.Tm_caps.Sge,
		CQModMaxCount: resp.Cq_moderation_caps.Cq_moderation_count, CQModMaxPeriod: resp.Cq_moderation_caps.Cq_moderation_period,
		MaxDMSize: resp.Max_dm_size,

		MaxTSO: caps.MaxTSO, TSOSupportedQPTs: caps.TSOSupportedQPTs,
		RSSRxHashFunction: caps.RxHashFunction, RSSRxHashFieldsMask: caps.RxHashFieldsMask,
		QPRateLimitMin: caps.QPRateLimitMin, QPRateLimitMax: caps.QPRateLimitMax,
		PacketPacingSupportedQPTs: caps.PacketPacingSupportedQPTs,
	}
	// node_guid and sys_image_guid are __be64: raw wire bytes in memory.
	binary.NativeEndian.PutUint64(a.NodeGUID[:], b.Node_guid)
	binary.NativeEndian.PutUint64(a.SysImageGUID[:], b.Sys_image_guid)
	a.FWVersion = c.k.Provider.FWVersion(b.Fw_ver)
	return a, nil
}

// PortState is the logical state of a port (enum ibv_port_state).
type PortState uint8

// Port states.
const (
	PortNop         PortState = 0
	PortDown        PortState = 1
	PortInit        PortState = 2
	PortArmed       PortState = 3
	PortActive      PortState = 4
	PortActiveDefer PortState = 5
)

// String names the state the way ibv_devinfo prints it ("PORT_ACTIVE"),
// not in ibv_port_state_str's words ("active").
func (s PortState) String() string {
	switch s {
	case PortDown:
		return "PORT_DOWN"
	case PortInit:
		return "PORT_INIT"
	case PortArmed:
		return "PORT_ARMED"
	case PortActive:
		return "PORT_ACTIVE"
	}
	return "invalid state"
}

// MTU is an IB MTU enum value (1 = 256 … 5 = 4096).
type MTU uint8

// MTUs.
const (
	MTU256  MTU = 1
	MTU512  MTU = 2
	MTU1024 MTU = 3
	MTU2048 MTU = 4
	MTU4096 MTU = 5
)

// Bytes returns the MTU in bytes, or 0 for an invalid value.
func (m MTU) Bytes() int {
	if m < MTU256 || m > MTU4096 {
		return 0
	}
	return 128 << m
}

func (m MTU) String() string {
	if n := m.Bytes(); n != 0 {
		return strconv.Itoa(n)
	}
	return "invalid MTU"
}

// LinkLayer is a port's link layer.
type LinkLayer uint8

// Link layers.
const (
	LinkLayerUnspecified LinkLayer = 0
	LinkLayerInfiniBand  LinkLayer = 1
	LinkLayerEthernet    LinkLayer = 2
)

func (l LinkLayer) String() string {
	switch l {
	case LinkLayerUnspecified, LinkLayerInfiniBand:
		return "InfiniBand"
	case LinkLayerEthernet:
		return "Ethernet"
	}
	return "Unknown"
}

// PortAttr are a port's attributes (QUERY_PORT).
type PortAttr struct {
	State         PortState
	MaxMTU        MTU
	ActiveMTU     MTU
	GIDTblLen     int
	PortCapFlags  uint32
	MaxMsgSize    uint32
	BadPkeyCntr   uint32
	QkeyViolCntr  uint32
	PkeyTblLen    uint16
	LID           uint16
	SMLID         uint16
	LMC           uint8
	MaxVLNum      uint8
	SMSL          uint8
	SubnetTimeout uint8
	InitTypeReply uint8
	ActiveWidth   uint8
	ActiveSpeed   uint8
	PhysState     uint8
	LinkLayer     LinkLayer
	Flags         uint8
	PortCapFlags2 uint16
}

// QueryPort returns the attributes of port (numbered from 1).
func (c *Context) QueryPort(port int) (*PortAttr, error) {
	if err := c.checkOpen(); err != nil {
		return nil, fmt.Errorf("verbs: query port: %w", err)
	}
	if port < 1 || port > 255 {
		return nil, fmt.Errorf("verbs: query port %d: port numbers run from 1 to 255: %w", port, unix.EINVAL)
	}
	resp := new(uverbs.QueryPortRespEx)
	var r uverbs.Ioctl
	r.Init("DEVICE.QUERY_PORT", uverbs.UVERBS_OBJECT_DEVICE, uverbs.UVERBS_METHOD_QUERY_PORT, c.driver())
	r.Const(uverbs.UVERBS_ATTR_QUERY_PORT_PORT_NUM, uint64(port))
	r.Out(uverbs.UVERBS_ATTR_QUERY_PORT_RESP, unsafe.Pointer(resp), unsafe.Sizeof(*resp))
	if err := c.do(&r); err != nil {
		return nil, err
	}
	l := &resp.Legacy_resp
	return &PortAttr{
		State: PortState(l.State), MaxMTU: MTU(l.Max_mtu), ActiveMTU: MTU(l.Active_mtu),
		GIDTblLen: int(l.Gid_tbl_len), PortCapFlags: l.Port_cap_flags, MaxMsgSize: l.Max_msg_sz,
		BadPkeyCntr: l.Bad_pkey_cntr, QkeyViolCntr: l.Qkey_viol_cntr, PkeyTblLen: l.Pkey_tbl_len,
		LID: l.Lid, SMLID: l.Sm_lid, LMC: l.Lmc, MaxVLNum: l.Max_vl_num, SMSL: l.Sm_sl,
		SubnetTimeout: l.Subnet_timeout, InitTypeReply: l.Init_type_reply,
		ActiveWidth: l.Active_width, ActiveSpeed: l.Active_speed, PhysState: l.Phys_state,
		LinkLayer: LinkLayer(l.Link_layer), Flags: l.Flags, PortCapFlags2: resp.Port_cap_flags2,
	}, nil
}

// GID is a 128-bit global identifier (for RoCE: an IPv6 or IPv4-mapped
// address).
type GID [16]byte

// IsZero reports whether the GID's interface id (its low 8 bytes) is zero,
// the test libibverbs uses for an unused table slot.
func (g GID) IsZero() bool {
	for _, b := range g[8:] {
		if b != 0 {
			return false
		}
	}
	return true
}

// String formats the GID as an IPv6 address the way glibc's inet_ntop does
// ("fe80::1810:2dff:fe32:3f2d", "::ffff:169.254.77.1").
func (g GID) String() string {
	zero12 := true
	for _, b := range g[:12] {
		if b != 0 {
			zero12 = false
		}
	}
	// inet_ntop prints IPv4-compatible addresses (::a.b.c.d) with a
	// dotted quad; netip does not.
	if zero12 && (g[12] != 0 || g[13] != 0) {
		return "::" + netip.AddrFrom4([4]byte(g[12:])).String()
	}
	return netip.AddrFrom16(g).String()
}

// HexString formats the GID as eight colon-separated 16-bit groups.
func (g GID) HexString() string {
	return fmt.Sprintf("%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x",
		g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9], g[10], g[11], g[12], g[13], g[14], g[15])
}

// GIDType is the kind of a GID table entry (enum ib_uverbs_gid_type).
type GIDType uint32

// GID types.
const (
	GIDTypeIB     GIDType = uverbs.IB_UVERBS_GID_TYPE_IB
	GIDTypeRoCEv1 GIDType = uverbs.IB_UVERBS_GID_TYPE_ROCE_V1
	GIDTypeRoCEv2 GIDType = uverbs.IB_UVERBS_GID_TYPE_ROCE_V2
)

func (t GIDType) String() string {
	switch t {
	case GIDTypeIB:
		return "IB"
	case GIDTypeRoCEv1:
		return "RoCE v1"
	case GIDTypeRoCEv2:
		return "RoCE v2"
	}
	return "GIDType(" + strconv.Itoa(int(t)) + ")"
}

// GIDEntry is one valid entry of a port's GID table.
type GIDEntry struct {
	GID           GID
	Index         int
	Port          int
	Type          GIDType
	NetdevIfindex int // the netdev a RoCE GID belongs to
}

func gidEntry(e *uverbs.GidEntry) GIDEntry {
	var g GID
	binary.NativeEndian.PutUint64(g[0:], e.Gid[0])
	binary.NativeEndian.PutUint64(g[8:], e.Gid[1])
	return GIDEntry{GID: g, Index: int(e.Gid_index), Port: int(e.Port_num), Type: GIDType(e.Gid_type), NetdevIfindex: int(e.Netdev_ifindex)}
}

// QueryGIDTable returns the valid GID entries of every port, in one call.
func (c *Context) QueryGIDTable() ([]GIDEntry, error) {
	if err := c.checkOpen(); err != nil {
		return nil, fmt.Errorf("verbs: query GID table: %w", err)
	}
	total := 0
	for p := 1; p <= c.dev.Ports; p++ {
		pa, err := c.QueryPort(p)
		if err != nil {
			return nil, err
		}
		total += pa.GIDTblLen
	}
	if total == 0 {
		return nil, nil
	}
	entries := make([]uverbs.GidEntry, total)
	var n uint64
	var r uverbs.Ioctl
	r.Init("DEVICE.QUERY_GID_TABLE", uverbs.UVERBS_OBJECT_DEVICE, uverbs.UVERBS_METHOD_QUERY_GID_TABLE, c.driver())
	r.Const(uverbs.UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE, uint64(unsafe.Sizeof(entries[0])))
	r.Out(uverbs.UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES, unsafe.Pointer(&entries[0]), uintptr(total)*unsafe.Sizeof(entries[0]))
	r.Out(uverbs.UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES, unsafe.Pointer(&n), 8)
	if err := c.do(&r); err != nil {
		return nil, err
	}
	if n > uint64(total) {
		return nil, fmt.Errorf("verbs: query GID table: kernel reported %d entries for a %d-entry buffer", n, total)
	}
	out := make([]GIDEntry, n)
	for i := range out {
		out[i] = gidEntry(&entries[i])
	}
	return out, nil
}

// QueryGID returns entry index of port's GID table. An unused index fails
// with an error wrapping unix.ENODATA, an index beyond the table (at or
// above the port's GIDTblLen) with one wrapping unix.EINVAL.
func (c *Context) QueryGID(port, index int) (GIDEntry, error) {
	if err := c.checkOpen(); err != nil {
		return GIDEntry{}, fmt.Errorf("verbs: query GID: %w", err)
	}
	if port < 1 || port > 255 || index < 0 {
		return GIDEntry{}, fmt.Errorf("verbs: query GID port %d index %d: out of range", port, index)
	}
	e := new(uverbs.GidEntry)
	var r uverbs.Ioctl
	r.Init("DEVICE.QUERY_GID_ENTRY", uverbs.UVERBS_OBJECT_DEVICE, uverbs.UVERBS_METHOD_QUERY_GID_ENTRY, c.driver())
	r.Const(uverbs.UVERBS_ATTR_QUERY_GID_ENTRY_PORT, uint64(port))
	r.Const(uverbs.UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX, uint64(index))
	r.U32(uverbs.UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS, 0)
	r.Out(uverbs.UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY, unsafe.Pointer(e), unsafe.Sizeof(*e))
	if err := c.do(&r); err != nil {
		return GIDEntry{}, err
	}
	return gidEntry(e), nil
}
