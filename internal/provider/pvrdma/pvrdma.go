// Package pvrdma is the provider for VMware's paravirtual RDMA device
// (the vmw_pvrdma kernel driver, RoCE): it implements package
// internal/provider's interfaces with the queue layout, ring indices and
// doorbells of rdma-core's providers/vmw_pvrdma and the kernel UAPI
// vmw_pvrdma-abi.h (uverbs.Pvrdma*).
//
// Unlike rxe and siw, every queue lives in user memory: the provider
// allocates it (an anonymous mmap, page aligned, MADV_DONTFORK, as
// rdma-core's pvrdma_alloc_buf) and passes its address and size in the
// create command's driver data; the kernel pins it and hands the device a
// page directory of it. The first page of a queue's buffer holds the ring
// state (struct pvrdma_ring: prod_tail and cons_head, two __u32), the
// elements start at the next page:
//
//   - CQ: [ring state page][CQEs], the CQ's ring is the second pvrdma_ring
//     of the page (ring_state->rx, offset 8); the device produces, user
//     space consumes.
//   - QP: the send buffer is [ring state page][send WQEs], the send ring
//     at offset 0 and the receive ring at offset 8 of that page; the
//     receive buffer holds the receive WQEs from offset 0 (none with an
//     SRQ).
//   - SRQ: [ring state page][receive WQEs], the ring at offset 8.
//
// Ring indices carry a wrap bit: an index runs modulo twice the (power of
// two) number of elements, the slot is the index modulo the number of
// elements, and equal indices mean empty while indices that differ only
// in the wrap bit mean full (pvrdma_ring.h). A value outside that range is
// an invalid ring state.
//
// Doorbells are 32-bit stores to the UAR page (mmap of offset 0 of the
// uverbs descriptor): the QP doorbell (PVRDMA_UAR_QP_OFFSET) with the QP
// handle and SEND or RECV, the CQ doorbell with the CQ number and ARM,
// ARM_SOL or POLL, the SRQ doorbell with the SRQ number and RECV. No post,
// poll or arm makes a system call.
//
// A CQE carries the work request id and the QP handle (its low 16 bits
// index the context's QP table, which gives the QP number).
package pvrdma

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/uverbs"
)

// Element sizes (vmw_pvrdma-abi.h; uverbs pins the layouts).
const (
	CQESize      = unsafe.Sizeof(uverbs.PvrdmaCqe{})      // 64
	SGESize      = unsafe.Sizeof(uverbs.PvrdmaSge{})      // 16
	SendHdrSize  = unsafe.Sizeof(uverbs.PvrdmaSqWqeHdr{}) // 80
	RecvHdrSize  = unsafe.Sizeof(uverbs.PvrdmaRqWqeHdr{}) // 16
	ringSize     = 8                                      // struct pvrdma_ring
	maxRingElems = 1 << 24                                // far beyond any device's max_qp_wr / max_cqe
)

// Doorbell offsets and flags in the UAR page (vmw_pvrdma-abi.h). RECV and
// POLL are bit 31, which the generated constants hold as negative ints.
const (
	uarQPOffset  = uverbs.PVRDMA_UAR_QP_OFFSET
	uarCQOffset  = uverbs.PVRDMA_UAR_CQ_OFFSET
	uarSRQOffset = uverbs.PVRDMA_UAR_SRQ_OFFSET
	uarQPSend    = uint32(uverbs.PVRDMA_UAR_QP_SEND)
	uarQPRecv    = uint32(1) << 31
	uarCQArmSol  = uint32(uverbs.PVRDMA_UAR_CQ_ARM_SOL)
	uarCQArm     = uint32(uverbs.PVRDMA_UAR_CQ_ARM)
	uarCQPoll    = uint32(1) << 31
	uarSRQRecv   = uint32(uverbs.PVRDMA_UAR_SRQ_RECV)
	uarLen       = 12 // the three doorbells
)

// ring is one struct pvrdma_ring in shared memory and the number of
// elements n (a power of two) of the queue it indexes.
type ring struct {
	prodTail *uint32
	consHead *uint32
	n        uint32
}

func newRing(state unsafe.Pointer, n uint32) ring {
	return ring{prodTail: (*uint32)(state), consHead: (*uint32)(unsafe.Add(state, 4)), n: n}
}

// idxValid is pvrdma_idx_valid: idx is below 2n.
func idxValid(idx, n uint32) bool { return idx&^(n<<1-1) == 0 }

// idxInc is pvrdma_idx_ring_inc: the next index, modulo 2n (the wrap bit
// flips every n increments).
func idxInc(idx, n uint32) uint32 { return (idx + 1) & (n<<1 - 1) }

