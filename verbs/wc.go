package verbs

import (
	"encoding/binary"
	"strconv"
	"unsafe"

	"github.com/goverbs/goverbs/uverbs"
)

// WCStatus is the status of a work completion (enum ibv_wc_status).
type WCStatus uint32

// Completion statuses.
const (
	WCSuccess WCStatus = iota
	WCLocLenErr
	WCLocQPOpErr
	WCLocEECOpErr
	WCLocProtErr
	WCWRFlushErr
	WCMWBindErr
	WCBadRespErr
	WCLocAccessErr
	WCRemInvReqErr
	WCRemAccessErr
	WCRemOpErr
	WCRetryExcErr
	WCRNRRetryExcErr
	WCLocRDDViolErr
	WCRemInvRDReqErr
	WCRemAbortErr
	WCInvEECNErr
	WCInvEECStateErr
	WCFatalErr
	WCRespTimeoutErr
	WCGeneralErr
)

var wcStatusNames = [...]string{
	"success", "local length error", "local QP operation error", "local EE context operation error",
	"local protection error", "Work Request Flushed Error", "memory management operation error",
	"bad response error", "local access error", "remote invalid request error", "remote access error",
	"remote operation error", "transport retry counter exceeded", "RNR retry counter exceeded",
	"local RDD violation error", "remote invalid RD request", "aborted error", "invalid EE context number",
	"invalid EE context state", "fatal error", "response timeout error", "general error",
	"TM error", "TM software rendezvous",
}

// String returns libibverbs' text for the status (ibv_wc_status_str).
func (s WCStatus) String() string {
	if int(s) < len(wcStatusNames) {
		return wcStatusNames[s]
	}
	return "unknown"
}

// WCOpcode is the operation a work completion reports (enum ibv_wc_opcode).
type WCOpcode uint32

// Completion opcodes. Receive-side opcodes have bit 7 set.
const (
	WCSend            WCOpcode = 0
	WCRDMAWrite       WCOpcode = 1
	WCRDMARead        WCOpcode = 2
	WCCompSwap        WCOpcode = 3
	WCFetchAdd        WCOpcode = 4
	WCBindMW          WCOpcode = 5
	WCLocalInv        WCOpcode = 6
	WCTSO             WCOpcode = 7
	WCFlush           WCOpcode = uverbs.IB_UVERBS_WC_FLUSH        // an RDMA FLUSH completed
	WCAtomicWrite     WCOpcode = uverbs.IB_UVERBS_WC_ATOMIC_WRITE // an ATOMIC WRITE completed
	WCRecv            WCOpcode = 128
	WCRecvRDMAWithImm WCOpcode = 129
)

func (o WCOpcode) String() string {
	switch o {
	case WCSend:
		return "SEND"
	case WCRDMAWrite:
		return "RDMA_WRITE"
	case WCRDMARead:
		return "RDMA_READ"
	case WCCompSwap:
		return "COMP_SWAP"
	case WCFetchAdd:
		return "FETCH_ADD"
	case WCBindMW:
		return "BIND_MW"
	case WCLocalInv:
		return "LOCAL_INV"
	case WCTSO:
		return "TSO"
	case WCFlush:
		return "FLUSH"
	case WCAtomicWrite:
		return "ATOMIC_WRITE"
	case WCRecv:
		return "RECV"
	case WCRecvRDMAWithImm:
		return "RECV_RDMA_WITH_IMM"
	}
	return "WCOpcode(" + strconv.Itoa(int(o)) + ")"
}

// WCFlags are the flags of a work completion (the kernel's IB_WC_*).
type WCFlags uint32

// Completion flags.
const (
	WCGRH            WCFlags = 1 << 0 // a GRH precedes the data (UD: the first 40 bytes)
	WCWithImm        WCFlags = 1 << 1 // ImmData is valid
	WCWithInvalidate WCFlags = 1 << 2 // the rkey in ImmData was invalidated
)

// WorkCompletion is one completed work request, with the field layout of
// struct ib_uverbs_wc (providers whose CQE is that struct copy it whole).
//
// When Status is not WCSuccess only WRID, Status, QPNum and VendorErr are
// valid; every other field is undefined.
type WorkCompletion struct {
	WRID         uint64   // the wr_id of the work request
	Status       WCStatus //
	Opcode       WCOpcode //
	VendorErr    uint32   // provider-specific error detail
	ByteLen      uint32   // bytes transferred (receives: bytes received, including a UD GRH)
	ImmData      uint32   // the immediate data as it came off the wire (network byte order; Imm converts), or the invalidated rkey in host order (InvalidatedRKey)
	QPNum        uint32   // the local QP the work request belonged to
	SrcQP        uint32   // UD: the sender's QP number
	Flags        WCFlags  //
	PkeyIndex    uint16
	SLID         uint16
	SL           uint8
	DLIDPathBits uint8
	PortNum      uint8
	_            uint8
}

// Imm returns the immediate data in host byte order. It is meaningful only
// when Flags has WCWithImm.
func (wc *WorkCompletion) Imm() uint32 { return fromBE32(wc.ImmData) }

// InvalidatedRKey returns the rkey a SEND_WITH_INV invalidated; meaningful
// only when Flags has WCWithInvalidate.
func (wc *WorkCompletion) InvalidatedRKey() uint32 { return wc.ImmData }

// HostToImm converts a host-order immediate value to the network-order
// form WorkCompletion.ImmData holds (the inverse of WorkCompletion.Imm),
// for building completions by hand, as tests do. Work requests take host
// order: set SendWR.Imm to the value itself, never to HostToImm of it.
func HostToImm(v uint32) uint32 { return fromBE32(v) }

// fromBE32 reinterprets the in-memory bytes of v as a big-endian value (and
// is its own inverse).
func fromBE32(v uint32) uint32 {
	return binary.BigEndian.Uint32((*[4]byte)(unsafe.Pointer(&v))[:])
}
