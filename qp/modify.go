package qp

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/kobj"
	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/uverbs"
	"github.com/goverbs/goverbs/verbs"
)

// AttrMask selects the attributes a Modify sets (IB_QP_*).
type AttrMask uint32

// Attribute mask bits.
const (
	MaskState            AttrMask = 1 << 0
	MaskCurState         AttrMask = 1 << 1
	MaskEnSQDAsyncNotify AttrMask = 1 << 2
	MaskAccessFlags      AttrMask = 1 << 3
	MaskPkeyIndex        AttrMask = 1 << 4
	MaskPort             AttrMask = 1 << 5
	MaskQKey             AttrMask = 1 << 6
	MaskAV               AttrMask = 1 << 7
	MaskPathMTU          AttrMask = 1 << 8
	MaskTimeout          AttrMask = 1 << 9
	MaskRetryCnt         AttrMask = 1 << 10
	MaskRNRRetry         AttrMask = 1 << 11
	MaskRQPSN            AttrMask = 1 << 12
	MaskMaxQPRDAtomic    AttrMask = 1 << 13
	MaskAltPath          AttrMask = 1 << 14
	MaskMinRNRTimer      AttrMask = 1 << 15
	MaskSQPSN            AttrMask = 1 << 16
	MaskMaxDestRDAtomic  AttrMask = 1 << 17
	MaskPathMigState     AttrMask = 1 << 18
	MaskCap              AttrMask = 1 << 19
	MaskDestQPN          AttrMask = 1 << 20
	maskAll              AttrMask = 1<<21 - 1
)

// Attr are a QP's attributes, for Modify and from Query.
type Attr struct {
	State           State
	CurState        State
	PathMTU         verbs.MTU
	QKey            uint32
	RQPSN           uint32
	SQPSN           uint32
	DestQPN         uint32
	Access          mr.Access
	PkeyIndex       uint16
	Port            uint8
	Path            verbs.AHAttr
	Timeout         uint8
	RetryCnt        uint8
	RNRRetry        uint8
	MinRNRTimer     uint8
	MaxRDAtomic     uint8
	MaxDestRDAtomic uint8
	Caps            Caps // Query only
	SigAll          bool // Query only
}

func qpDest(a *verbs.AHAttr) uverbs.QpDest {
	d := uverbs.QpDest{
		Dgid: a.GRH.DGID, Flow_label: a.GRH.FlowLabel, Dlid: a.DLID, Sgid_index: a.GRH.SGIDIndex,
		Hop_limit: a.GRH.HopLimit, Traffic_class: a.GRH.TrafficClass, Sl: a.SL,
		Src_path_bits: a.SrcPathBits, Static_rate: a.StaticRate, Port_num: a.Port,
	}
	if a.IsGlobal {
		d.Is_global = 1
	}
	return d
}

func ahAttr(d *uverbs.QpDest) verbs.AHAttr {
	return verbs.AHAttr{
		GRH: verbs.GlobalRoute{DGID: d.Dgid, FlowLabel: d.Flow_label, SGIDIndex: d.Sgid_index,
			HopLimit: d.Hop_limit, TrafficClass: d.Traffic_class},
		DLID: d.Dlid, SL: d.Sl, SrcPathBits: d.Src_path_bits, StaticRate: d.Static_rate,
		IsGlobal: d.Is_global != 0, Port: d.Port_num,
	}
}

// Modify sets the attributes of attr that mask selects (MODIFY_QP). The
// typed transitions ToInit, ToRTR, ToRTS and ToError choose the mask for
// the QP type.
func (q *QP) Modify(attr *Attr, mask AttrMask) error {
	if q.isClosed() {
		return verbs.ErrClosed
	}
	if attr == nil {
		return fmt.Errorf("qp: modify: %w", errNilAttr)
	}
	if mask&^maskAll != 0 {
		return fmt.Errorf("qp: modify: unknown mask bits %#x", uint32(mask&^maskAll))
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return verbs.ErrClosed
	}
	req := uverbs.ModifyQp{
		Dest: qpDest(&attr.Path), Qp_handle: q.handle, Attr_mask: uint32(mask),
		Qkey: attr.QKey, Rq_psn: attr.RQPSN, Sq_psn: attr.SQPSN, Dest_qp_num: attr.DestQPN,
		Qp_access_flags: uint32(attr.Access), Pkey_index: attr.PkeyIndex,
		Qp_state: uint8(attr.State), Cur_qp_state: uint8(attr.CurState), Path_mtu: uint8(attr.PathMTU),
		Max_rd_atomic: attr.MaxRDAtomic, Max_dest_rd_atomic: attr.MaxDestRDAtomic,
		Min_rnr_timer: attr.MinRNRTimer, Port_num: attr.Port, Timeout: attr.Timeout,
		Retry_cnt: attr.RetryCnt, Rnr_retry: attr.RNRRetry,
	}
	ctx := q.pd.Context()
	var r uverbs.Ioctl
	r.InitInvokeWrite("MODIFY_QP", uverbs.IB_USER_VERBS_CMD_MODIFY_QP, kobj.ContextOf(ctx).Driver)
	r.In(uverbs.UVERBS_ATTR_CORE_IN, unsafe.Pointer(&req), unsafe.Sizeof(req))
	if err := kobj.ContextOf(ctx).Do(&r); err != nil {
		if mask&MaskState != 0 {
			return fmt.Errorf("qp: modify %s QP %d %s→%s (mask %#x): %w", q.typ, q.qpn, q.state, attr.State, uint32(mask), err)
		}
		return fmt.Errorf("qp: modify %s QP %d (mask %#x): %w", q.typ, q.qpn, uint32(mask), err)
	}
	if mask&MaskState != 0 {
		q.setState(attr.State)
	}
	return nil
}

