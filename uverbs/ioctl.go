package uverbs

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// MaxAttrs is the most attributes one Ioctl carries. The largest core method
// (QP.CREATE) takes 15 plus the two driver-data attributes.
const MaxAttrs = 24

const (
	attrMandatory   = UVERBS_ATTR_F_MANDATORY
	attrValidOutput = UVERBS_ATTR_F_VALID_OUTPUT
)

// Attribute kinds, remembered per attribute so Do can check outputs.
const (
	kindIn uint8 = iota
	kindOut
	kindNewHandle
	kindNewFD
)

// ioctlBuf is what the kernel reads: the header immediately followed by the
// attributes (24 + 16*n bytes).
type ioctlBuf struct {
	hdr   IoctlHdr
	attrs [MaxAttrs]Attr
}

// Ioctl is one RDMA_VERBS_IOCTL request under construction: a header naming
// object and method, and attributes. Build it with Init and the attribute
// methods, each of which returns the attribute's index, then call Do.
//
// The zero value is not usable; call Init. An Ioctl can be reused after Do.
// It holds a pointer to every buffer an attribute points at, so the buffers
// stay reachable until the Ioctl itself is dropped.
type Ioctl struct {
	buf  ioctlBuf
	keep [MaxAttrs]unsafe.Pointer
	// also is memory the kernel reaches through an address inside an
	// attribute's data (see Keep).
	also unsafe.Pointer
	kind [MaxAttrs]uint8
	op   string
	err  error
}

// Init starts a request for method of object, for a device whose provider
// has driverID (RDMA_DRIVER_*; the kernel rejects any other value with
// EINVAL). op names the request in errors.
func (r *Ioctl) Init(op string, object, method uint16, driverID uint32) {
	*r = Ioctl{op: op}
	r.buf.hdr.Object_id = object
	r.buf.hdr.Method_id = method
	r.buf.hdr.Driver_id = driverID
}

// InitInvokeWrite starts a DEVICE.INVOKE_WRITE request: the legacy write
// command cmd (IB_USER_VERBS_CMD_*, or IB_USER_VERBS_CMD_FLAG_EXTENDED|ex
// command) carried by ioctl. Add its request with In(UVERBS_ATTR_CORE_IN,
// …), its response with Out(UVERBS_ATTR_CORE_OUT, …) and driver data with
// UVERBS_ATTR_UHW_IN/OUT. The request struct is the command struct without
// any header; its response field is ignored.
func (r *Ioctl) InitInvokeWrite(op string, cmd uint32, driverID uint32) {
	r.Init(op, UVERBS_OBJECT_DEVICE, UVERBS_METHOD_INVOKE_WRITE, driverID)
	r.Const(UVERBS_ATTR_WRITE_CMD, uint64(cmd))
}

func (r *Ioctl) add(id uint16, length int, flags uint16, kind uint8) *Attr {
	n := int(r.buf.hdr.Num_attrs)
	if n == MaxAttrs {
		if r.err == nil {
			r.err = &OpError{Op: r.op, Err: unix.E2BIG}
		}
		// Keep building into the last slot; Do reports the error.
		n--
	} else {
		r.buf.hdr.Num_attrs++
	}
	if length > 0xffff && r.err == nil {
		r.err = &OpError{Op: r.op, Err: unix.E2BIG}
	}
	a := &r.buf.attrs[n]
	*a = Attr{Attr_id: id, Len: uint16(length), Flags: flags}
	r.keep[n] = nil
	r.kind[n] = kind
	return a
}

func (r *Ioctl) last() int { return int(r.buf.hdr.Num_attrs) - 1 }

// Const adds an 8-byte constant input (UVERBS_ATTR_CONST_IN, such as a port
// number or QP type: the kernel requires exactly 8 bytes for these).
func (r *Ioctl) Const(id uint16, v uint64) int {
	r.add(id, 8, attrMandatory, kindIn).Data = v
	return r.last()
}

// U32 adds a 4-byte input carried inline (PTR_IN u32 attributes such as
// CQ_CQE, and 4-byte FLAGS_IN).
func (r *Ioctl) U32(id uint16, v uint32) int {
	a := r.add(id, 4, attrMandatory, kindIn)
	*(*uint32)(unsafe.Pointer(&a.Data)) = v
	return r.last()
}

// U64 adds an 8-byte input carried inline (PTR_IN u64 attributes such as
// USER_HANDLE).
func (r *Ioctl) U64(id uint16, v uint64) int {
	r.add(id, 8, attrMandatory, kindIn).Data = v
	return r.last()
}

