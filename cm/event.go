package cm

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/uverbs"
	"github.com/goverbs/goverbs/verbs"
)

// EventType is the type of a connection manager event (enum
// rdma_cm_event_type).
type EventType uint32

// Connection manager events.
const (
	EventAddrResolved    EventType = 0
	EventAddrError       EventType = 1
	EventRouteResolved   EventType = 2
	EventRouteError      EventType = 3
	EventConnectRequest  EventType = 4
	EventConnectResponse EventType = 5
	EventConnectError    EventType = 6
	EventUnreachable     EventType = 7
	EventRejected        EventType = 8
	EventEstablished     EventType = 9
	EventDisconnected    EventType = 10
	EventDeviceRemoval   EventType = 11
	EventMulticastJoin   EventType = 12
	EventMulticastError  EventType = 13
	EventAddrChange      EventType = 14
	EventTimewaitExit    EventType = 15
)

var eventNames = [...]string{
	"RDMA_CM_EVENT_ADDR_RESOLVED", "RDMA_CM_EVENT_ADDR_ERROR", "RDMA_CM_EVENT_ROUTE_RESOLVED",
	"RDMA_CM_EVENT_ROUTE_ERROR", "RDMA_CM_EVENT_CONNECT_REQUEST", "RDMA_CM_EVENT_CONNECT_RESPONSE",
	"RDMA_CM_EVENT_CONNECT_ERROR", "RDMA_CM_EVENT_UNREACHABLE", "RDMA_CM_EVENT_REJECTED",
	"RDMA_CM_EVENT_ESTABLISHED", "RDMA_CM_EVENT_DISCONNECTED", "RDMA_CM_EVENT_DEVICE_REMOVAL",
	"RDMA_CM_EVENT_MULTICAST_JOIN", "RDMA_CM_EVENT_MULTICAST_ERROR", "RDMA_CM_EVENT_ADDR_CHANGE",
	"RDMA_CM_EVENT_TIMEWAIT_EXIT",
}

// String returns librdmacm's name for the event (rdma_event_str).
func (t EventType) String() string {
	if int(t) < len(eventNames) {
		return eventNames[t]
	}
	return "UNKNOWN EVENT"
}

// ConnParam are the connection parameters of CONNECT and ACCEPT, and what
// the peer sent in a connect request or response.
type ConnParam struct {
	// PrivateData travels with the CM message. Sent as given (at most 56
	// bytes on connect, 196 on accept, 148 on reject over IP); received
	// zero-padded to the CM message's full size, so applications frame
	// their own length: see EncodePrivateData.
	PrivateData []byte
	// The read depths: RDMA reads/atomics the peer may have outstanding
	// at us, and we at the peer. MaxRDAtomic asks for the device's
	// maximum; on a TCP ID a value above that maximum fails with
	// unix.EINVAL, as librdmacm refuses it (ucma_valid_param).
	ResponderResources uint8
	InitiatorDepth     uint8
	FlowControl        uint8
	RetryCount         uint8 // transport retries (default 7)
	RNRRetryCount      uint8 // RNR retries (default 7: infinite)
	SRQ                bool  // the QP receives from an SRQ
	QPNum              uint32
	QKey               uint32 // UD
	// Exact sends every value as given. Otherwise zero fields get
	// librdmacm's defaults for a NULL conn_param: the read depths of the
	// peer's request (Accept) or the device's maximum (Connect), 7
	// transport retries and 7 (infinite) RNR retries.
	Exact bool
	// MinRNRTimer (RC on InfiniBand and RoCE) is how long the peer is
	// told to wait before it retries a SEND that found no receive
	// posted here, rounded up to the IB table's next value
	// (qp.RNRTimerCode). 0 means qp.DefaultMinRNRTimer (0.64 ms), Exact
	// or not: the kernel's connection manager would set 655.36 ms, so
	// that every receive-not-ready cost the peer's SEND two thirds of a
	// second. It is this side's QP attribute, set as Connect or Accept
	// moves the QP to RTR; it is not sent, and received events carry 0.
	MinRNRTimer time.Duration
}

// UDParam is what a UD (PS_UDP) connection request or establishment
// carries: the peer's QP, its Q_Key and the address to reach it.
type UDParam struct {
	QPNum       uint32
	QKey        uint32
	AH          verbs.AHAttr
	PrivateData []byte
}

// Event is a connection manager event.
type Event struct {
	Type   EventType
	Status int // 0, or a negative errno, or the reject reason for EventRejected
	// ID is the ID the event is about. For EventConnectRequest it is a
	// new ID for the incoming connection, and Listener the listening ID.
	ID       *ID
	Listener *ID
	Conn     ConnParam // connected port spaces
	UD       UDParam   // PS_UDP
	// Group is the multicast group an EventMulticastJoin or
	// EventMulticastError is about (ID.JoinMulticast).
	Group netip.Addr

	mc *mcGroup
}

// Err returns an error for events that report failure, nil otherwise.
func (e *Event) Err() error {
	switch e.Type {
	case EventAddrResolved, EventRouteResolved, EventConnectRequest, EventConnectResponse,
		EventEstablished, EventMulticastJoin, EventTimewaitExit:
		if e.Status == 0 {
			return nil
		}
	}
	return &EventError{Event: e.Type, Status: e.Status}
}

// EventError reports a failed connection step: the event that signalled
// it and its status.
type EventError struct {
	Event  EventType
	Status int
}

