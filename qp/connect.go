package qp

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/verbs"
)

// ConnectOptions tune QP.Connect. The zero value is the common case: every
// zero field takes the default its comment names. The ACK timeout and the
// transport retries are finite, so a dead peer fails the QP's sends
// instead of stalling them; the one default without an end is
// RNRRetryCount's, RNRRetryForever: a SEND waits for as long as the peer
// takes to post a receive, as in ibv_rc_pingpong, perftest and rdma_cm
// programs. The values that wait forever have names that say so
// (NoAckTimeout, RNRRetryForever); a zero is never one of them.
type ConnectOptions struct {
	// Port is the local port, numbered from 1; 0 means 1.
	Port int
	// Path replaces the path Connect builds: on RoCE a global route
	// from the port's routable GID (verbs.Context.RoutableGID) to the
	// peer's GID with hop limit verbs.DefaultHopLimit, on InfiniBand the
	// peer's LID. Set it for another source GID, a traffic class or a
	// service level.
	Path *verbs.AHAttr
	// Access is what remote operations the QP accepts; the memory
	// region's rkey still decides where. 0 means mr.RemoteWrite |
	// mr.RemoteRead | mr.RemoteAtomic (UC: mr.RemoteWrite, all UC
	// allows). mr.LocalWrite alone grants nothing remote.
	Access mr.Access
	// MTU is the path MTU; 0 means the smaller of the port's active MTU
	// and the peer's (PeerInfo.MTU, when set).
	MTU verbs.MTU
	// AckTimeout (RC) is how long the QP waits for an acknowledgement
	// before it sends again; the device rounds it up to 4.096 µs × 2^n.
	// 0 means DefaultAckTimeout; NoAckTimeout waits forever.
	AckTimeout time.Duration
	// RetryCount (RC) is how often a send is retried after an ACK
	// timeout before its work request fails with
	// verbs.WCRetryExcErr: 1 to 7; 0 means DefaultRetryCount; a negative
	// value means none (fail at the first timeout).
	RetryCount int
	// RNRRetryCount (RC) is how often a SEND that found no receive
	// posted at the peer is retried before it fails with
	// verbs.WCRNRRetryExcErr: 1 to 6, or RNRRetryForever; 0 means
	// RNRRetryForever (the default of ibv_rc_pingpong, perftest and
	// rdma_cm programs: the SEND waits as long as the peer takes to
	// post a receive); a negative value means none.
	RNRRetryCount int
	// MinRNRTimer (RC) is how long the peer is told to wait before it
	// retries a SEND that found no receive posted here, rounded up to
	// the IB table's next value (RNRTimerCode); 0 means
	// DefaultMinRNRTimer.
	MinRNRTimer time.Duration
	// MaxRDAtomic (RC) is how many RDMA reads and atomics this QP may
	// have outstanding at the peer, at most the peer's MaxDestRDAtomic;
	// MaxDestRDAtomic how many the peer may have outstanding here. 0
	// means 1, the default of ibv_rc_pingpong and pyverbs; raise both
	// ends together for pipelined reads (the device's limits are
	// verbs.DeviceAttr.MaxQPInitRDAtomic and MaxQPRDAtomic).
	MaxRDAtomic     int
	MaxDestRDAtomic int
}

// Defaults of ConnectOptions.
const (
	// DefaultAckTimeout is 4.096 µs × 2^14 ≈ 67 ms, ibv_rc_pingpong's
	// timeout 14.
	DefaultAckTimeout = 4096 * time.Nanosecond << 14
	// NoAckTimeout is an AckTimeout that never ends (the IB attribute
	// value 0): a lost packet or a dead peer then stalls the QP's sends
	// for good instead of failing them. Connect never picks it itself.
	NoAckTimeout time.Duration = -1
	// DefaultRetryCount is 7 transport retries, the most there are.
	DefaultRetryCount = 7
	// RNRRetryForever is the RNR retry count that never gives up (the IB
	// value 7).
	RNRRetryForever = 7
	// DefaultMinRNRTimer is 0.64 ms (RNR timer code 12), ibv_rc_pingpong's.
	// The IB attribute's zero value means 655.36 ms, the longest there
	// is, which is what the kernel's connection manager sets
	// (package cm overrides it with this default too).
	DefaultMinRNRTimer = 640 * time.Microsecond
)

