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
// Addr) and respLen its size; resp is kept reachable across the call.
func Write[T any](fd *FD, op string, command uint32, req *T, resp unsafe.Pointer, respLen uintptr) error {
	var b writeBuf[T]
	fillWrite(&b, command, req, respLen)
	err := fd.Use(func(raw int) error {
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
// address: pass it to Write or keep it in an Ioctl. Unmoved means not on a
// goroutine stack: a stack that grows between Addr and the system call is
// copied elsewhere, and the kernel then writes into the old one. A local
// whose address only reaches the kernel through Addr stays on the stack
// (escape analysis sees no pointer leave), so p must point into an object
// that is on the heap for another reason (a field of a long-lived object,
// a buffer an Ioctl or Write keeps) or off the Go heap altogether.
func Addr(p unsafe.Pointer) uint64 { return uint64(uintptr(p)) }

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
