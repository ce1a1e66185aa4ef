package mr

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/kobj"
	"github.com/goverbs/goverbs/uverbs"
	"github.com/goverbs/goverbs/verbs"
)

// MWType is the type of a memory window (IB_UVERBS_MW_TYPE_*).
type MWType uint8

// Memory window types.
const (
	// MWType1 windows are bound and unbound with a BIND_MW work request
	// on any QP of their PD (ibv_bind_mw); a bind with zero length
	// unbinds. Invalidation is not allowed.
	MWType1 MWType = 1
	// MWType2 windows (type 2B on rxe) are bound by a BIND_MW work
	// request to one QP: only that QP's peer can use the rkey. They are
	// unbound by LOCAL_INV or by the peer's SEND_WITH_INV, after which
	// they can be bound again.
	MWType2 MWType = 2
)

func (t MWType) String() string {
	switch t {
	case MWType1:
		return "type 1"
	case MWType2:
		return "type 2"
	}
	return fmt.Sprintf("MWType(%d)", uint8(t))
}

// ErrBadMWBind is returned for a bind the device would refuse: a range
// outside the MR, an MR without MWBind access or of another PD, a zero
// based or empty type 2 bind.
var ErrBadMWBind = errors.New("invalid memory window bind")

// MW is a memory window: a remote key for a sub-range of a memory region
// that can be granted, moved and revoked with work requests instead of
// registration system calls. Allocate one with AllocMW, bind it with a
// BIND_MW work request (BindWR), hand its rkey to the peer, and revoke it
// with LOCAL_INV (type 2) or by binding again.
type MW struct {
	pd     *verbs.PD
	typ    MWType
	handle uint32
	track  uint64

	object // mu also guards rkey, held and holds
	rkey   uint32
	held   uint32 // QP number a type 2 bind was last posted on
	holds  bool
}

// AllocMW allocates an unbound memory window of type typ on pd.
func AllocMW(pd *verbs.PD, typ MWType) (*MW, error) {
	if typ != MWType1 && typ != MWType2 {
		return nil, fmt.Errorf("mr: alloc MW: %v: %w", typ, unix.EINVAL)
	}
	if err := kobj.CheckPD(pd); err != nil {
		return nil, fmt.Errorf("mr: alloc MW: PD: %w", err)
	}
	ctx := pd.Context()
	req := uverbs.AllocMw{Pd_handle: pd.Handle(), Mw_type: uint8(typ)}
	var resp uverbs.AllocMwResp
	var r uverbs.Ioctl
	r.InitInvokeWrite("ALLOC_MW", uverbs.IB_USER_VERBS_CMD_ALLOC_MW, kobj.ContextOf(ctx).Driver)
	r.In(uverbs.UVERBS_ATTR_CORE_IN, unsafe.Pointer(&req), unsafe.Sizeof(req))
	r.Out(uverbs.UVERBS_ATTR_CORE_OUT, unsafe.Pointer(&resp), unsafe.Sizeof(resp))
	if err := kobj.ContextOf(ctx).Do(&r); err != nil {
		return nil, fmt.Errorf("mr: alloc MW: %w", err)
	}
	w := &MW{pd: pd, typ: typ, handle: resp.Handle, rkey: resp.Rkey}
	t, err := kobj.ContextOf(ctx).Track(kobj.KindMW, w)
	if err != nil {
		w.dealloc()
		return nil, fmt.Errorf("mr: alloc MW: %w", err)
	}
	w.track = t
	kobj.ContextOf(ctx).AddWindow(w.rkey, (*window)(w))
	return w, nil
}

func (w *MW) dealloc() error {
	var r uverbs.Ioctl
	ctx := w.pd.Context()
	r.Init("MW.DESTROY", uverbs.UVERBS_OBJECT_MW, uverbs.UVERBS_METHOD_MW_DESTROY, kobj.ContextOf(ctx).Driver)
	r.Handle(uverbs.UVERBS_ATTR_DESTROY_MW_HANDLE, w.handle)
	return kobj.ContextOf(ctx).Do(&r)
}

// Type is the window's type.
func (w *MW) Type() MWType { return w.typ }

// Handle is the kernel handle of the window.
func (w *MW) Handle() uint32 { return w.handle }

// PD returns the protection domain of the window.
func (w *MW) PD() *verbs.PD { return w.pd }

// RKey is the remote key of the window as of the last bind built with
// BindWR (the allocation's rkey before any). If that bind completes with
// an error, the window keeps its previous rkey: set it back with SetRKey.
func (w *MW) RKey() uint32 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rkey
}

// SetRKey records the window's rkey, for a caller that builds BIND_MW
// work requests itself or undoes a failed bind.
func (w *MW) SetRKey(rkey uint32) {
	w.mu.Lock()
	w.rkey = rkey
	w.mu.Unlock()
}

