package mlx5

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/uverbs"
)

const (
	avSize        = 48         // struct mlx5_wqe_av
	extendedUDAV  = 0x80000000 // MLX5_EXTENDED_UD_AV
	qpfGRHReq     = 1 << 0     // IBV_QPF_GRH_REQUIRED (QUERY_PORT's flags)
	linkLayerEth  = 2          // IBV_LINK_LAYER_ETHERNET
	ibGRHFlowMask = 0xfffff

	// The UDP source ports of RoCE v2 (IB_ROCE_UDP_ENCAP_VALID_PORT_MIN
	// and _MAX).
	roceUDPPortMin = 0xc000
	roceUDPPortMax = 0xffff

	// Byte offsets in struct mlx5_wqe_av.
	avStatRateSL = 12
	avFlMLID     = 13
	avRLID       = 14 // the LID on InfiniBand; the UDP source port on RoCE v2
	avRMAC       = 20
	avTClass     = 26
	avHopLimit   = 27
	avGRHGIDFL   = 28
	avRGID       = 32
)

// ibToMLX5Rate maps enum ibv_rate to the device's rate code
// (ib_to_mlx5_rate_table); past its end, 0 (unlimited).
var ibToMLX5Rate = [...]uint8{0, 0, 7, 8, 9, 10, 11, 12, 13, 14, 15, 11, 13, 15, 0, 9, 15, 0, 0, 9, 13, 0, 0}

// addressHandle is an mlx5 address handle: the address vector (struct
// mlx5_wqe_av) each UD send WQE carries, as mlx5_create_ah builds it. On
// an InfiniBand port it is built in user space; on a RoCE port CREATE_AH
// makes a kernel object too, and the kernel's answer (resp) holds the
// destination MAC, which Start copies into the vector.
type addressHandle struct {
	av     [avSize]byte
	kernel bool
	resp   createAHResp
}

func rateCode(r uint8) uint8 {
	if int(r) < len(ibToMLX5Rate) {
		return ibToMLX5Rate[r]
	}
	return 0
}

// setGRH writes the global route of attr (grh: the GRH bit, set on
// InfiniBand only: RoCE packets always have one).
func (a *addressHandle) setGRH(attr *uverbs.AhAttr, grh uint32) {
	if attr.Is_global == 0 {
		return
	}
	av := unsafe.Pointer(&a.av[0])
	a.av[avTClass] = attr.Grh.Traffic_class
	a.av[avHopLimit] = attr.Grh.Hop_limit
	putBE32(unsafe.Add(av, avGRHGIDFL), grh<<30|uint32(attr.Grh.Sgid_index)<<20|attr.Grh.Flow_label&ibGRHFlowMask)
	copy(a.av[avRGID:], attr.Grh.Dgid[:])
}

// NewUserAH builds the address vector for attr on an InfiniBand port,
// where the destination is a LID and the kernel is asked nothing. verbs
// calls it only for a port OnIB reports as InfiniBand; RoCE ports take
// NewAH.
func (c *ucontext) NewUserAH(_ provider.Udata, attr *uverbs.AhAttr, _ [6]byte) (provider.AH, error) {
	if attr.Port_num != 1 {
		return nil, fmt.Errorf("mlx5: address handle on port %d: the device has one port", attr.Port_num)
	}
	if c.linkLayer == linkLayerEth {
		return nil, fmt.Errorf("mlx5: port 1 is RoCE: its address handles are made by the kernel")
	}
	if attr.Is_global == 0 && c.portFlags&qpfGRHReq != 0 {
		return nil, fmt.Errorf("mlx5: port 1 requires a GRH: %w", unix.EINVAL)
	}
	a := &addressHandle{}
	a.av[avFlMLID] = attr.Src_path_bits & 0x7f
	putBE16(unsafe.Pointer(&a.av[avRLID]), attr.Dlid)
	a.av[avStatRateSL] = rateCode(attr.Static_rate)<<4 | attr.Sl&0xf
	a.setGRH(attr, 1)
	return a, nil
}