// Error names the event and its status: "RDMA_CM_EVENT_REJECTED: rejected:
// invalid service ID (reason 8: nothing listens on that address and port)",
// "RDMA_CM_EVENT_UNREACHABLE: connection timed out". It does not begin
// with "cm: ": the cm functions that return an EventError wrap it with
// what they were doing ("cm: connect: RDMA_CM_EVENT_REJECTED: ...").
func (e *EventError) Error() string {
	s := e.Event.String()
	switch {
	case e.Event == EventRejected && e.Status > 0:
		s += ": rejected: " + RejectReason(e.Status).String()
	case e.Event == EventRejected && e.Status < 0:
		s += ": rejected: " + errnoString(-e.Status)
	case e.Status < 0:
		s += ": " + errnoString(-e.Status)
	case e.Status != 0:
		s += ": status " + strconv.Itoa(e.Status)
	}
	return s
}

// Reason returns the reject reason of an EventRejected from an InfiniBand
// or RoCE peer (its Status), and 0 for any other event. (On iWARP the
// Status of EventRejected is a negative errno, -ECONNREFUSED or
// -ECONNRESET.)
func (e *EventError) Reason() RejectReason {
	if e.Event != EventRejected || e.Status <= 0 {
		return 0
	}
	return RejectReason(e.Status)
}

// Is makes errors.Is(err, ErrRejected) and friends hold.
func (e *EventError) Is(target error) bool {
	switch target {
	case ErrRejected:
		return e.Event == EventRejected
	case ErrUnreachable:
		return e.Event == EventUnreachable || e.Event == EventAddrError || e.Event == EventRouteError || e.Event == EventConnectError
	case ErrDisconnected:
		return e.Event == EventDisconnected || e.Event == EventDeviceRemoval
	}
	return false
}

// Sentinel errors matched by errors.Is on an *EventError.
var (
	ErrRejected     = errors.New("connection rejected")
	ErrUnreachable  = errors.New("peer unreachable")
	ErrDisconnected = errors.New("disconnected")
)

// Kernel sizes of the private data a message delivers (fact sheet §7.2).
const (
	MaxConnectPrivateData = 56  // CM REQ over IP
	MaxAcceptPrivateData  = 196 // CM REP
	MaxRejectPrivateData  = 148 // CM REJ
	MaxUDPrivateData      = 180 // SIDR REQ over IP (216 - 36)
)

// EncodePrivateData frames payload with goverbs' one-byte length prefix,
// so the receiver can tell it from the kernel's zero padding. It is a
// convention between goverbs peers; C peers (rping, librpma) frame their
// own private data.
func EncodePrivateData(payload []byte) ([]byte, error) {
	if len(payload) > 255 {
		return nil, fmt.Errorf("cm: private data of %d bytes", len(payload))
	}
	return append([]byte{byte(len(payload))}, payload...), nil
}

// DecodePrivateData undoes EncodePrivateData on received private data.
func DecodePrivateData(raw []byte) ([]byte, error) {
	if len(raw) == 0 || int(raw[0]) > len(raw)-1 {
		return nil, errors.New("cm: private data not framed by EncodePrivateData")
	}
	return raw[1 : 1+int(raw[0])], nil
}

// decodeEvent turns the kernel's event into an Event, without resolving
// IDs. ud selects the UD layout of the parameter union.
func decodeEvent(r *uverbs.UcmEventResp, ud bool) Event {
	e := Event{Type: EventType(r.Event), Status: int(int32(r.Status))}
	if ud {
		p := (*uverbs.UcmUdParam)(unsafe.Pointer(&r.Param[0]))
		n := min(int(p.Private_data_len), len(p.Private_data))
		e.UD = UDParam{QPNum: p.Qp_num, QKey: p.Qkey, AH: ahAttr(&p.Ah_attr), PrivateData: append([]byte(nil), p.Private_data[:n]...)}
		return e
	}
	p := (*uverbs.UcmConnParam)(unsafe.Pointer(&r.Param[0]))
	n := min(int(p.Private_data_len), len(p.Private_data))
	e.Conn = ConnParam{
		PrivateData:        append([]byte(nil), p.Private_data[:n]...),
		ResponderResources: p.Responder_resources, InitiatorDepth: p.Initiator_depth,
		FlowControl: p.Flow_control, RetryCount: p.Retry_count, RNRRetryCount: p.Rnr_retry_count,
		SRQ: p.Srq != 0, QPNum: p.Qp_num, QKey: p.Qkey,
	}
	return e
}

// parseEvent decodes raw bytes of a struct rdma_ucm_event_resp, for the
// fuzzer: short input is an error, never a panic.
func parseEvent(b []byte, ud bool) (Event, uint64, uint32, error) {
	var r uverbs.UcmEventResp
	if len(b) < int(unsafe.Sizeof(r)) {
		return Event{}, 0, 0, fmt.Errorf("cm: event of %d bytes", len(b))
	}
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&r)), unsafe.Sizeof(r)), b)
	return decodeEvent(&r, ud), r.Uid, r.Id, nil
}

func ahAttr(a *uverbs.AhAttr) verbs.AHAttr {
	return verbs.AHAttr{
		GRH: verbs.GlobalRoute{DGID: a.Grh.Dgid, FlowLabel: a.Grh.Flow_label, SGIDIndex: a.Grh.Sgid_index,
			HopLimit: a.Grh.Hop_limit, TrafficClass: a.Grh.Traffic_class},
		DLID: a.Dlid, SL: a.Sl, SrcPathBits: a.Src_path_bits, StaticRate: a.Static_rate,
		IsGlobal: a.Is_global != 0, Port: a.Port_num,
	}
}

func errnoString(n int) string { return unix.Errno(n).Error() }
