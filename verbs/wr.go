package verbs

import (
	"strconv"

	"github.com/goverbs/goverbs/uverbs"
)

// SGE is a scatter/gather element: Length bytes at Addr, in the IOVA space
// of the memory region whose local key is LKey. Its layout is struct
// ib_uverbs_sge (and rxe's struct rxe_sge).
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// WROpcode is the operation of a send work request (IB_UVERBS_WR_*).
type WROpcode uint32

// Send work request opcodes.
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
	// WRFlush makes earlier writes to a remote range (or a whole MR)
	// visible or persistent at the target (RDMA FLUSH). Devices with
	// DeviceCapFlushGlobal or DeviceCapFlushPersistent take it on RC QPs.
	WRFlush WROpcode = uverbs.IB_UVERBS_WR_FLUSH
	// WRAtomicWrite writes 8 bytes to the remote address as one atomic
	// access (ATOMIC WRITE). Devices with DeviceCapAtomicWrite take it on
	// RC QPs.
	WRAtomicWrite WROpcode = uverbs.IB_UVERBS_WR_ATOMIC_WRITE
)

func (o WROpcode) String() string {
	switch o {
	case WRRDMAWrite:
		return "RDMA_WRITE"
	case WRRDMAWriteWithImm:
		return "RDMA_WRITE_WITH_IMM"
	case WRSend:
		return "SEND"
	case WRSendWithImm:
		return "SEND_WITH_IMM"
	case WRRDMARead:
		return "RDMA_READ"
	case WRAtomicCmpAndSwp:
		return "ATOMIC_CMP_AND_SWP"
	case WRAtomicFetchAndAdd:
		return "ATOMIC_FETCH_AND_ADD"
	case WRLocalInv:
		return "LOCAL_INV"
	case WRBindMW:
		return "BIND_MW"
	case WRSendWithInv:
		return "SEND_WITH_INV"
	case WRFlush:
		return "FLUSH"
	case WRAtomicWrite:
		return "ATOMIC_WRITE"
	}
	return "WROpcode(" + strconv.Itoa(int(o)) + ")"
}

// SendFlags modify a send work request (IB_UVERBS_SEND_*).
type SendFlags uint32

// Send flags.
const (
	SendFence     SendFlags = 1 << 0 // wait for earlier RDMA reads and atomics
	SendSignaled  SendFlags = 1 << 1 // generate a completion (always, with sq_sig_all)
	SendSolicited SendFlags = 1 << 2 // wake a receiver armed for solicited events
	SendInline    SendFlags = 1 << 3 // carry the data in the WQE (set by InlineData)
)

// SendWR is a send work request: a SEND, an RDMA WRITE or READ, or an
// atomic operation.
type SendWR struct {
	WRID   uint64
	Opcode WROpcode
	Flags  SendFlags
	// SGList names the local memory; ignored when InlineData is set.
	SGList []SGE
	// InlineData is copied into the work queue element (up to the QP's
	// max inline size); no memory registration is needed for it.
	InlineData []byte
	// Imm is the immediate data of *_WITH_IMM opcodes, in host byte order:
	// it travels in network byte order and arrives as WorkCompletion.Imm().
	Imm uint32
	// InvalidateRKey is the rkey SEND_WITH_INV invalidates at the peer,
	// or the one LOCAL_INV invalidates here: the rkey of a bound type 2
	// memory window (rxe cannot invalidate user-registered MRs).
	InvalidateRKey uint32
	// RemoteAddr and RKey name the peer's memory for RDMA and atomics.
	RemoteAddr uint64
	RKey       uint32
	// CompareAdd is the value to compare (CMP_AND_SWP) or add (FETCH_AND_ADD);
	// Swap the value swapped in.
	CompareAdd uint64
	Swap       uint64
	// UD: the address handle, the destination QP and its Q_Key.
	AH         *AH
	RemoteQPN  uint32
	RemoteQKey uint32
	// Bind describes the window and range of a BIND_MW work request.
	Bind MWBind
	// FLUSH: what to make durable (FlushPlacement, one of the placement
	// types) and how much of the remote region: FlushRange flushes
	// FlushLength bytes at RemoteAddr, FlushMR the whole memory region
	// of RKey. No local memory (SGList, InlineData) is involved.
	FlushPlacement PlacementType
	FlushLevel     FlushSelectivity
	FlushLength    uint32
	// AtomicData is what ATOMIC_WRITE stores at RemoteAddr (8-byte
	// aligned), byte for byte; no local memory is involved.
	AtomicData [8]byte
}

// PlacementType is the placement type of an RDMA FLUSH (IBA A19.4.1.1):
// where the flushed data must have arrived when the FLUSH completes.
type PlacementType uint8

// Placement types; a FLUSH names exactly one.
const (
	FlushGlobal     PlacementType = uverbs.IB_FLUSH_GLOBAL     // globally visible
	FlushPersistent PlacementType = uverbs.IB_FLUSH_PERSISTENT // persistent
)

// FlushSelectivity is the selectivity level of an RDMA FLUSH (IBA
// A19.4.1.2).
type FlushSelectivity uint8

// Selectivity levels.
const (
	FlushRange FlushSelectivity = uverbs.IB_FLUSH_RANGE // FlushLength bytes at RemoteAddr
	FlushMR    FlushSelectivity = uverbs.IB_FLUSH_MR    // the whole memory region of RKey
)

// MWBind is the operand of a BIND_MW work request: it binds the memory
// window whose rkey is MWRKey to Length bytes at Addr (in the IOVA space)
// of the memory region whose lkey is MRLKey, with the remote access
// flags Access (IB_UVERBS_ACCESS_*). After the bind completes, the window
// answers to NewRKey: the same 24-bit index as MWRKey with the 8-bit key
// of the caller's choice, usually IncRKey(MWRKey). The region must have
// been registered with MW_BIND access, and with LOCAL_WRITE if the window
// grants remote write or atomic access.
//
// mr.MW.BindWR fills one in for a window.
type MWBind struct {
	MWRKey  uint32
	NewRKey uint32
	MRLKey  uint32
	Access  uint32
	Addr    uint64
	Length  uint64
}

// IncRKey returns rkey with its low 8 bits, the key part the consumer
// chooses, incremented: what ibv_inc_rkey computes for the next bind of a
// memory window.
func IncRKey(rkey uint32) uint32 { return rkey&^0xff | (rkey+1)&0xff }

// RecvWR is a receive work request: where an incoming SEND lands.
type RecvWR struct {
	WRID   uint64
	SGList []SGE
}