// InitAttr are the attributes of the RESET→INIT transition.
type InitAttr struct {
	Port      uint8     // physical port, from 1
	PkeyIndex uint16    //
	Access    mr.Access // remote operations the QP accepts (RC, UC)
	QKey      uint32    // UD: the Q_Key datagrams must carry
}

// ToInit moves the QP from RESET to INIT.
func (q *QP) ToInit(a InitAttr) error {
	attr := Attr{State: Init, Port: a.Port, PkeyIndex: a.PkeyIndex, Access: a.Access, QKey: a.QKey}
	mask := MaskState | MaskPkeyIndex | MaskPort
	if q.typ == UD {
		mask |= MaskQKey
	} else {
		mask |= MaskAccessFlags
	}
	return q.Modify(&attr, mask)
}

// RTRAttr are the attributes of the INIT→RTR transition (connected QPs;
// UD needs none).
type RTRAttr struct {
	Path            verbs.AHAttr // the path to the peer; on RoCE IsGlobal with the peer's GID
	MTU             verbs.MTU    // path MTU, at most the port's active MTU
	DestQPN         uint32       // the peer's QP number
	RQPSN           uint32       // the peer's starting send PSN
	MaxDestRDAtomic uint8        // RC: RDMA reads and atomics the peer may have outstanding here
	// MinRNRTimer (RC) is the code of the delay the peer is told to wait
	// before it retries a SEND that found no receive posted here (IBA
	// table 45): 1 is 0.01 ms, 12 is 0.64 ms, 31 is 491.52 ms, and 0 is
	// the longest, 655.36 ms. RNRTimerCode and RNRTimerDelay convert.
	MinRNRTimer uint8
}

// ToRTR moves the QP from INIT to RTR (ready to receive).
func (q *QP) ToRTR(a RTRAttr) error {
	if q.isClosed() {
		return verbs.ErrClosed
	}
	attr := Attr{State: RTR}
	mask := MaskState
	if q.typ != UD {
		if a.MTU < verbs.MTU256 || a.MTU > verbs.MTU4096 {
			return fmt.Errorf("qp: RTR: path MTU %d out of range", a.MTU)
		}
		attr.Path, attr.PathMTU, attr.DestQPN, attr.RQPSN = a.Path, a.MTU, a.DestQPN, a.RQPSN
		mask |= MaskAV | MaskPathMTU | MaskDestQPN | MaskRQPSN
		if q.typ == RC {
			attr.MaxDestRDAtomic, attr.MinRNRTimer = a.MaxDestRDAtomic, a.MinRNRTimer
			mask |= MaskMaxDestRDAtomic | MaskMinRNRTimer
		}
	}
	return q.Modify(&attr, mask)
}

// RTSAttr are the attributes of the RTR→RTS transition. They are the IB
// values as they are, zeros included: for an RC QP a Timeout of 0 waits
// forever for an acknowledgement and a RetryCnt of 0 never retries, which
// is why ToRTS refuses an RC RTSAttr whose four RC fields are all zero (the
// zero value, not a choice). QP.Connect fills them in with defaults.
type RTSAttr struct {
	SQPSN       uint32 // our starting send PSN (24 bits)
	Timeout     uint8  // RC: ACK timeout, 4.096 µs × 2^Timeout for 1 to 31; 0: none, wait forever (AckTimeoutCode converts)
	RetryCnt    uint8  // RC: transport retries after an ACK timeout, 0 to 7
	RNRRetry    uint8  // RC: retries of a SEND that found no receive posted, 0 to 6, or 7: infinite (RNRRetryForever)
	MaxRDAtomic uint8  // RC: RDMA reads and atomics we may have outstanding
}

