package verbs

import (
	"fmt"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/kobj"
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

	mu     sync.Mutex
	closed bool
}

// CreateAH creates an address handle in the PD. On RoCE the kernel
// resolves the peer's MAC address from attr.GRH.DGID. A kernel driver
// that creates no address handles for user space (vmw_pvrdma: rdma-core
// builds them in its provider) fails with an error matching both
// ErrNotCapable and unix.EOPNOTSUPP.
func (pd *PD) CreateAH(attr *AHAttr) (*AH, error) {
	if err := pd.check(); err != nil {
		return nil, fmt.Errorf("verbs: create AH: %w", err)
	}
	if attr == nil {
		return nil, fmt.Errorf("verbs: create AH: nil attributes: %w", unix.EINVAL)
	}
	c := pd.ctx
	req := uverbs.CreateAh{Pd_handle: pd.handle, Attr: attr.abi()}
	var resp uverbs.CreateAhResp
	prov := c.k.Provider.NewAH(&req.Attr)
	var r uverbs.Ioctl
	r.InitInvokeWrite("CREATE_AH", uverbs.IB_USER_VERBS_CMD_CREATE_AH, c.driver())
	r.In(uverbs.UVERBS_ATTR_CORE_IN, unsafe.Pointer(&req), unsafe.Sizeof(req))
	r.Out(uverbs.UVERBS_ATTR_CORE_OUT, unsafe.Pointer(&resp), unsafe.Sizeof(resp))
	prov.Udata().Add(&r)
	if err := c.do(&r); err != nil {
		return nil, err
	}
	ah := &AH{pd: pd, handle: resp.Handle, prov: prov}
	t, err := c.track(kobj.KindAH, ah)
	if err != nil {
		ah.destroy()
		return nil, fmt.Errorf("verbs: create AH: %w", err)
	}
	ah.track = t
	return ah, nil
}

// Handle is the kernel handle of the AH.
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
	if err := ah.destroy(); err != nil {
		return err
	}
	ah.closed = true
	ah.pd.ctx.untrack(ah.track)
	return nil
}
