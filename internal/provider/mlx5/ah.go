package mlx5

import (
	"fmt"
	"unsafe"

	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/uverbs"
)

const (
	avSize        = 48         // struct mlx5_wqe_av
	extendedUDAV  = 0x80000000 // MLX5_EXTENDED_UD_AV
	qpfGRHReq     = 1 << 0     // IBV_QPF_GRH_REQUIRED (QUERY_PORT's flags)
	linkLayerEth  = 2          // IBV_LINK_LAYER_ETHERNET
	ibGRHFlowMask = 0xfffff
)

// ibToMLX5Rate maps enum ibv_rate to the device's rate code
// (ib_to_mlx5_rate_table); past its end, 0 (unlimited).
var ibToMLX5Rate = [...]uint8{0, 0, 7, 8, 9, 10, 11, 12, 13, 14, 15, 11, 13, 15, 0, 9, 15, 0, 0, 9, 13, 0, 0}

// addressHandle is an mlx5 address handle: the address vector (struct
// mlx5_wqe_av) each UD send WQE carries, built in user space as
// mlx5_create_ah builds it for an InfiniBand port.
type addressHandle struct {
	av [avSize]byte
}

// NewUserAH builds the address vector for attr. On an InfiniBand port the
// destination is a LID and the kernel is asked nothing; a RoCE port is not
// carried yet (libmlx5 asks the kernel for the MAC there, CREATE_AH).
func (c *ucontext) NewUserAH(_ provider.Udata, attr *uverbs.AhAttr, _ [6]byte) (provider.AH, error) {
	if attr.Port_num != 1 {
		return nil, fmt.Errorf("mlx5: address handle on port %d: the device has one port", attr.Port_num)
	}
	if c.linkLayer == linkLayerEth {
		return nil, fmt.Errorf("%w: address handles on RoCE ports", ErrNotYet)
	}
	if attr.Is_global == 0 && c.portFlags&qpfGRHReq != 0 {
		return nil, fmt.Errorf("mlx5: port 1 requires a GRH")
	}
	a := &addressHandle{}
	av := unsafe.Pointer(&a.av[0])
	rate := uint8(0)
	if int(attr.Static_rate) < len(ibToMLX5Rate) {
		rate = ibToMLX5Rate[attr.Static_rate]
	}
	a.av[13] = attr.Src_path_bits & 0x7f   // fl_mlid
	putBE16(unsafe.Add(av, 14), attr.Dlid) // rlid
	a.av[12] = rate<<4 | attr.Sl&0xf       // stat_rate_sl
	if attr.Is_global != 0 {
		a.av[26] = attr.Grh.Traffic_class
		a.av[27] = attr.Grh.Hop_limit
		putBE32(unsafe.Add(av, 28), 1<<30|uint32(attr.Grh.Sgid_index)<<20|attr.Grh.Flow_label&ibGRHFlowMask)
		copy(a.av[32:], attr.Grh.Dgid[:])
	}
	return a, nil
}

// OnIB reports whether port is an InfiniBand port, as QUERY_PORT said at
// Start (libmlx5's cached_link_layer); the device has port 1 only.
func (c *ucontext) OnIB(port uint8) bool { return port == 1 && c.linkLayer != linkLayerEth }

// Udata is empty: no command creates the handle.
func (*addressHandle) Udata() provider.Udata { return provider.Udata{} }

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
	_ provider.AH          = (*addressHandle)(nil)
)