// In adds an input of size bytes at p. Inputs of 8 bytes or less are copied
// inline into the attribute, as the kernel expects; larger ones are passed
// by address and p is kept reachable.
func (r *Ioctl) In(id uint16, p unsafe.Pointer, size uintptr) int {
	a := r.add(id, int(size), attrMandatory, kindIn)
	if size <= 8 {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&a.Data)), 8), unsafe.Slice((*byte)(p), size))
		return r.last()
	}
	a.Data = uint64(uintptr(p))
	r.keep[r.last()] = p
	return r.last()
}

// Out adds an output buffer of size bytes at p. Outputs are always passed
// by address, whatever their size. After a successful Do, Valid reports
// whether the kernel wrote it.
func (r *Ioctl) Out(id uint16, p unsafe.Pointer, size uintptr) int {
	a := r.add(id, int(size), attrMandatory, kindOut)
	a.Data = uint64(uintptr(p))
	r.keep[r.last()] = p
	return r.last()
}

// Keep keeps p reachable with the request: memory the kernel reaches
// through an address inside an attribute's data (driver data that embeds
// one, taken with Addr), rather than through the attribute itself. Like
// the buffers of In and Out, p escapes to the heap by construction, so
// that address cannot go stale when a goroutine stack moves.
func (r *Ioctl) Keep(p unsafe.Pointer) { r.also = p }

// Handle adds an object handle input (IDR attribute: length 0, the handle
// in data).
func (r *Ioctl) Handle(id uint16, handle uint32) int {
	r.add(id, 0, attrMandatory, kindIn).Data = uint64(handle)
	return r.last()
}

// NewHandle adds the attribute that receives the handle of a created
// object; read it with Data after Do.
func (r *Ioctl) NewHandle(id uint16) int {
	r.add(id, 0, attrMandatory, kindNewHandle)
	return r.last()
}

// FD adds a file-descriptor input (FD attribute: length 0, the fd in data).
func (r *Ioctl) FD(id uint16, fd int) int {
	r.add(id, 0, attrMandatory, kindIn).Data = uint64(int64(fd))
	return r.last()
}

// NewFD adds the attribute that receives a new file descriptor; read it
// with Data after Do.
func (r *Ioctl) NewFD(id uint16) int {
	r.add(id, 0, attrMandatory, kindNewFD)
	return r.last()
}

// Optional clears the MANDATORY flag of attribute i, so a kernel that does
// not know the attribute ignores it instead of failing the call.
func (r *Ioctl) Optional(i int) {
	if i >= 0 && i < int(r.buf.hdr.Num_attrs) {
		r.buf.attrs[i].Flags &^= attrMandatory
	}
}

// Data returns attribute i's data word: the handle or fd of NewHandle and
// NewFD attributes after Do.
func (r *Ioctl) Data(i int) uint64 {
	if i < 0 || i >= int(r.buf.hdr.Num_attrs) {
		return 0
	}
	return r.buf.attrs[i].Data
}

// Valid reports whether the kernel marked output attribute i as written.
func (r *Ioctl) Valid(i int) bool {
	if i < 0 || i >= int(r.buf.hdr.Num_attrs) {
		return false
	}
	return r.buf.attrs[i].Flags&attrValidOutput != 0
}

// Len is the byte length of the request as the kernel sees it.
func (r *Ioctl) Len() int {
	return int(unsafe.Sizeof(IoctlHdr{})) + int(r.buf.hdr.Num_attrs)*int(unsafe.Sizeof(Attr{}))
}

// Bytes returns a copy of the request exactly as it is passed to the
// kernel: the header (with its length field filled in) and the attributes.
func (r *Ioctl) Bytes() []byte {
	r.buf.hdr.Length = uint16(r.Len())
	return append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(&r.buf)), r.Len())...)
}

// Do issues the request on the uverbs fd. On success every mandatory output
// must have been marked valid by the kernel, else Do returns
// ErrMissingOutput.
func (r *Ioctl) Do(fd *FD) error {
	if r.err != nil {
		return r.err
	}
	r.buf.hdr.Length = uint16(r.Len())
	err := fd.Use(func(raw int) error {
		if fd.fake != nil {
			return fakeCall(unsafe.Slice((*byte)(unsafe.Pointer(&r.buf)), unsafe.Sizeof(r.buf)), func(buf []byte) unix.Errno {
				return fd.fake.Ioctl(raw, unsafe.Pointer(&buf[0]))
			})
		}
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(raw), RDMA_VERBS_IOCTL, uintptr(unsafe.Pointer(&r.buf)))
		if errno != 0 {
			return errno
		}
		return nil
	})
	runtime.KeepAlive(r)
	if err != nil {
		return &OpError{Op: r.op, Err: err}
	}
	for i := 0; i < int(r.buf.hdr.Num_attrs); i++ {
		a := &r.buf.attrs[i]
		if r.kind[i] == kindOut && a.Flags&attrMandatory != 0 && a.Flags&attrValidOutput == 0 {
			return &OpError{Op: r.op, Err: ErrMissingOutput}
		}
	}
	return nil
}
