package verbs

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/kobj"
	"github.com/goverbs/goverbs/internal/neigh"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/uverbs"
)

// GlobalRoute is the GRH part of an address: mandatory on RoCE, where the
// destination GID is the peer's IP address and SGIDIndex picks ours.
type GlobalRoute struct {
	DGID         GID
	FlowLabel    uint32
	SGIDIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
}

// AHAttr describes a path to a peer: for UD address handles and for the
// RTR transition of connected QPs.
type AHAttr struct {
	GRH         GlobalRoute
	DLID        uint16
	SL          uint8
	SrcPathBits uint8
	StaticRate  uint8 // a Rate (enum ibv_rate); 0, RateMax, is the port's own rate
	IsGlobal    bool
	Port        uint8
}

// abi converts the attributes to the kernel's struct ib_uverbs_ah_attr.
func (a *AHAttr) abi() uverbs.AhAttr {
	out := uverbs.AhAttr{
		Dlid: a.DLID, Sl: a.SL, Src_path_bits: a.SrcPathBits, Static_rate: a.StaticRate, Port_num: a.Port,
	}
	if a.IsGlobal {
		out.Is_global = 1
	}
	out.Grh.Dgid = a.GRH.DGID
	out.Grh.Flow_label = a.GRH.FlowLabel
	out.Grh.Sgid_index = a.GRH.SGIDIndex
	out.Grh.Hop_limit = a.GRH.HopLimit
	out.Grh.Traffic_class = a.GRH.TrafficClass
	return out
}

// AH is an address handle: where UD sends go.
type AH struct {
	pd     *PD
	handle uint32
	prov   provider.AH // the provider's part, for UD work requests
	track  uint64
	user   bool // built in user space (provider.UserAHs): no kernel object

	mu     sync.Mutex
	closed bool
}

// CreateAH creates an address handle in the PD. On RoCE the kernel
// resolves the peer's MAC address from attr.GRH.DGID.
//
// On an mlx5 InfiniBand port the address handle is built in user space
// (no command; Handle 0), as libmlx5 builds it; on an mlx5 RoCE port it
// is a kernel object, and the kernel's resolved MAC goes into it.
//
// A device whose kernel driver creates no address handles for user space
// (vmw_pvrdma: rdma-core builds them in its provider) gets one built in
// user space, as rdma-core's provider builds it: it needs a GRH on an
// Ethernet port, and a destination GID that is link-local, multicast or
// IPv4-mapped (else unix.EINVAL). The destination MAC comes from the GID
// itself when it carries one, or, on a port with IP-based GIDs, from the
// routing and neighbour tables; a neighbour not known yet is resolved
// (ARP or neighbour discovery) within 3 seconds, as libibverbs
// waits, else the error matches unix.EHOSTUNREACH. Such an AH is no
// kernel object: its Handle is 0.
func (pd *PD) CreateAH(attr *AHAttr) (*AH, error) {
	if err := pd.check(); err != nil {
		return nil, fmt.Errorf("verbs: create AH: %w", err)
	}
	if attr == nil {
		return nil, fmt.Errorf("verbs: create AH: nil attributes: %w", unix.EINVAL)
	}
	c := pd.ctx
	req := uverbs.CreateAh{Pd_handle: pd.handle, Attr: attr.abi()}
	u, user := c.k.Provider.(provider.UserAHs)
	k, kernel := c.k.Provider.(provider.KernelAHs)
	if ib, ok := u.(provider.UserAHsOnIB); user && (!kernel || ok && ib.OnIB(attr.Port)) {
		return pd.createUserAH(u, attr, &req.Attr)
	}
	if !kernel {
		return nil, fmt.Errorf("verbs: create AH: the provider of %s has no address handles: %w", c.dev.Name, unix.EOPNOTSUPP)
	}
	var resp uverbs.CreateAhResp
	prov, err := k.NewAH(&req.Attr)
	if err != nil {
		return nil, fmt.Errorf("verbs: create AH: %w", err)
	}
	var r uverbs.Ioctl
	r.InitInvokeWrite("CREATE_AH", uverbs.IB_USER_VERBS_CMD_CREATE_AH, c.driver())
	r.In(uverbs.UVERBS_ATTR_CORE_IN, unsafe.Pointer(&req), unsafe.Sizeof(req))
	r.Out(uverbs.UVERBS_ATTR_CORE_OUT, unsafe.Pointer(&resp), unsafe.Sizeof(resp))
	prov.Udata().Add(&r)
	if err := c.do(&r); err != nil {
		return nil, err
	}
	ah := &AH{pd: pd, handle: resp.Handle, prov: prov}
	if s, ok := prov.(provider.AHStarter); ok {
		if err := s.Start(); err != nil {
			ah.destroy()
			return nil, fmt.Errorf("verbs: create AH: %w", err)
		}
	}
	t, err := c.track(kobj.KindAH, ah)
	if err != nil {
		ah.destroy()
		return nil, fmt.Errorf("verbs: create AH: %w", err)
	}
	ah.track = t
	return ah, nil
}

