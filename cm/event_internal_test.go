package cm

import (
	"errors"
	"fmt"
	"strings"
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
	if err := ev.Err(); err == nil || err.Error() != "RDMA_CM_EVENT_REJECTED: rejected: consumer defined (reason 28: the peer's application refused the request)" {
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

// The text of a failed step names the event once, the reject reason by
// the kernel's name, and says "cm:" once when wrapped by an operation.
func TestEventErrorText(t *testing.T) {
	for _, tc := range []struct {
		err  EventError
		want string
	}{
		{EventError{EventRejected, 8}, "RDMA_CM_EVENT_REJECTED: rejected: invalid service ID (reason 8: nothing listens on that address and port)"},
		{EventError{EventRejected, 26}, "RDMA_CM_EVENT_REJECTED: rejected: invalid MTU (reason 26)"},
		{EventError{EventRejected, 34}, "RDMA_CM_EVENT_REJECTED: rejected: unrecognized reason (reason 34)"},
		{EventError{EventRejected, -111}, "RDMA_CM_EVENT_REJECTED: rejected: connection refused"},
		{EventError{EventUnreachable, -110}, "RDMA_CM_EVENT_UNREACHABLE: connection timed out"},
		{EventError{EventDisconnected, 0}, "RDMA_CM_EVENT_DISCONNECTED"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.err, got, tc.want)
		}
	}
	wrapped := fmt.Errorf("cm: connect: %w", &EventError{EventRejected, 8})
	if strings.Count(wrapped.Error(), "cm:") != 1 {
		t.Errorf("%q repeats cm:", wrapped)
	}
	if r := (&EventError{EventRejected, 8}).Reason(); r != RejectInvalidServiceID {
		t.Errorf("reason %d", r)
	}
	if r := (&EventError{EventRejected, -111}).Reason(); r != 0 {
		t.Errorf("iWARP reject reason %d, want 0", r)
	}
}

// Done closes on the event that ends a connection, once, with that
// event's error; events that do not end it leave it open.
func TestDoneOnEvents(t *testing.T) {
	id := &ID{notify: make(chan struct{}, 1)}
	done := id.Done()
	id.deliver(Event{Type: EventEstablished})
	select {
	case <-done:
		t.Fatal("Done closed by ESTABLISHED")
	default:
	}
	if id.Err() != nil {
		t.Fatalf("Err %v before the end", id.Err())
	}
	id.deliver(Event{Type: EventDisconnected})
	id.deliver(Event{Type: EventTimewaitExit})
	<-done
	if err := id.Err(); !errors.Is(err, ErrDisconnected) {
		t.Fatalf("Err %v, want ErrDisconnected", err)
	}
	// A Done asked for after the end is closed already.
	late := &ID{notify: make(chan struct{}, 1)}
	late.deliver(Event{Type: EventRejected, Status: 28})
	<-late.Done()
	if err := late.Err(); !errors.Is(err, ErrRejected) {
		t.Fatalf("Err %v, want ErrRejected", err)
	}
}
