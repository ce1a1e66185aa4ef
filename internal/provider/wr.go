package provider

import "unsafe"

// The types below are what a provider sees of the caller's work requests
// and completions: each has exactly the memory layout of its verbs
// counterpart (field for field, pinned by this package's tests), so the
// object packages pass the caller's slices through View without copying.
// See the package comment for why they exist.

// SGE is verbs.SGE (struct ib_uverbs_sge).
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// WROpcode is verbs.WROpcode, a send work request's operation
// (IB_UVERBS_WR_*).
type WROpcode uint32

// Send work request opcodes, verbs' values.
const (
	WRRDMAWrite         WROpcode = 0
	WRRDMAWriteWithImm  WROpcode = 1
	WRSend              WROpcode = 2
	WRSendWithImm       WROpcode = 3
	WRRDMARead          WROpcode = 4
	WRAtomicCmpAndSwp   WROpcode = 5
	WRAtomicFetchAndAdd WROpcode = 6
	WRLocalInv          WROpcode = 7
	WRBindMW            WROpcode = 8
	WRSendWithInv       WROpcode = 9
	WRFlush             WROpcode = 14
	WRAtomicWrite       WROpcode = 15
)

// SendFlags is verbs.SendFlags (IB_UVERBS_SEND_*).
type SendFlags uint32

// Send flags, verbs' values.
const (
	SendFence     SendFlags = 1 << 0
	SendSignaled  SendFlags = 1 << 1
	SendSolicited SendFlags = 1 << 2
	SendInline    SendFlags = 1 << 3
)

// MWBind is verbs.MWBind, a BIND_MW work request's operand.
type MWBind struct {
	MWRKey  uint32
	NewRKey uint32
	MRLKey  uint32
	Access  uint32
	Addr    uint64
	Length  uint64
}

// SendWR is verbs.SendWR; the fields mean what verbs documents.
type SendWR struct {
	WRID           uint64
	Opcode         WROpcode
	Flags          SendFlags
	SGList         []SGE
	InlineData     []byte
	Imm            uint32 // host byte order
	InvalidateRKey uint32
	RemoteAddr     uint64
	RKey           uint32
	CompareAdd     uint64
	Swap           uint64
	// AH is the caller's *verbs.AH, opaque here: SendQueue.Post gets the
	// provider's AH from its Checker.
	AH             unsafe.Pointer
	RemoteQPN      uint32
	RemoteQKey     uint32
	Bind           MWBind
	FlushPlacement uint8 // verbs.PlacementType: uverbs.IB_FLUSH_GLOBAL or IB_FLUSH_PERSISTENT
	FlushLevel     uint8 // verbs.FlushSelectivity: uverbs.IB_FLUSH_RANGE or IB_FLUSH_MR
	FlushLength    uint32
	AtomicData     [8]byte
}

// RecvWR is verbs.RecvWR.
type RecvWR struct {
	WRID   uint64
	SGList []SGE
}

// WCStatus is verbs.WCStatus (enum ibv_wc_status).
type WCStatus uint32

// Completion statuses, verbs' values.
const (
	WCSuccess        WCStatus = 0
	WCLocLenErr      WCStatus = 1
	WCLocQPOpErr     WCStatus = 2
	WCLocProtErr     WCStatus = 4
	WCWRFlushErr     WCStatus = 5
	WCBadRespErr     WCStatus = 7
	WCLocAccessErr   WCStatus = 8
	WCRemInvReqErr   WCStatus = 9
	WCRemAccessErr   WCStatus = 10
	WCRemOpErr       WCStatus = 11
	WCRetryExcErr    WCStatus = 12
	WCRNRRetryExcErr WCStatus = 13
	WCFatalErr       WCStatus = 19
	WCRespTimeoutErr WCStatus = 20
	WCGeneralErr     WCStatus = 21
)

// WCOpcode is verbs.WCOpcode (enum ibv_wc_opcode).
type WCOpcode uint32

// Completion opcodes, verbs' values.
const (
	WCSend            WCOpcode = 0
	WCRDMAWrite       WCOpcode = 1
	WCRDMARead        WCOpcode = 2
	WCCompSwap        WCOpcode = 3
	WCFetchAdd        WCOpcode = 4
	WCBindMW          WCOpcode = 5
	WCLocalInv        WCOpcode = 6
	WCFlush           WCOpcode = 8
	WCAtomicWrite     WCOpcode = 9
	WCRecv            WCOpcode = 128
	WCRecvRDMAWithImm WCOpcode = 129
)

// WCFlags is verbs.WCFlags (the kernel's IB_WC_*).
type WCFlags uint32

// Completion flags, verbs' values.
const (
	WCGRH            WCFlags = 1 << 0
	WCWithImm        WCFlags = 1 << 1
	WCWithInvalidate WCFlags = 1 << 2
)

// WC is verbs.WorkCompletion, which has the layout of struct
// ib_uverbs_wc.
type WC struct {
	WRID         uint64
	Status       WCStatus
	Opcode       WCOpcode
	VendorErr    uint32
	ByteLen      uint32
	ImmData      uint32 // network byte order, or the invalidated rkey
	QPNum        uint32
	SrcQP        uint32
	Flags        WCFlags
	PkeyIndex    uint16
	SLID         uint16
	SL           uint8
	DLIDPathBits uint8
	PortNum      uint8
	_            uint8
}

// View returns s as a []U over the same memory; T must have U's memory
// layout (verbs.SendWR and SendWR, and so on). It is for the object
// packages, which hand a caller's slice to a provider with it.
//
// The result is hidden from escape analysis (the address passes through
// a uintptr, as the runtime's noescape does): handing a slice to an
// interface method makes the compiler assume that it escapes, which
// would move every work request list a caller builds on its stack to the
// heap, an allocation per post. That is sound because a provider keeps
// nothing of the slice past the call, and the caller's frame, which
// holds the slice, outlives the call; a stack move during the call
// adjusts the typed slice the provider holds like any other pointer.
func View[U, T any](s []T) []U {
	p := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	return unsafe.Slice(*(**U)(unsafe.Pointer(&p)), len(s))
}
