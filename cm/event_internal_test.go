package cm

import (
	"testing"
	"unsafe"

	"github.com/goverbs/goverbs/uverbs"
)

func TestParseEvent(t *testing.T) {
	var r uverbs.UcmEventResp
	r.Uid, r.Id, r.Event, r.Status = 0x1111, 2, uint32(EventRejected), 28
	p := (*uverbs.UcmConnParam)(unsafe.Pointer(&r.Param[0]))
	p.Private_data_len = 148
	copy(p.Private_data[:], "no-thanks")
	b := unsafe.Slice((*byte)(unsafe.Pointer(&r)), unsafe.Sizeof(r))
	ev, uid, id, err := parseEvent(b, false)
	if err != nil || uid != 0x1111 || id != 2 || ev.Type != EventRejected || ev.Status != 28 ||
		len(ev.Conn.PrivateData) != 148 || string(ev.Conn.PrivateData[:9]) != "no-thanks" {
		t.Fatalf("%+v %d %d %v", ev, uid, id, err)
	}
	if err := ev.Err(); err == nil || err.Error() != "cm: RDMA_CM_EVENT_REJECTED: rejected, reason 28" {
		t.Fatalf("error %v", err)
	}
	if _, _, _, err := parseEvent(b[:100], false); err == nil {
		t.Fatal("short event parsed")
	}
}

// FuzzEvent: any bytes the kernel could hand back decode without panic,
// with private data never longer than the kernel's buffer.
func FuzzEvent(f *testing.F) {
	var r uverbs.UcmEventResp
	f.Add(unsafe.Slice((*byte)(unsafe.Pointer(&r)), unsafe.Sizeof(r)), false)
	f.Fuzz(func(t *testing.T, b []byte, ud bool) {
		ev, _, _, err := parseEvent(b, ud)
		if err != nil {
			return
		}
		if len(ev.Conn.PrivateData) > 256 || len(ev.UD.PrivateData) > 256 {
			t.Fatal("private data longer than the kernel's buffer")
		}
		_ = ev.Type.String()
		_ = ev.Err()
	})
}
