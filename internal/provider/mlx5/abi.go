package mlx5

import "github.com/goverbs/goverbs/uverbs"

// The driver data of mlx5's commands (the kernel's rdma/mlx5-abi.h, as
// rdma-core 44's providers/mlx5 sends it) and the device formats of its
// queues (rdma-core's mlx5dv.h): declared here, with names the provider
// reads well; abi_test.go holds each driver-data struct to the one package
// uverbs generates from the kernel's header, field by field.
// Multi-byte fields of the device formats are big-endian in memory; the
// command structs are host order, as every uverbs struct.

// allocUcontextReq is struct mlx5_ib_alloc_ucontext_req_v2.
type allocUcontextReq struct {
	TotalNumBfregs      uint32
	NumLowLatencyBfregs uint32
	Flags               uint32
	CompMask            uint32
	MaxCQEVersion       uint8
	_                   uint8
	_                   uint16
	_                   uint32
	LibCaps             uint64
}

// allocUcontextResp is struct mlx5_ib_alloc_ucontext_resp.
type allocUcontextResp struct {
	QPTabSize          uint32
	BfRegSize          uint32
	TotBfregs          uint32
	CacheLineSize      uint32
	MaxSqDescSz        uint16
	MaxRqDescSz        uint16
	MaxSendWQEBB       uint32
	MaxRecvWR          uint32
	MaxSRQRecvWR       uint32
	NumPorts           uint16
	FlowActionFlags    uint16
	CompMask           uint32
	ResponseLength     uint32
	CQEVersion         uint8
	CmdsSuppUHW        uint8
	EthMinInline       uint8
	ClockInfoVersions  uint8
	HCACoreClockOffset uint64
	LogUARSize         uint32
	NumUARsPerPage     uint32
	NumDynBfregs       uint32
	DumpFillMkey       uint32
}

// allocPDResp is struct mlx5_ib_alloc_pd_resp.
type allocPDResp struct{ PDN uint32 }

// createAHResp is struct mlx5_ib_create_ah_resp: on a RoCE port the
// kernel writes the destination MAC it resolved for the AH.
type createAHResp struct {
	Length uint32
	DMAC   [6]byte
	_      [6]byte
}

// cmdsSuppUHWCreateAH is MLX5_USER_CMDS_SUPP_UHW_CREATE_AH in the
// context's cmds_supp_uhw: CREATE_AH answers with createAHResp.
const cmdsSuppUHWCreateAH = 1 << 1

// queryDeviceResp is struct mlx5_ib_query_device_resp, EX_QUERY_DEVICE's
// driver response (TSO, RSS, CQE compression, packet pacing, ... caps),
// as package uverbs generates it.
type queryDeviceResp = uverbs.Mlx5IbQueryDeviceResp

// createCQ is struct mlx5_ib_create_cq.
type createCQ struct {
	BufAddr          uint64
	DBAddr           uint64
	CQESize          uint32
	CQECompEn        uint8
	CQECompResFormat uint8
	Flags            uint16
	UARPageIndex     uint16
	_                uint16
	_                uint32
}

// createCQResp is struct mlx5_ib_create_cq_resp.
type createCQResp struct {
	CQN uint32
	_   uint32
}

// resizeCQ is struct mlx5_ib_resize_cq.
type resizeCQ struct {
	BufAddr uint64
	CQESize uint16
	_       uint16
	_       uint32
}

// createSRQ is struct mlx5_ib_create_srq.
type createSRQ struct {
	BufAddr uint64
	DBAddr  uint64
	Flags   uint32
	_       uint32 // xrc_domain
	UIdx    uint32
	_       uint32
}

// createSRQResp is struct mlx5_ib_create_srq_resp.
type createSRQResp struct {
	SRQN uint32
	_    uint32
}

// createQP is struct mlx5_ib_create_qp.
type createQP struct {
	BufAddr    uint64
	DBAddr     uint64
	SQWQECount uint32
	RQWQECount uint32
	RQWQEShift uint32
	Flags      uint32
	UIdx       uint32
	BfregIndex uint32
	SQBufAddr  uint64
	ECEOptions uint32
	DCIStreams uint16 // struct mlx5_ib_create_qp_dci_streams: two u8
	_          uint16
}