// createUserAH builds an address handle in user space (provider.UserAHs),
// with the checks and the MAC resolution of rdma-core's pvrdma_create_ah.
func (pd *PD) createUserAH(u provider.UserAHs, attr *AHAttr, abi *uverbs.AhAttr) (*AH, error) {
	fail := func(format string, args ...any) (*AH, error) {
		return nil, fmt.Errorf("verbs: create AH: "+format, args...)
	}
	if ib, ok := u.(provider.UserAHsOnIB); ok && ib.OnIB(attr.Port) {
		// An InfiniBand port: the destination is a LID (and a GID with
		// a GRH); nothing to resolve.
		if err := pd.check(); err != nil {
			return fail("%w", err)
		}
		prov, err := u.NewUserAH(pd.udata, abi, [6]byte{})
		if err != nil {
			return fail("%w", err)
		}
		return &AH{pd: pd, prov: prov, user: true}, nil
	}
	if !attr.IsGlobal {
		return fail("the device needs a GRH (RoCE): %w", unix.EINVAL)
	}
	port, err := pd.ctx.QueryPort(int(attr.Port))
	if err != nil {
		return fail("%w", err)
	}
	if port.LinkLayer != LinkLayerEthernet {
		return fail("port %d's link layer is %v, not Ethernet: %w", attr.Port, port.LinkLayer, unix.EINVAL)
	}
	if int(attr.GRH.SGIDIndex) >= port.GIDTblLen {
		return fail("source GID index %d past port %d's %d: %w", attr.GRH.SGIDIndex, attr.Port, port.GIDTblLen, unix.EINVAL)
	}
	dgid := netip.AddrFrom16(attr.GRH.DGID)
	if !dgid.IsLinkLocalUnicast() && !dgid.IsMulticast() && !dgid.Is4In6() {
		return fail("destination GID %v is neither link-local, multicast nor IPv4-mapped: %w", dgid, unix.EINVAL)
	}
	mac, ok := neigh.FromGID(attr.GRH.DGID)
	if !ok {
		if port.PortCapFlags&uverbs.IB_UVERBS_PCF_IP_BASED_GIDS == 0 {
			// Without IP-based GIDs rdma-core resolves no IPv4-mapped or
			// global GID: only the ones that carry their MAC.
			return fail("destination GID %v carries no MAC and port %d has no IP-based GIDs: %w", dgid, attr.Port, unix.EINVAL)
		}
		sgid, err := pd.ctx.QueryGID(int(attr.Port), int(attr.GRH.SGIDIndex))
		if err != nil {
			return fail("source GID %d: %w", attr.GRH.SGIDIndex, err)
		}
		if mac, err = neigh.Resolve(context.Background(), sgid.NetdevIfindex, netip.AddrFrom16(sgid.GID), dgid); err != nil {
			return fail("%w", err)
		}
	}
	if err := pd.check(); err != nil {
		return fail("%w", err)
	}
	prov, err := u.NewUserAH(pd.udata, abi, mac)
	if err != nil {
		return fail("%w", err)
	}
	return &AH{pd: pd, prov: prov, user: true}, nil
}

// Handle is the kernel handle of the AH (0 for one built in user space).
func (ah *AH) Handle() uint32 { return ah.handle }

// PD returns the protection domain of the AH.
func (ah *AH) PD() *PD { return ah.pd }

// providerAH returns the provider's part of the AH (rxe: its ah_num), which
// UD work requests carry, or ErrClosed after Close.
func (ah *AH) providerAH() (provider.AH, error) {
	ah.mu.Lock()
	defer ah.mu.Unlock()
	if ah.closed {
		return nil, ErrClosed
	}
	return ah.prov, nil
}

// check returns ErrClosed after Close.
func (ah *AH) check() error {
	ah.mu.Lock()
	defer ah.mu.Unlock()
	if ah.closed {
		return ErrClosed
	}
	return nil
}

func (ah *AH) destroy() error {
	var r uverbs.Ioctl
	r.Init("AH.DESTROY", uverbs.UVERBS_OBJECT_AH, uverbs.UVERBS_METHOD_AH_DESTROY, ah.pd.ctx.driver())
	r.Handle(uverbs.UVERBS_ATTR_DESTROY_AH_HANDLE, ah.handle)
	return ah.pd.ctx.do(&r)
}

// Close destroys the address handle.
func (ah *AH) Close() error {
	ah.mu.Lock()
	defer ah.mu.Unlock()
	if ah.closed {
		return nil
	}
	if ah.user {
		ah.closed = true
		return nil
	}
	if err := ah.destroy(); err != nil {
		return err
	}
	ah.closed = true
	ah.pd.ctx.untrack(ah.track)
	return nil
}
