package verbs

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"unsafe"

	"github.com/goverbs/goverbs/uverbs"
)

// EventType is the type of an asynchronous event (enum ibv_event_type).
type EventType uint32

// Asynchronous event types.
const (
	EventCQErr            EventType = 0
	EventQPFatal          EventType = 1
	EventQPReqErr         EventType = 2
	EventQPAccessErr      EventType = 3
	EventCommEst          EventType = 4
	EventSQDrained        EventType = 5
	EventPathMig          EventType = 6
	EventPathMigErr       EventType = 7
	EventDeviceFatal      EventType = 8
	EventPortActive       EventType = 9
	EventPortErr          EventType = 10
	EventLIDChange        EventType = 11
	EventPkeyChange       EventType = 12
	EventSMChange         EventType = 13
	EventSRQErr           EventType = 14
	EventSRQLimitReached  EventType = 15
	EventQPLastWQEReached EventType = 16
	EventClientReregister EventType = 17
	EventGIDChange        EventType = 18
	EventWQFatal          EventType = 19
)

var eventNames = [...]string{
	"CQ error", "local work queue catastrophic error", "invalid request local work queue error",
	"local access violation work queue error", "communication established", "send queue drained",
	"path migrated", "path migration request error", "local catastrophic error", "port active",
	"port error", "LID change", "P_Key change", "SM change", "SRQ catastrophic error",
	"SRQ limit reached", "last WQE reached", "client reregistration", "GID table change", "WQ fatal",
}

// String returns libibverbs' text for the event (ibv_event_type_str).
func (t EventType) String() string {
	if int(t) < len(eventNames) {
		return eventNames[t]
	}
	return "unknown"
}

// Subject is what an event is about.
type Subject int

// Event subjects.
const (
	SubjectCQ Subject = iota
	SubjectQP
	SubjectSRQ
	SubjectPort
	SubjectDevice
	SubjectWQ
)

// Subject tells what kind of element the event's Element names.
func (t EventType) Subject() Subject {
	switch t {
	case EventCQErr:
		return SubjectCQ
	case EventSRQErr, EventSRQLimitReached:
		return SubjectSRQ
	case EventPortActive, EventPortErr, EventLIDChange, EventPkeyChange, EventSMChange,
		EventClientReregister, EventGIDChange:
		return SubjectPort
	case EventDeviceFatal:
		return SubjectDevice
	case EventWQFatal:
		return SubjectWQ
	}
	return SubjectQP
}

// AsyncEvent is an asynchronous event of a Context.
type AsyncEvent struct {
	Type EventType
	// Element is the user handle of the CQ, QP or SRQ the event is about
	// (the UserHandle of that cq.CQ, qp.QP or srq.SRQ), or the port number.
	Element uint64
	// Object is the goverbs object the event is about (a *cq.CQ, *qp.QP,
	// *srq.SRQ), or nil for port and device events and for objects already
	// closed.
	Object io.Closer
}

// Port returns the port number of a port event.
func (e AsyncEvent) Port() int { return int(e.Element) }

func (e AsyncEvent) String() string {
	return e.Type.String() + " (" + strconv.Itoa(int(e.Type)) + ") on element " + strconv.FormatUint(e.Element, 10)
}

// Event waits for the next asynchronous event of the context (CQ overrun,
// QP errors, SRQ limit, port changes, …) and returns it. It parks on Go's
// netpoller and returns ctx.Err() when ctx ends first. Events are queued by
// the kernel until read; read them from one goroutine.
func (c *Context) Event(ctx context.Context) (AsyncEvent, error) {
	if err := c.checkOpen(); err != nil {
		return AsyncEvent{}, fmt.Errorf("verbs: event: %w", err)
	}
	var d uverbs.AsyncEventDesc
	n, err := c.async.Read(ctx, unsafe.Slice((*byte)(unsafe.Pointer(&d)), unsafe.Sizeof(d)))
	if err != nil {
		return AsyncEvent{}, fmt.Errorf("verbs: event: %w", err)
	}
	if n != int(unsafe.Sizeof(d)) {
		return AsyncEvent{}, fmt.Errorf("verbs: event: short read of %d bytes", n)
	}
	e := AsyncEvent{Type: EventType(d.Type), Element: d.Element}
	if s := e.Type.Subject(); s == SubjectCQ || s == SubjectQP || s == SubjectSRQ {
		e.Object = c.k.Object(d.Element)
	}
	return e, nil
}