// Connect connects q, in RESET, to the peer's QP, described by peer (QP.PeerInfo of the
// peer's QP) and moves it through INIT and RTR to RTS: the three
// transitions of ToInit, ToRTR and ToRTS with the attributes opts
// describes, defaults filled in. It is for RC and UC QPs on InfiniBand and
// RoCE; iWARP QPs connect only through rdma_cm (package cm), UD QPs have no
// peer. Both ends call Connect with the other's PeerInfo; a QP may be
// connected to its own PeerInfo (a loopback).
//
// On failure the QP goes back to RESET (so Connect may be tried again) and
// the error says which transition failed. ToInit, ToRTR and ToRTS remain
// for every attribute Connect does not cover.
func (q *QP) Connect(peer PeerInfo, opts ConnectOptions) error {
	if q.isClosed() {
		return fmt.Errorf("qp: connect: %w", verbs.ErrClosed)
	}
	typ := q.Type()
	if typ != RC && typ != UC {
		return fmt.Errorf("qp: connect: a %s QP has no peer to connect to: %w", typ, unix.EINVAL)
	}
	dev := q.PD().Context()
	if dev.Device().NodeType.Transport() == verbs.TransportIWARP {
		return fmt.Errorf("qp: connect: iWARP QPs connect only through rdma_cm (package cm): %w", verbs.ErrNotCapable)
	}
	if s := q.State(); s != Reset {
		return fmt.Errorf("qp: connect: the QP is in %s, not RESET: %w", s, unix.EINVAL)
	}
	a, err := q.connectAttrs(dev, peer, opts)
	if err != nil {
		return fmt.Errorf("qp: connect: %w", err)
	}
	if err := q.ToInit(a.init); err != nil {
		return q.undoConnect(err)
	}
	if err := q.ToRTR(a.rtr); err != nil {
		return q.undoConnect(err)
	}
	if err := q.ToRTS(a.rts); err != nil {
		return q.undoConnect(err)
	}
	return nil
}

// undoConnect moves a QP whose Connect failed half-way back to RESET and
// returns err, the failed transition's error (which names the QP and the
// transition already).
func (q *QP) undoConnect(err error) error {
	if rerr := q.ToReset(); rerr != nil && !errors.Is(rerr, verbs.ErrClosed) {
		return fmt.Errorf("%w (and back to RESET: %v)", err, rerr)
	}
	return err
}

// connectAttrs are the attributes of Connect's three transitions.
type connectAttrs struct {
	init InitAttr
	rtr  RTRAttr
	rts  RTSAttr
}

// connectAttrs fills in opts' defaults and checks its ranges.
func (q *QP) connectAttrs(dev *verbs.Context, peer PeerInfo, o ConnectOptions) (connectAttrs, error) {
	var a connectAttrs
	port := o.Port
	if port == 0 {
		port = 1
	}
	pa, err := dev.QueryPort(port)
	if err != nil {
		return a, err
	}
	if o.Path != nil {
		a.rtr.Path = *o.Path
	} else if pa.LinkLayer == verbs.LinkLayerEthernet {
		if peer.GID == (verbs.GID{}) {
			return a, fmt.Errorf("the peer's PeerInfo has no GID, which RoCE routes by: %w", unix.EINVAL)
		}
		src, err := dev.RoutableGID(port)
		if err != nil {
			return a, err
		}
		a.rtr.Path = src.PathTo(peer.GID)
	} else {
		if peer.LID == 0 {
			return a, fmt.Errorf("the peer's PeerInfo has no LID, which InfiniBand routes by: %w", unix.EINVAL)
		}
		a.rtr.Path = verbs.AHAttr{DLID: peer.LID, Port: uint8(port)}
	}
	a.rtr.MTU = o.MTU
	if a.rtr.MTU == 0 {
		a.rtr.MTU = pa.ActiveMTU
		if peer.MTU != 0 && peer.MTU < a.rtr.MTU {
			a.rtr.MTU = peer.MTU
		}
	}
	a.rtr.DestQPN, a.rtr.RQPSN = peer.QPN, peer.PSN&0xffffff
	a.rts.SQPSN = q.startPSN()
	a.init = InitAttr{Port: uint8(port), Access: o.Access}
	if a.init.Access == 0 {
		a.init.Access = mr.RemoteWrite | mr.RemoteRead | mr.RemoteAtomic
		if q.Type() == UC {
			a.init.Access = mr.RemoteWrite
		}
	}
	if q.Type() != RC {
		return a, nil
	}
	return a, o.rcAttrs(&a)
}