// space is pvrdma_idx_ring_has_space for the producer: the slot of the
// producer index and whether it is free; valid is false if either index is
// out of range. The consumer index is loaded with acquire order: a slot
// the device released is not written before the device read it.
func (r ring) space() (slot uint32, free, valid bool) {
	tail := *r.prodTail // ours: only the producer writes it
	head := atomic.LoadUint32(r.consHead)
	if !idxValid(tail, r.n) || !idxValid(head, r.n) {
		return 0, false, false
	}
	return tail & (r.n - 1), tail != head^r.n, true
}

// data is pvrdma_idx_ring_has_data for the consumer: the slot of the
// consumer index and whether the producer filled it; valid is false if
// either index is out of range. The producer index is loaded with acquire
// order, so the element is read after it (rdma-core's
// udma_from_device_barrier after the index check).
func (r ring) data() (slot uint32, full, valid bool) {
	tail := atomic.LoadUint32(r.prodTail)
	head := atomic.LoadUint32(r.consHead)
	if !idxValid(tail, r.n) || !idxValid(head, r.n) {
		return 0, false, false
	}
	return head & (r.n - 1), tail != head, true
}

// count is how many elements are between the consumer and the producer
// index (0 for an invalid ring state).
func (r ring) count() uint32 {
	tail := atomic.LoadUint32(r.prodTail)
	head := atomic.LoadUint32(r.consHead)
	if !idxValid(tail, r.n) || !idxValid(head, r.n) {
		return 0
	}
	return (tail - head) & (r.n<<1 - 1)
}

// produce advances the producer index with a release store: the element
// written before is visible to the device before the index that hands it
// over (rdma-core: udma_to_device_barrier, then pvrdma_idx_ring_inc).
func (r ring) produce() {
	provider.StoreRelease(r.prodTail, idxInc(*r.prodTail, r.n))
}

// consume advances the consumer index with a release store: the element
// was copied out before the producer may reuse it.
func (r ring) consume() {
	provider.StoreRelease(r.consHead, idxInc(*r.consHead, r.n))
}

// reset empties the ring (pvrdma_init_qp_queue).
func (r ring) reset() {
	provider.StoreRelease(r.prodTail, 0)
	provider.StoreRelease(r.consHead, 0)
}

// ringDoorbell writes v to the doorbell at db, a word of the UAR page, after
// toDevice: everything written before (WQEs, ring indices) reaches the
// device first. The store itself is a plain 32-bit store (MOV, STR W), as
// rdma-core's pvrdma_write_uar_*: the UAR is device memory that no Go code
// reads, so it needs no atomic, and a locked instruction on uncached
// memory would lock the bus. The call to the assembly toDevice keeps the
// compiler from moving it, or the stores before it, across.
func ringDoorbell(db *uint32, v uint32) {
	toDevice()
	*db = v
}

// pow2 is rdma-core's align_next_power2: the smallest power of two not
// below v (1 for 0).
func pow2(v uint32) uint32 {
	n := uint32(1)
	for n < v && n < 1<<31 {
		n <<= 1
	}
	return n
}

// align rounds v up to a multiple of the power of two a.
func align(v, a uintptr) uintptr { return (v + a - 1) &^ (a - 1) }

// pageSize is the page size the buffers are laid out with (rdma-core:
// sysconf(_SC_PAGESIZE)); the kernel pins whole pages.
var pageSize = uintptr(unix.Getpagesize())

// errQueueSize is a queue the device cannot index. It matches
// unix.EINVAL, the kernel's answer to a queue beyond the device's limits
// on every other provider, which the provider's refusal stands in for.
var errQueueSize = fmt.Errorf("pvrdma: queue size out of range: %w", unix.EINVAL)

// allocBuf allocates size bytes (rounded up to whole pages) of zeroed,
// page-aligned memory off the Go heap for a queue the kernel pins
// (pvrdma_alloc_buf: anonymous private mapping, excluded from fork).
func allocBuf(size uintptr) ([]byte, error) {
	if size == 0 || size > 1<<31 {
		return nil, fmt.Errorf("%w: %d bytes", errQueueSize, size)
	}
	b, err := unix.Mmap(-1, 0, int(align(size, pageSize)), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("pvrdma: allocate %d bytes: %w", size, err)
	}
	if err := unix.Madvise(b, unix.MADV_DONTFORK); err != nil {
		unix.Munmap(b)
		return nil, fmt.Errorf("pvrdma: madvise DONTFORK: %w", err)
	}
	return b, nil
}

// freeBuf releases a buffer of allocBuf; nil is ignored.
func freeBuf(b []byte) error {
	if b == nil {
		return nil
	}
	return unix.Munmap(b)
}

