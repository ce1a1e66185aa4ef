package verbs

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/goverbs/goverbs/internal/kobj"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/uverbs"
)

// PD is a protection domain: memory regions, QPs, SRQs and address handles
// are created in one and can only be used together within it.
type PD struct {
	ctx    *Context
	handle uint32
	track  uint64
	udata  provider.Udata // ALLOC_PD's driver data, answer included (provider.UserAHs)

	mu     sync.Mutex
	closed bool
}

// AllocPD allocates a protection domain.
func (c *Context) AllocPD() (*PD, error) {
	if err := c.checkOpen(); err != nil {
		return nil, fmt.Errorf("verbs: alloc PD: %w", err)
	}
	req := uverbs.AllocPd{}
	var resp uverbs.AllocPdResp
	var r uverbs.Ioctl
	r.InitInvokeWrite("ALLOC_PD", uverbs.IB_USER_VERBS_CMD_ALLOC_PD, c.driver())
	r.In(uverbs.UVERBS_ATTR_CORE_IN, unsafe.Pointer(&req), unsafe.Sizeof(req))
	r.Out(uverbs.UVERBS_ATTR_CORE_OUT, unsafe.Pointer(&resp), unsafe.Sizeof(resp))
	u := c.k.Provider.AllocPD()
	u.Add(&r)
	if err := c.do(&r); err != nil {
		return nil, err
	}
	pd := &PD{ctx: c, handle: resp.Handle, udata: u}
	t, err := c.track(kobj.KindPD, pd)
	if err != nil {
		pd.destroy()
		return nil, fmt.Errorf("verbs: alloc PD: %w", err)
	}
	pd.track = t
	return pd, nil
}

// Context returns the context the PD belongs to.
func (pd *PD) Context() *Context { return pd.ctx }

// Handle returns the kernel handle of the PD.
func (pd *PD) Handle() uint32 { return pd.handle }

// check returns ErrClosed if the PD has been closed. Object packages call
// it (through kobj.CheckPD) before creating objects in the PD.
func (pd *PD) check() error {
	pd.mu.Lock()
	defer pd.mu.Unlock()
	if pd.closed {
		return ErrClosed
	}
	return nil
}

func (pd *PD) destroy() error {
	var r uverbs.Ioctl
	r.Init("PD.DESTROY", uverbs.UVERBS_OBJECT_PD, uverbs.UVERBS_METHOD_PD_DESTROY, pd.ctx.driver())
	r.Handle(uverbs.UVERBS_ATTR_DESTROY_PD_HANDLE, pd.handle)
	return pd.ctx.do(&r)
}

// Close deallocates the PD. The kernel refuses (EBUSY) while objects still
// use it; the PD then stays open.
func (pd *PD) Close() error {
	pd.mu.Lock()
	defer pd.mu.Unlock()
	if pd.closed {
		return nil
	}
	if err := pd.destroy(); err != nil {
		return err
	}
	pd.closed = true
	pd.ctx.untrack(pd.track)
	return nil
}