// NewAH prepares an address handle on a RoCE port (verbs asks only for a
// port OnIB does not report as InfiniBand): the address vector as
// mlx5_create_ah builds it for Ethernet, and room for CREATE_AH's answer,
// the destination MAC the kernel resolved from the GID (Start). A GRH is
// required (else unix.EINVAL, no command). For a RoCE v2 source GID the
// vector carries the UDP source port: derived from the flow label, or
// random in 0xc000-0xffff without one, as libmlx5 picks it.
func (c *ucontext) NewAH(attr *uverbs.AhAttr) (provider.AH, error) {
	if attr.Port_num != 1 {
		return nil, fmt.Errorf("mlx5: address handle on port %d: the device has one port", attr.Port_num)
	}
	if c.linkLayer != linkLayerEth {
		return nil, fmt.Errorf("mlx5: port 1 is InfiniBand: its address handles are built in user space")
	}
	if attr.Is_global == 0 {
		return nil, fmt.Errorf("mlx5: port 1 is RoCE: an address handle needs a GRH: %w", unix.EINVAL)
	}
	if c.resp.CmdsSuppUHW&cmdsSuppUHWCreateAH == 0 {
		// libmlx5 resolves the neighbour itself then
		// (ibv_resolve_eth_l2_from_gid).
		return nil, fmt.Errorf("%w: RoCE address handles on a kernel that does not answer CREATE_AH with the MAC", ErrNotYet)
	}
	v2, err := c.roceV2(attr.Port_num, attr.Grh.Sgid_index)
	if err != nil {
		return nil, err
	}
	a := &addressHandle{kernel: true}
	if v2 {
		putBE16(unsafe.Pointer(&a.av[avRLID]), udpSport(attr.Grh.Flow_label))
	}
	a.av[avStatRateSL] = rateCode(attr.Static_rate)<<4 | (attr.Sl&0x7)<<1
	a.setGRH(attr, 0)
	return a, nil
}

// udpSport is the UDP source port of a RoCE v2 address vector
// (mlx5_ah_set_udp_sport): the flow label folded into 14 bits
// (ibv_flow_label_to_udp_sport), or a random port without one.
func udpSport(flowLabel uint32) uint16 {
	fl := flowLabel & ibGRHFlowMask
	if fl == 0 {
		return uint16(roceUDPPortMin + rand.IntN(roceUDPPortMax+1-roceUDPPortMin))
	}
	low := fl&0x3fff ^ (fl&0xfc000)>>14
	return uint16(low | roceUDPPortMin)
}

// roceV2 reports whether GID index of port is a RoCE v2 GID, as
// ibv_query_gid_type answers libmlx5: an unused entry counts as v1.
func (c *ucontext) roceV2(port, index uint8) (bool, error) {
	var e uverbs.GidEntry
	var r uverbs.Ioctl
	r.Init("DEVICE.QUERY_GID_ENTRY", uverbs.UVERBS_OBJECT_DEVICE, uverbs.UVERBS_METHOD_QUERY_GID_ENTRY, uverbs.RDMA_DRIVER_MLX5)
	r.Const(uverbs.UVERBS_ATTR_QUERY_GID_ENTRY_PORT, uint64(port))
	r.Const(uverbs.UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX, uint64(index))
	r.U32(uverbs.UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS, 0)
	r.Out(uverbs.UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY, unsafe.Pointer(&e), unsafe.Sizeof(e))
	err := r.Do(c.fd)
	if errors.Is(err, unix.ENODATA) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("mlx5: type of GID %d of port %d: %w", index, port, err)
	}
	return e.Gid_type != uverbs.IB_UVERBS_GID_TYPE_IB && e.Gid_type != uverbs.IB_UVERBS_GID_TYPE_ROCE_V1, nil
}

// OnIB reports whether port is an InfiniBand port, as QUERY_PORT said at
// Start (libmlx5's cached_link_layer); the device has port 1 only.
func (c *ucontext) OnIB(port uint8) bool { return port == 1 && c.linkLayer != linkLayerEth }

// Udata is CREATE_AH's room for struct mlx5_ib_create_ah_resp on a RoCE
// port, empty on InfiniBand (no command creates the handle).
func (a *addressHandle) Udata() provider.Udata {
	if !a.kernel {
		return provider.Udata{}
	}
	return provider.Udata{Out: provider.Bytes(&a.resp)}
}

// Start copies the destination MAC of CREATE_AH's answer into the address
// vector (libmlx5 copies it whatever response_length says).
func (a *addressHandle) Start() error {
	copy(a.av[avRMAC:avRMAC+6], a.resp.DMAC[:])
	return nil
}

// setDatagram writes the datagram segment of a UD send (set_datagram_seg):
// the address vector, then the destination QP number with the extended
// AV bit and the Q_Key.
func setDatagram(seg unsafe.Pointer, a *addressHandle, remoteQPN, qkey uint32) {
	copy(unsafe.Slice((*byte)(seg), avSize), a.av[:])
	putBE32(unsafe.Add(seg, 8), remoteQPN|extendedUDAV)
	putBE32(seg, qkey)
}

var (
	_ provider.UserAHsOnIB = (*ucontext)(nil)
	_ provider.KernelAHs   = (*ucontext)(nil)
	_ provider.AH          = (*addressHandle)(nil)
	_ provider.AHStarter   = (*addressHandle)(nil)
)