// addr is the address of a buffer, for a create command.
func addr(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

// wcStatus maps enum pvrdma_wc_status to ibv_wc_status: the two enums
// list the same statuses in the same order (the kernel's
// pvrdma_wc_status_to_ib and rdma-core's pvrdma_wc_status_to_ibv are
// casts); the table makes that explicit and bounds it.
var wcStatus = [...]provider.WCStatus{
	uverbs.PVRDMA_WC_SUCCESS:            provider.WCSuccess,
	uverbs.PVRDMA_WC_LOC_LEN_ERR:        provider.WCLocLenErr,
	uverbs.PVRDMA_WC_LOC_QP_OP_ERR:      provider.WCLocQPOpErr,
	uverbs.PVRDMA_WC_LOC_EEC_OP_ERR:     3, // IBV_WC_LOC_EEC_OP_ERR
	uverbs.PVRDMA_WC_LOC_PROT_ERR:       provider.WCLocProtErr,
	uverbs.PVRDMA_WC_WR_FLUSH_ERR:       provider.WCWRFlushErr,
	uverbs.PVRDMA_WC_MW_BIND_ERR:        6, // IBV_WC_MW_BIND_ERR
	uverbs.PVRDMA_WC_BAD_RESP_ERR:       provider.WCBadRespErr,
	uverbs.PVRDMA_WC_LOC_ACCESS_ERR:     provider.WCLocAccessErr,
	uverbs.PVRDMA_WC_REM_INV_REQ_ERR:    provider.WCRemInvReqErr,
	uverbs.PVRDMA_WC_REM_ACCESS_ERR:     provider.WCRemAccessErr,
	uverbs.PVRDMA_WC_REM_OP_ERR:         provider.WCRemOpErr,
	uverbs.PVRDMA_WC_RETRY_EXC_ERR:      provider.WCRetryExcErr,
	uverbs.PVRDMA_WC_RNR_RETRY_EXC_ERR:  provider.WCRNRRetryExcErr,
	uverbs.PVRDMA_WC_LOC_RDD_VIOL_ERR:   14, // IBV_WC_LOC_RDD_VIOL_ERR
	uverbs.PVRDMA_WC_REM_INV_RD_REQ_ERR: 15, // IBV_WC_REM_INV_RD_REQ_ERR
	uverbs.PVRDMA_WC_REM_ABORT_ERR:      16, // IBV_WC_REM_ABORT_ERR
	uverbs.PVRDMA_WC_INV_EECN_ERR:       17, // IBV_WC_INV_EECN_ERR
	uverbs.PVRDMA_WC_INV_EEC_STATE_ERR:  18, // IBV_WC_INV_EEC_STATE_ERR
	uverbs.PVRDMA_WC_FATAL_ERR:          provider.WCFatalErr,
	uverbs.PVRDMA_WC_RESP_TIMEOUT_ERR:   provider.WCRespTimeoutErr,
	uverbs.PVRDMA_WC_GENERAL_ERR:        provider.WCGeneralErr,
}

// wcOpcode maps enum pvrdma_wc_opcode to ibv_wc_opcode. The enums differ
// from PVRDMA_WC_LSO on (ibv has no LSO before LOCAL_INV), so a cast, as
// rdma-core's pvrdma_wc_opcode_to_ibv does, would be wrong there. ok is
// false for an opcode with no verbs counterpart (LSO, FAST_REG_MR) or out
// of range.
func wcOpcode(op uint32) (o provider.WCOpcode, ok bool) {
	switch op {
	case uverbs.PVRDMA_WC_SEND:
		return provider.WCSend, true
	case uverbs.PVRDMA_WC_RDMA_WRITE:
		return provider.WCRDMAWrite, true
	case uverbs.PVRDMA_WC_RDMA_READ:
		return provider.WCRDMARead, true
	case uverbs.PVRDMA_WC_COMP_SWAP, uverbs.PVRDMA_WC_MASKED_COMP_SWAP:
		return provider.WCCompSwap, true
	case uverbs.PVRDMA_WC_FETCH_ADD, uverbs.PVRDMA_WC_MASKED_FETCH_ADD:
		return provider.WCFetchAdd, true
	case uverbs.PVRDMA_WC_BIND_MW:
		return provider.WCBindMW, true
	case uverbs.PVRDMA_WC_LOCAL_INV:
		return provider.WCLocalInv, true
	case uverbs.PVRDMA_WC_RECV:
		return provider.WCRecv, true
	case uverbs.PVRDMA_WC_RECV_RDMA_WITH_IMM:
		return provider.WCRecvRDMAWithImm, true
	}
	return 0, false
}

// wcFlagsMask are the completion flags that pass through: pvrdma's
// GRH, WITH_IMM and WITH_INVALIDATE are the kernel's IB_WC_* bits
// (rdma-core's pvrdma_wc_flags_to_ibv is the identity); the others (IP
// checksum, SMAC, VLAN, network header type) have no place in a WC.
const wcFlagsMask = provider.WCGRH | provider.WCWithImm | provider.WCWithInvalidate
