package uverbs

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ucmaBuf is an rdma_cm command as write() sends it to /dev/infiniband/rdma_cm.
type ucmaBuf[T any] struct {
	hdr UcmCmdHdr
	req T
}

// EncodeUcma returns the bytes of an rdma_cm command: the header {cmd, in,
// out} and req. in is the size of the command struct alone (the kernel
// requires in+8 <= count); out is the size of the response buffer whose
// address the command carries in its own response field.
func EncodeUcma[T any](cmd uint32, req *T, respLen uintptr) []byte {
	var b ucmaBuf[T]
	fillUcma(&b, cmd, req, respLen)
	return append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(&b)), unsafe.Sizeof(b))...)
}

func fillUcma[T any](b *ucmaBuf[T], cmd uint32, req *T, respLen uintptr) {
	b.hdr = UcmCmdHdr{Cmd: cmd, In: uint16(unsafe.Sizeof(*req)), Out: uint16(respLen)}
	b.req = *req
}

// UcmaWrite issues an rdma_cm command on fd (a raw descriptor the caller
// keeps open across the call). If the command has a response, req's
// response field must hold the address of resp (see Addr); resp is kept
// reachable across the call, and is on the heap by construction (see
// escape), so the address the caller took cannot go stale. A non-blocking fd makes GET_EVENT return
// EAGAIN when no event is queued.
func UcmaWrite[T any](fd int, op string, cmd uint32, req *T, resp unsafe.Pointer, respLen uintptr) error {
	escape(resp)
	var b ucmaBuf[T]
	fillUcma(&b, cmd, req, respLen)
	_, err := unix.Write(fd, unsafe.Slice((*byte)(unsafe.Pointer(&b)), unsafe.Sizeof(b)))
	runtime.KeepAlive(resp)
	if err != nil {
		return &OpError{Op: "rdma_cm " + op, Err: err}
	}
	return nil
}
