package uverbs

import (
	"testing"
	"unsafe"
)

// Memory whose address travels to the kernel must not live on a goroutine
// stack, which moves when it grows (the rxe SRQ resize bug). These tests pin
// that every way of handing such memory to a request makes it escape to the
// heap by construction: a caller's local costs exactly one allocation more
// than the same call without it.

type respBuf struct{ b [72]byte }

func oneMore(t *testing.T, what string, with, without func()) {
	t.Helper()
	w, wo := testing.AllocsPerRun(20, with), testing.AllocsPerRun(20, without)
	if w-wo != 1 {
		t.Errorf("%s: a local buffer costs %v allocations, none %v; want exactly one more (the buffer on the heap)", what, w, wo)
	}
}

func TestUcmaWriteResponseEscapes(t *testing.T) {
	oneMore(t, "UcmaWrite", func() {
		var r respBuf
		req := UcmDestroyID{Response: Addr(unsafe.Pointer(&r))}
		UcmaWrite(-1, "DESTROY_ID", RDMA_USER_CM_CMD_DESTROY_ID, &req, unsafe.Pointer(&r), unsafe.Sizeof(r))
	}, func() {
		req := UcmDestroyID{}
		UcmaWrite(-1, "DESTROY_ID", RDMA_USER_CM_CMD_DESTROY_ID, &req, nil, 0)
	})
}

func TestWriteResponseEscapes(t *testing.T) {
	fd := NewFD(-1)
	oneMore(t, "Write", func() {
		var r respBuf
		req := ReqNotifyCq{}
		Write(fd, "T", IB_USER_VERBS_CMD_REQ_NOTIFY_CQ, &req, unsafe.Pointer(&r), unsafe.Sizeof(r))
	}, func() {
		req := ReqNotifyCq{}
		Write(fd, "T", IB_USER_VERBS_CMD_REQ_NOTIFY_CQ, &req, nil, 0)
	})
}

func TestIoctlBuffersEscape(t *testing.T) {
	fd := NewFD(-1)
	call := func(out, keep unsafe.Pointer) {
		var r Ioctl
		r.Init("T", 1, 1, 0)
		if out != nil {
			r.Out(1, out, unsafe.Sizeof(respBuf{}))
		}
		if keep != nil {
			r.Keep(keep)
		}
		r.Do(fd)
	}
	oneMore(t, "Ioctl.Out", func() {
		var b respBuf
		call(unsafe.Pointer(&b), nil)
	}, func() { call(nil, nil) })
	oneMore(t, "Ioctl.Keep", func() {
		var b respBuf
		call(nil, unsafe.Pointer(&b))
	}, func() { call(nil, nil) })
}
