package uverbs

import (
	"encoding/binary"
	"errors"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// le builds little-endian byte strings from a list of (width, value) pairs.
func le(fields ...uint64) []byte {
	var b []byte
	for i := 0; i < len(fields); i += 2 {
		switch fields[i] {
		case 1:
			b = append(b, byte(fields[i+1]))
		case 2:
			b = binary.LittleEndian.AppendUint16(b, uint16(fields[i+1]))
		case 4:
			b = binary.LittleEndian.AppendUint32(b, uint32(fields[i+1]))
		case 8:
			b = binary.LittleEndian.AppendUint64(b, fields[i+1])
		default:
			panic("bad width")
		}
	}
	return b
}

func hdr(length, object, method, numAttrs uint64, driver uint64) []byte {
	return le(2, length, 2, object, 2, method, 2, numAttrs, 8, 0, 4, driver, 4, 0)
}

func attr(id, length, flags, data uint64) []byte {
	return le(2, id, 2, length, 2, flags, 2, 0, 8, data)
}

// Fact sheet §10: GET_CONTEXT as rdma-core sends it.
func TestIoctlGetContextBytes(t *testing.T) {
	var numVectors uint32
	var coreSupport uint64
	var r Ioctl
	r.Init("DEVICE.GET_CONTEXT", UVERBS_OBJECT_DEVICE, UVERBS_METHOD_GET_CONTEXT, RDMA_DRIVER_RXE)
	r.Out(UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS, unsafe.Pointer(&numVectors), 4)
	r.Out(UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT, unsafe.Pointer(&coreSupport), 8)

	want := append(hdr(56, 0, 3, 2, 14),
		append(attr(0, 4, 1, uint64(uintptr(unsafe.Pointer(&numVectors)))),
			attr(1, 8, 1, uint64(uintptr(unsafe.Pointer(&coreSupport))))...)...)
	if diff := cmp.Diff(want, r.Bytes()); diff != "" {
		t.Fatalf("GET_CONTEXT bytes (-want +got):\n%s", diff)
	}
}

// Fact sheet §10: CREATE_CQ with 8 attributes, length 152, inline CQE and
// USER_HANDLE, an optional EVENT_FD and a 16-byte UHW_OUT.
func TestIoctlCreateCQBytes(t *testing.T) {
	var respCQE uint32
	var mminfo RxeMminfo
	const userHandle, channelFD, asyncFD = 0x5555deadbeef, 7, 5
	var r Ioctl
	r.Init("CQ.CREATE", UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_CREATE, RDMA_DRIVER_RXE)
	h := r.NewHandle(UVERBS_ATTR_CREATE_CQ_HANDLE)
	r.Out(UVERBS_ATTR_CREATE_CQ_RESP_CQE, unsafe.Pointer(&respCQE), 4)
	r.U32(UVERBS_ATTR_CREATE_CQ_CQE, 8)
	r.U64(UVERBS_ATTR_CREATE_CQ_USER_HANDLE, userHandle)
	r.FD(UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL, channelFD)
	r.U32(UVERBS_ATTR_CREATE_CQ_COMP_VECTOR, 0)
	r.Optional(r.FD(UVERBS_ATTR_CREATE_CQ_EVENT_FD, asyncFD))
	r.Out(UVERBS_ATTR_UHW_OUT, unsafe.Pointer(&mminfo), unsafe.Sizeof(mminfo))

	var want []byte
	want = append(want, hdr(152, 3, 0, 8, 14)...)
	want = append(want, attr(0, 0, 1, 0)...)
	want = append(want, attr(6, 4, 1, uint64(uintptr(unsafe.Pointer(&respCQE))))...)
	want = append(want, attr(1, 4, 1, 8)...)
	want = append(want, attr(2, 8, 1, userHandle)...)
	want = append(want, attr(3, 0, 1, channelFD)...)
	want = append(want, attr(4, 4, 1, 0)...)
	want = append(want, attr(7, 0, 0, asyncFD)...)
	want = append(want, attr(0x1001, 16, 1, uint64(uintptr(unsafe.Pointer(&mminfo))))...)
	if diff := cmp.Diff(want, r.Bytes()); diff != "" {
		t.Fatalf("CREATE_CQ bytes (-want +got):\n%s", diff)
	}
	if h != 0 || r.Len() != 152 {
		t.Fatalf("handle index %d, length %d", h, r.Len())
	}
}

// Inputs of 8 bytes or less travel inline; larger ones by address.
func TestIoctlInInlineVersusPointer(t *testing.T) {
	small := [4]byte{1, 2, 3, 4}
	big := [20]byte{9}
	var r Ioctl
	r.Init("test", 0, 0, 0)
	i := r.In(1, unsafe.Pointer(&small), 4)
	j := r.In(2, unsafe.Pointer(&big), 20)
	if got := r.Data(i); got != 0x04030201 {
		t.Errorf("inline data = %#x", got)
	}
	if got := r.Data(j); got != uint64(uintptr(unsafe.Pointer(&big))) {
		t.Errorf("pointer data = %#x", got)
	}
}

func TestIoctlTooManyAttrs(t *testing.T) {
	var r Ioctl
	r.Init("CQ.CREATE", 3, 0, 14)
	for i := 0; i < MaxAttrs+1; i++ {
		r.U32(uint16(i), 0)
	}
	err := r.Do(nil)
	if !errors.Is(err, unix.E2BIG) {
		t.Fatalf("Do with %d attrs: %v, want E2BIG", MaxAttrs+1, err)
	}
}

func TestIoctlClosedFD(t *testing.T) {
	var r Ioctl
	r.Init("PD.DESTROY", UVERBS_OBJECT_PD, UVERBS_METHOD_PD_DESTROY, RDMA_DRIVER_RXE)
	r.Handle(UVERBS_ATTR_DESTROY_PD_HANDLE, 0)
	fd := NewFD(-1)
	err := r.Do(fd)
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("Do on closed fd: %v", err)
	}
	var op *OpError
	if !errors.As(err, &op) || op.Op != "PD.DESTROY" {
		t.Fatalf("error %v does not name the operation", err)
	}
}