// ToRTS moves the QP from RTR to RTS (ready to send). For an RC QP it
// refuses (EINVAL) an RTSAttr with Timeout, RetryCnt, RNRRetry and
// MaxRDAtomic all zero: a QP that would wait forever for an ACK, never
// retry and never read, almost always an RTSAttr left unfilled.
func (q *QP) ToRTS(a RTSAttr) error {
	if q.typ == RC && a.Timeout == 0 && a.RetryCnt == 0 && a.RNRRetry == 0 && a.MaxRDAtomic == 0 {
		if q.isClosed() {
			return verbs.ErrClosed
		}
		return fmt.Errorf("qp: RTS: RC attributes all zero (timeout 0 would wait forever for an acknowledgement): set Timeout, RetryCnt, RNRRetry and MaxRDAtomic, or use Connect: %w", unix.EINVAL)
	}
	attr := Attr{State: RTS, SQPSN: a.SQPSN}
	mask := MaskState | MaskSQPSN
	if q.typ == RC {
		attr.Timeout, attr.RetryCnt, attr.RNRRetry, attr.MaxRDAtomic = a.Timeout, a.RetryCnt, a.RNRRetry, a.MaxRDAtomic
		mask |= MaskTimeout | MaskRetryCnt | MaskRNRRetry | MaskMaxQPRDAtomic
	}
	return q.Modify(&attr, mask)
}

// ToError moves the QP to ERR: outstanding and later work requests
// complete with verbs.WCWRFlushErr.
func (q *QP) ToError() error { return q.Modify(&Attr{State: Error}, MaskState) }

// ToReset moves the QP back to RESET, emptying its queues.
func (q *QP) ToReset() error { return q.Modify(&Attr{State: Reset}, MaskState) }

// Query returns the QP's attributes as the kernel knows them (QUERY_QP),
// including the current state.
func (q *QP) Query() (*Attr, error) {
	q.mu.Lock()
	closed := q.closed
	q.mu.Unlock()
	if closed {
		return nil, verbs.ErrClosed
	}
	req := uverbs.QueryQp{Qp_handle: q.handle, Attr_mask: uint32(maskAll)}
	resp := new(uverbs.QueryQpResp)
	ctx := q.pd.Context()
	var r uverbs.Ioctl
	r.InitInvokeWrite("QUERY_QP", uverbs.IB_USER_VERBS_CMD_QUERY_QP, kobj.ContextOf(ctx).Driver)
	r.In(uverbs.UVERBS_ATTR_CORE_IN, unsafe.Pointer(&req), unsafe.Sizeof(req))
	r.Out(uverbs.UVERBS_ATTR_CORE_OUT, unsafe.Pointer(resp), unsafe.Sizeof(*resp))
	if err := kobj.ContextOf(ctx).Do(&r); err != nil {
		if q.isClosed() {
			// Close began meanwhile and destroyed (or is destroying) the
			// QP: ENOENT or EBUSY from the kernel means just that.
			return nil, verbs.ErrClosed
		}
		return nil, fmt.Errorf("qp: query: %w", err)
	}
	return &Attr{
		State: State(resp.Qp_state), CurState: State(resp.Cur_qp_state), PathMTU: verbs.MTU(resp.Path_mtu),
		QKey: resp.Qkey, RQPSN: resp.Rq_psn, SQPSN: resp.Sq_psn, DestQPN: resp.Dest_qp_num,
		Access: mr.Access(resp.Qp_access_flags), PkeyIndex: resp.Pkey_index, Port: resp.Port_num,
		Path: ahAttr(&resp.Dest), Timeout: resp.Timeout, RetryCnt: resp.Retry_cnt, RNRRetry: resp.Rnr_retry,
		MinRNRTimer: resp.Min_rnr_timer, MaxRDAtomic: resp.Max_rd_atomic, MaxDestRDAtomic: resp.Max_dest_rd_atomic,
		Caps: Caps{MaxSendWR: int(resp.Max_send_wr), MaxRecvWR: int(resp.Max_recv_wr), MaxSendSGE: int(resp.Max_send_sge),
			MaxRecvSGE: int(resp.Max_recv_sge), MaxInlineData: int(resp.Max_inline_data)},
		SigAll: resp.Sq_sig_all != 0,
	}, nil
}

// errNilAttr is the error of Modify with a nil *Attr.
var errNilAttr = fmt.Errorf("nil attributes: %w", unix.EINVAL)

// isClosed reports whether Close has begun, for the helpers that check
// their arguments before taking q.mu.
func (q *QP) isClosed() bool { return q.postState.Load() == postClosed }
