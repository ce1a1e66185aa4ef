package mr

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/kobj"
	"github.com/goverbs/goverbs/uverbs"
	"github.com/goverbs/goverbs/verbs"
)

// ReregFlags say what MR.Rereg changes (enum ibv_rereg_mr_flags, the
// kernel's IB_MR_REREG_*).
type ReregFlags uint32

// What a re-registration may change.
const (
	ReregTranslation ReregFlags = 1 << 0 // the memory (address and length)
	ReregPD          ReregFlags = 1 << 1 // the protection domain
	ReregAccess      ReregFlags = 1 << 2 // the access flags
)

// ReregAttr is what MR.Rereg changes: only the fields its Flags name are
// used.
type ReregAttr struct {
	Flags  ReregFlags
	Mem    []byte    // ReregTranslation: the new memory, addressed by its own virtual addresses
	PD     *verbs.PD // ReregPD: the new protection domain, of the same Context
	Access Access    // ReregAccess: the new access flags
}

// Rereg changes the memory, protection domain or access flags of a
// registered region in place (IB_USER_VERBS_CMD_REREG_MR, ibv_rereg_mr):
// the MR keeps its handle, and its keys are the ones the kernel reports
// afterwards (LKey, RKey), which may or may not be the old ones (rxe keeps
// them). Work requests in flight on the MR must have completed, and Rereg
// must not run concurrently with other uses of the MR.
//
// A device whose driver cannot re-register an MR so refuses with
// verbs.ErrNotCapable: the kernel answers EOPNOTSUPP. That is siw, rxe on
// Linux 6.1, and rxe on 6.12 for ReregTranslation (6.12's rxe takes PD and
// access changes only, and keeps the keys). On failure the MR is unchanged.
//
// Memory given with ReregTranslation must stay mapped while registered, as
// for Register; an MR made by New keeps its own buffer until Close.
func (m *MR) Rereg(attr ReregAttr) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("mr: rereg: %w", verbs.ErrClosed)
	}
	f := attr.Flags
	if f == 0 || f&^(ReregTranslation|ReregPD|ReregAccess) != 0 {
		return fmt.Errorf("mr: rereg: flags %#x: %w", uint32(f), unix.EINVAL)
	}
	ctx := m.pd.Context()
	req := uverbs.ReregMr{Mr_handle: m.handle, Flags: uint32(f)}
	mem, pd, access, iova := m.mem, m.pd, m.access, m.iova
	if f&ReregTranslation != 0 {
		if len(attr.Mem) == 0 {
			return fmt.Errorf("mr: rereg: empty buffer: %w", unix.EINVAL)
		}
		mem = attr.Mem
		iova = uint64(uintptr(unsafe.Pointer(&mem[0])))
		req.Start, req.Length, req.Hca_va = iova, uint64(len(mem)), iova
	}
	if f&ReregPD != 0 {
		if attr.PD == nil {
			return fmt.Errorf("mr: rereg: nil PD: %w", unix.EINVAL)
		}
		if err := kobj.CheckPD(attr.PD); err != nil {
			return fmt.Errorf("mr: rereg: PD: %w", err)
		}
		if attr.PD.Context() != ctx {
			return fmt.Errorf("mr: rereg: the PD is of another device context: %w", unix.EINVAL)
		}
		pd = attr.PD
		req.Pd_handle = pd.Handle()
	}
	if f&ReregAccess != 0 {
		access = attr.Access
		if access&(RemoteWrite|RemoteAtomic) != 0 && access&LocalWrite == 0 {
			return fmt.Errorf("mr: rereg: %w", ErrInvalidAccess)
		}
		req.Access_flags = uint32(access)
	}
	var resp uverbs.ReregMrResp
	var r uverbs.Ioctl
	r.InitInvokeWrite("REREG_MR", uverbs.IB_USER_VERBS_CMD_REREG_MR, kobj.ContextOf(ctx).Driver)
	r.In(uverbs.UVERBS_ATTR_CORE_IN, unsafe.Pointer(&req), unsafe.Sizeof(req))
	r.Out(uverbs.UVERBS_ATTR_CORE_OUT, unsafe.Pointer(&resp), unsafe.Sizeof(resp))
	if err := kobj.ContextOf(ctx).Do(&r); err != nil {
		return fmt.Errorf("mr: rereg %s: %w", f, err)
	}
	m.mem, m.pd, m.access, m.iova, m.size = mem, pd, access, iova, len(mem)
	m.lkey, m.rkey = resp.Lkey, resp.Rkey
	return nil
}

// String names the flags ("translation|pd|access").
func (f ReregFlags) String() string {
	s := ""
	for _, b := range []struct {
		f    ReregFlags
		name string
	}{{ReregTranslation, "translation"}, {ReregPD, "pd"}, {ReregAccess, "access"}} {
		if f&b.f != 0 {
			if s != "" {
				s += "|"
			}
			s += b.name
			f &^= b.f
		}
	}
	if f != 0 || s == "" {
		if s != "" {
			s += "|"
		}
		s += fmt.Sprintf("%#x", uint32(f))
	}
	return s
}