// createQPResp is struct mlx5_ib_create_qp_resp.
type createQPResp struct {
	BfregIndex uint32
	ECEOptions uint32
	CompMask   uint32
	TIRN       uint32
	TISN       uint32
	RQN        uint32
	SQN        uint32
	_          uint32
	TIRICMAddr uint64
}

// Constants of mlx5-abi.h and mlx5dv.h.
const (
	libCap4KUAR  = 1 << 0 // MLX5_LIB_CAP_4K_UAR
	libCapDynUAR = 1 << 1 // MLX5_LIB_CAP_DYN_UAR

	numNonFPBfregsPerUAR = 2  // MLX5_NUM_NON_FP_BFREGS_PER_UAR
	numBfregsPerUAR      = 4  // NUM_BFREGS_PER_UAR
	defTotUUARs          = 16 // MLX5_DEF_TOT_UUARS
	medBfregsThreshold   = 12 // MLX5_MED_BFREGS_TSHOLD
	defLowLatUUARs       = 4  // libmlx5's default MLX5_NUM_LOW_LAT_UUARS
	maxUARs              = 1 << 8
	adapterPageSize      = 4096  // MLX5_ADAPTER_PAGE_SIZE
	bfOffset             = 0x800 // MLX5_BF_OFFSET
	cqDoorbell           = 0x20  // MLX5_CQ_DOORBELL

	sendWQEBB    = 64 // MLX5_SEND_WQE_BB
	invalidLKey  = 0x100
	inlineSeg    = 0x80000000
	atomicSize   = 8
	ctrlSegSize  = 16
	dataSegSize  = 16
	raddrSegSize = 16
	atomSegSize  = 16
	// The largest segments libmlx5 reserves room for in an RC or UC WQE
	// (_sq_overhead): a UMR for BIND_MW and LOCAL_INV, ctrl + umr ctrl (48)
	// + mkey context (64) + a KLM list (64).
	mwOverhead  = ctrlSegSize + 48 + 64 + 64
	datagramSeg = 48
	srqNextSeg  = 16 // struct mlx5_wqe_srq_next_seg: next_wqe_index at 2

	// WQE opcodes (MLX5_OPCODE_*).
	opNOP          = 0x00
	opSendInval    = 0x01
	opRDMAWrite    = 0x08
	opRDMAWriteImm = 0x09
	opSend         = 0x0a
	opSendImm      = 0x0b
	opRDMARead     = 0x10
	opAtomicCS     = 0x11
	opAtomicFA     = 0x12

	// fm_ce_se bits.
	ctrlCQUpdate  = 2 << 2
	ctrlSolicited = 1 << 1
	ctrlFence     = 4 << 5

	// CQE opcodes (op_own >> 4).
	cqeReq         = 0
	cqeRespWRImm   = 1
	cqeRespSend    = 2
	cqeRespSendImm = 3
	cqeRespSendInv = 4
	cqeResizeCQ    = 5
	cqeReqErr      = 13
	cqeRespErr     = 14
	cqeInvalid     = 15

	inlineScatter32 = 0x4 // op_own: the data is in this CQE
	inlineScatter64 = 0x8 // op_own: the data is in the 64 bytes before it

	qpFlagScatterCQE = 1 << 1 // MLX5_QP_FLAG_SCATTER_CQE

	cqDBReqNotSol = 1 << 24
	cqDBReqNot    = 0

	rcvDBR = 0 // MLX5_RCV_DBR
	sndDBR = 1 // MLX5_SND_DBR
)

// CQE byte offsets (struct mlx5_cqe64; an error CQE, struct
// mlx5_err_cqe, shares the last eight bytes).
const (
	cqeMLPath     = 17
	cqeSLID       = 22
	cqeFlagsRQPN  = 24
	cqeSRQNUIdx   = 32
	cqeImmInval   = 36
	cqeByteCnt    = 44
	cqeVendorErr  = 54
	cqeSyndrome   = 55
	cqeSopDropQPN = 56
	cqeWQECounter = 60
	cqeOpOwn      = 63
)