// BindWR returns a BIND_MW work request that binds the window to length
// bytes at addr (an address in m's IOVA space) with the remote access
// flags access, and records the rkey the window will have once it is
// bound (RKey). Post it on a QP of the window's PD: for a type 2 window
// that QP is the only one whose peer may then use the rkey. For a type 1
// window a zero length unbinds it (m may then be nil).
//
// BindWR checks what the device would refuse (the range, m's PD and
// MWBind access, LocalWrite under a writable window, zero-based windows)
// and returns ErrBadMWBind for it.
func (w *MW) BindWR(wrid uint64, m *MR, addr, length uint64, access Access, flags verbs.SendFlags) (verbs.SendWR, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return verbs.SendWR{}, fmt.Errorf("mr: bind MW: %w", verbs.ErrClosed)
	}
	if err := checkBind(w, m, addr, length, access); err != nil {
		return verbs.SendWR{}, fmt.Errorf("mr: bind MW: %w", err)
	}
	b := verbs.MWBind{MWRKey: w.rkey, NewRKey: verbs.IncRKey(w.rkey), Access: uint32(access), Addr: addr, Length: length}
	if m != nil {
		b.MRLKey = m.LKey()
	}
	w.rkey = b.NewRKey
	return verbs.SendWR{WRID: wrid, Opcode: verbs.WRBindMW, Flags: flags, Bind: b}, nil
}

// window is what a QP sees of an MW (kobj.Window), registered with the
// Context under the window's rkey: the QP tells it about the binds and
// invalidations of that rkey it posts, and closes the type 2 windows that
// still hold it before it is destroyed.
type window MW

// Posted records a bind or invalidation of the window posted on the QP
// numbered qpn and reports whether the window now holds that QP.
func (x *window) Posted(bind bool, qpn uint32) bool {
	w := (*MW)(x)
	if w.typ != MWType2 {
		return false // type 1 windows do not hold the QP
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if bind {
		w.held, w.holds = qpn, true
	} else if w.holds && w.held == qpn {
		w.holds = false
	}
	return w.holds
}

// HeldQP returns the number of the QP the last bind was posted on, unless
// the window was invalidated there since.
func (x *window) HeldQP() (uint32, bool) {
	w := (*MW)(x)
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.held, w.holds && !w.closed
}

// Close closes the window.
func (x *window) Close() error { return (*MW)(x).Close() }

func checkBind(w *MW, m *MR, addr, length uint64, access Access) error {
	if access&^(RemoteWrite|RemoteRead|RemoteAtomic) != 0 {
		return fmt.Errorf("%w: access %#x: a window grants only remote read, write and atomic", ErrBadMWBind, uint32(access))
	}
	if m == nil {
		if length != 0 || w.typ == MWType2 {
			return fmt.Errorf("%w: no memory region", ErrBadMWBind)
		}
		return nil
	}
	if err := m.check(); err != nil {
		return err
	}
	switch {
	case length == 0 && w.typ == MWType2:
		return fmt.Errorf("%w: a type 2 window cannot be bound to zero bytes (invalidate it instead)", ErrBadMWBind)
	case m.PD() != w.pd:
		return fmt.Errorf("%w: the MR belongs to another PD", ErrBadMWBind)
	case m.access&MWBind == 0:
		return fmt.Errorf("%w: the MR was registered without MWBind access", ErrBadMWBind)
	case m.access&ZeroBased != 0:
		return fmt.Errorf("%w: the MR is zero based", ErrBadMWBind)
	case access&(RemoteWrite|RemoteAtomic) != 0 && m.access&LocalWrite == 0:
		return fmt.Errorf("%w: a writable window needs an MR with LocalWrite", ErrBadMWBind)
	case addr < m.iova || addr+length < addr || addr+length > m.iova+uint64(m.size):
		return fmt.Errorf("%w: [%#x, +%d) is outside the MR [%#x, +%d)", ErrBadMWBind, addr, length, m.iova, m.size)
	}
	return nil
}

// InvalidateWR returns a LOCAL_INV work request that unbinds the (type 2)
// window, so its rkey stops working; the window can then be bound again.
// Post it on the QP it was bound through.
//
// A type 2 window holds the QP it is bound through: closing that QP
// deallocates the window unless this work request was posted on it.
func (w *MW) InvalidateWR(wrid uint64, flags verbs.SendFlags) verbs.SendWR {
	return verbs.SendWR{WRID: wrid, Opcode: verbs.WRLocalInv, Flags: flags, InvalidateRKey: w.RKey()}
}

// Close deallocates the window; its rkey stops working.
func (w *MW) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	done, err := w.close(w.pd.Context(), w.track, "mr: dealloc MW", w.dealloc)
	if err == nil && !done {
		kobj.ContextOf(w.pd.Context()).RemoveWindow(w.rkey, (*window)(w))
	}
	return err
}