// An ioctl on something that is not a uverbs device fails with the kernel's
// errno, wrapped with the operation's name.
func TestIoctlNotUverbs(t *testing.T) {
	raw, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	fd := NewFD(raw)
	defer fd.Close()
	var r Ioctl
	r.Init("DEVICE.GET_CONTEXT", UVERBS_OBJECT_DEVICE, UVERBS_METHOD_GET_CONTEXT, RDMA_DRIVER_RXE)
	err = r.Do(fd)
	if !errors.Is(err, unix.ENOTTY) {
		t.Fatalf("GET_CONTEXT on /dev/null: %v, want ENOTTY", err)
	}
	if got, want := err.Error(), "uverbs: DEVICE.GET_CONTEXT: inappropriate ioctl for device"; got != want {
		t.Fatalf("error text %q, want %q", got, want)
	}
}

// Fact sheet §10: the POST_SEND doorbell, 32 bytes.
func TestDoorbellBytes(t *testing.T) {
	d := NewDoorbell(0x2a)
	want := le(4, 28, 2, 8, 2, 1, 8, uint64(uintptr(unsafe.Pointer(&d.resp))), 4, 0x2a, 4, 0, 4, 0, 4, 128)
	if diff := cmp.Diff(want, d.Bytes()); diff != "" {
		t.Fatalf("doorbell bytes (-want +got):\n%s", diff)
	}
}

// Fact sheet §10: REQ_NOTIFY_CQ, CREATE_COMP_CHANNEL and ALLOC_PD as raw
// write() commands.
func TestWriteBytes(t *testing.T) {
	var resp uint32
	addr := uint64(uintptr(unsafe.Pointer(&resp)))
	for _, tc := range []struct {
		name string
		got  []byte
		want []byte
	}{
		{"REQ_NOTIFY_CQ", EncodeWrite(IB_USER_VERBS_CMD_REQ_NOTIFY_CQ, &ReqNotifyCq{Cq_handle: 3, Solicited_only: 1}, 0),
			le(4, 0x17, 2, 4, 2, 0, 4, 3, 4, 1)},
		{"CREATE_COMP_CHANNEL", EncodeWrite(IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL, &CreateCompChannel{Response: addr}, 4),
			le(4, 0x11, 2, 4, 2, 1, 8, addr)},
		{"ALLOC_PD", EncodeWrite(IB_USER_VERBS_CMD_ALLOC_PD, &AllocPd{Response: addr}, 4),
			le(4, 0x03, 2, 4, 2, 1, 8, addr)},
	} {
		if diff := cmp.Diff(tc.want, tc.got); diff != "" {
			t.Errorf("%s bytes (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestOpErrorUnwrap(t *testing.T) {
	err := wrap("REG_MR", unix.EFAULT)
	if !errors.Is(err, unix.EFAULT) || err.Error() != "uverbs: REG_MR: bad address" {
		t.Fatalf("got %v", err)
	}
	if wrap("x", nil) != nil || wrap("x", unix.Errno(0)) != nil {
		t.Fatal("nil errors must stay nil")
	}
}

// Fact sheet §7.1: rdma_cm commands carry in = the command struct's size.
func TestUcmaBytes(t *testing.T) {
	var resp UcmCreateIDResp
	addr := uint64(uintptr(unsafe.Pointer(&resp)))
	got := EncodeUcma(RDMA_USER_CM_CMD_CREATE_ID, &UcmCreateID{Uid: 0x1111, Response: addr, Ps: RDMA_PS_TCP, Type: 2}, 4)
	want := le(4, 0, 2, 24, 2, 4, 8, 0x1111, 8, addr, 2, 0x106, 1, 2, 1, 0, 4, 0)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("CREATE_ID bytes (-want +got):\n%s", diff)
	}
	got = EncodeUcma(RDMA_USER_CM_CMD_DISCONNECT, &UcmDisconnect{Id: 7}, 0)
	if diff := cmp.Diff(le(4, 10, 2, 4, 2, 0, 4, 7), got); diff != "" {
		t.Fatalf("DISCONNECT bytes (-want +got):\n%s", diff)
	}
}