// rcAttrs sets the RC attributes of a from o, defaults filled in.
func (o *ConnectOptions) rcAttrs(a *connectAttrs) error {
	var err error
	if a.rts.Timeout, err = ackTimeoutOption(o.AckTimeout); err != nil {
		return err
	}
	if a.rts.RetryCnt, err = countOption("RetryCount", o.RetryCount, DefaultRetryCount, 7); err != nil {
		return err
	}
	if a.rts.RNRRetry, err = countOption("RNRRetryCount", o.RNRRetryCount, RNRRetryForever, 7); err != nil {
		return err
	}
	rnr := o.MinRNRTimer
	if rnr == 0 {
		rnr = DefaultMinRNRTimer
	}
	if rnr < 0 || rnr > maxRNRTimer {
		return fmt.Errorf("MinRNRTimer %v: the IB table runs from 10µs to %v: %w", rnr, maxRNRTimer, unix.EINVAL)
	}
	a.rtr.MinRNRTimer = RNRTimerCode(rnr)
	if a.rts.MaxRDAtomic, err = countOption("MaxRDAtomic", o.MaxRDAtomic, 1, 255); err != nil {
		return err
	}
	if a.rtr.MaxDestRDAtomic, err = countOption("MaxDestRDAtomic", o.MaxDestRDAtomic, 1, 255); err != nil {
		return err
	}
	return nil
}

// countOption turns a count option into its attribute: 0 takes def, a
// negative value 0, and anything above hi is refused.
func countOption(name string, v, def, hi int) (uint8, error) {
	switch {
	case v == 0:
		return uint8(def), nil
	case v < 0:
		return 0, nil
	case v > hi:
		return 0, fmt.Errorf("%s %d: at most %d: %w", name, v, hi, unix.EINVAL)
	}
	return uint8(v), nil
}

// ackTimeoutOption turns ConnectOptions.AckTimeout into the attribute.
func ackTimeoutOption(d time.Duration) (uint8, error) {
	switch {
	case d == 0:
		return AckTimeoutCode(DefaultAckTimeout), nil
	case d == NoAckTimeout:
		return 0, nil
	case d < 0:
		return 0, fmt.Errorf("AckTimeout %v: negative (NoAckTimeout to wait forever): %w", d, unix.EINVAL)
	case d > AckTimeoutDelay(31):
		return 0, fmt.Errorf("AckTimeout %v: at most %v: %w", d, AckTimeoutDelay(31), unix.EINVAL)
	}
	return AckTimeoutCode(d), nil
}

// AckTimeoutCode returns the ACK timeout attribute (RTSAttr.Timeout, the
// IB "local ACK timeout" n of 4.096 µs × 2^n) whose delay is the shortest
// that is at least d, from 1 (8.192 µs) to 31 (about 2.4 hours). It never
// returns 0, which means no timeout at all.
func AckTimeoutCode(d time.Duration) uint8 {
	for n := uint8(1); n < 31; n++ {
		if AckTimeoutDelay(n) >= d {
			return n
		}
	}
	return 31
}

// AckTimeoutDelay returns the delay of an ACK timeout attribute: 4.096 µs
// × 2^code, or 0 for code 0, which waits forever. Codes above 31 count as
// 31.
func AckTimeoutDelay(code uint8) time.Duration {
	if code == 0 {
		return 0
	}
	return 4096 * time.Nanosecond << min(code, 31)
}

// rnrTimerTable is the IB RNR NAK timer encoding (IBA table 45), in
// microseconds: code 0 is the longest, 655.36 ms.
var rnrTimerTable = [32]time.Duration{
	655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920,
	2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
}

// maxRNRTimer is the longest RNR timer, code 0.
const maxRNRTimer = 655360 * time.Microsecond

// RNRTimerCode returns the RNR timer attribute (RTRAttr.MinRNRTimer) whose
// delay is the shortest that is at least d: 1 (0.01 ms) for d up to 10 µs,
// 12 for 0.64 ms, 0 (655.36 ms, the longest) for d above 491.52 ms.
func RNRTimerCode(d time.Duration) uint8 {
	for code := 1; code < 32; code++ {
		if rnrTimerTable[code]*time.Microsecond >= d {
			return uint8(code)
		}
	}
	return 0
}

// RNRTimerDelay returns the delay of an RNR timer attribute: 0.01 ms for 1
// up to 491.52 ms for 31, and 655.36 ms for 0. Only the low 5 bits count.
func RNRTimerDelay(code uint8) time.Duration {
	return rnrTimerTable[code&31] * time.Microsecond
}
