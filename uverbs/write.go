package uverbs

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// writeBuf is a legacy command as write() sends it: the 8-byte header
// immediately followed by the command struct (every command struct is
// 8-byte aligned in size, so there is no gap).
type writeBuf[T any] struct {
	hdr CmdHdr
	req T
}

// EncodeWrite returns the bytes of the legacy write() command: header
// {command, in_words, out_words} and req. in_words counts 4-byte words of the
// whole buffer including the header; out_words counts the response buffer,
// whose address the command carries in its own response field.
func EncodeWrite[T any](command uint32, req *T, respLen uintptr) []byte {
	var b writeBuf[T]
	fillWrite(&b, command, req, respLen)
	return append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(&b)), unsafe.Sizeof(b))...)
}

func fillWrite[T any](b *writeBuf[T], command uint32, req *T, respLen uintptr) {
	b.hdr = CmdHdr{
		Command:   command,
		In_words:  uint16(unsafe.Sizeof(*b) / 4),
		Out_words: uint16(respLen / 4),
	}
	b.req = *req
}

// Write issues the legacy write() command on the uverbs fd. If the command
// has a response, req's response field must hold the address of resp (see
// Addr) and respLen its size; resp is kept reachable across the call, and
// is on the heap by construction (see escape).
func Write[T any](fd *FD, op string, command uint32, req *T, resp unsafe.Pointer, respLen uintptr) error {
	escape(resp)
	var b writeBuf[T]
	fillWrite(&b, command, req, respLen)
	err := fd.Use(func(raw int) error {
		if fd.fake != nil {
			return fakeCall(unsafe.Slice((*byte)(unsafe.Pointer(&b)), unsafe.Sizeof(b)), func(buf []byte) unix.Errno {
				return fd.fake.Write(raw, buf)
			})
		}
		_, err := unix.Write(raw, unsafe.Slice((*byte)(unsafe.Pointer(&b)), unsafe.Sizeof(b)))
		return err
	})
	runtime.KeepAlive(resp)
	if err == unix.EACCES {
		err = fmt.Errorf("%w: %w", ErrForeignCredentials, err)
	}
	return wrap(op, err)
}

// Addr returns p as the 64-bit user address the ABI carries. The caller
// must keep p reachable (and unmoved) for as long as the kernel may use the
// address. Unmoved means not on a goroutine stack: a stack that grows
// between Addr and the system call is copied elsewhere, and the kernel
// then writes into the old one. A local whose address only reaches the
// kernel through Addr stays on the stack (escape analysis sees no pointer
// leave). So p must be one of:
//
//   - the response passed to Write or UcmaWrite with the same command:
//     those make it escape to the heap by construction (see escape);
//   - memory handed to the same request's Ioctl.Keep (provider.Udata's
//     Keep), which escapes by construction too;
//   - a field of an object on the heap for another reason (a long-lived
//     object such as an SRQ's);
//   - memory off the Go heap (an mmap).
//
// Ioctl attributes need no Addr: In and Out keep the pointer, and Do
// recomputes the address from it just before the system call.
func Addr(p unsafe.Pointer) uint64 { return uint64(uintptr(p)) }

// escape makes p escape to the heap in every caller, by construction: the
// store below never runs, but escape analysis does not know that, so a
// local whose address is passed here is allocated on the heap, where it
// does not move. Write and UcmaWrite pass their response through it, so
// the address the caller put in the request with Addr stays valid.
func escape(p unsafe.Pointer) {
	if escapeSink.never {
		escapeSink.p = p
	}
}

var escapeSink struct {
	never bool
	p     unsafe.Pointer
}

// Doorbell is a prepared POST_SEND write command with wr_count 0: the
// doorbell that tells providers whose send queue lives in shared memory
// (rxe, siw) to process newly posted WQEs. It is built once per QP and rung
// with no allocation.
type Doorbell struct {
	buf  writeBuf[PostSend]
	resp PostSendResp
}

// NewDoorbell prepares the doorbell of the QP with handle qpHandle. The
// kernel insists that wqe_size is at least sizeof(struct ib_uverbs_send_wr)
// even though no work request follows.
func NewDoorbell(qpHandle uint32) *Doorbell {
	d := new(Doorbell)
	req := PostSend{
		Response:  Addr(unsafe.Pointer(&d.resp)),
		Qp_handle: qpHandle,
		Wqe_size:  sendWRSize,
	}
	fillWrite(&d.buf, IB_USER_VERBS_CMD_POST_SEND, &req, unsafe.Sizeof(d.resp))
	return d
}

// sendWRSize is the wqe_size the doorbell announces. The kernel only checks
// that it is at least sizeof(struct ib_uverbs_send_wr) (56); rdma-core sends
// 128 and so do we, so traces of both read the same.
const sendWRSize = 128

// Bytes returns the doorbell command as written.
func (d *Doorbell) Bytes() []byte {
	return append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(&d.buf)), unsafe.Sizeof(d.buf))...)
}

// Ring writes the doorbell to the uverbs descriptor raw. The write never
// waits for I/O (the provider processes the queue in the caller's context
// and returns), so it is a raw system call: the Go scheduler does not hand
// the thread's P to another goroutine around it, which would otherwise
// cost a program pinned to one CPU a context switch on every post.
//
// Ring takes the raw number, not an *FD, so that posting shares no lock
// with other objects of the device: the caller guarantees raw stays open
// (QPs wait for their doorbells in Close, and the device is closed only
// after its QPs).
func (d *Doorbell) Ring(raw int) error {
	_, _, errno := unix.RawSyscall(unix.SYS_WRITE, uintptr(raw), uintptr(unsafe.Pointer(&d.buf)), unsafe.Sizeof(d.buf))
	if errno == 0 {
		return nil
	}
	var err error = errno
	if errno == unix.EACCES {
		err = fmt.Errorf("%w: %w", ErrForeignCredentials, errno)
	}
	return &OpError{Op: "POST_SEND", Err: err}
}

// fakeCall hands a fake kernel (internal/uverbshook) a heap copy of the
// command in cmd and copies back what it wrote there. The copy keeps the
// command itself off the heap: passed to the fake's interface method
// directly, every command buffer of the real path would escape (one
// allocation per command, arming a CQ included), fake or not.
func fakeCall(cmd []byte, call func(buf []byte) unix.Errno) error {
	buf := append([]byte(nil), cmd...)
	errno := call(buf)
	copy(cmd, buf)
	if errno != 0 {
		return errno
	}
	return nil
}
