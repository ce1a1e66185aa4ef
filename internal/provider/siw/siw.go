// Package siw is the provider for the siw (soft-iWARP) driver: it
// implements package internal/provider's interfaces (provider.go) with the
// layout of siw's shared queues and work queue elements. The kernel
// allocates every queue (vmalloc_user) and hands out an mmap key for
// it in the create response (siw-abi.h); user space maps the uverbs fd at
// that offset.
//
// Unlike rxe there are no shared indices: each element carries its own
// ownership in its flags word (SIW_WQE_VALID).
//
//   - send, receive and SRQ queues: user space fills a free element (VALID
//     clear) and then sets VALID with a release store; the kernel clears
//     VALID when it has taken the element (a send when it starts
//     processing it, a receive when it completes it). A slot whose VALID is
//     still set is in use: the queue is full there;
//   - completion queues: the kernel writes a CQE whose VALID is clear and
//     sets VALID; user space loads VALID with acquire order, copies the
//     CQE and clears VALID, handing the slot back;
//   - the CQ's notification state is a word after the last CQE
//     (struct siw_cq_ctrl): user space arms the CQ by storing the notify
//     flags there, with no system call; the kernel disarms it when it
//     raises the completion event.
//
// Sends need a system call: the kernel processes a user send queue only in
// POST_SEND (an empty work request list is siw's doorbell) or on its own
// workqueue once started. Receives need none: the kernel reads the receive
// queue when a message arrives.
//
// All producers and the consumer are free-running counters taken modulo
// the (power of two) queue size, as in the kernel and in rdma-core.
package siw

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/uverbs"
)

// Element sizes (siw-abi.h, pinned by uverbs' layout of the structs).
const (
	SQESize  = unsafe.Sizeof(uverbs.SiwSqe{}) // 104
	RQESize  = unsafe.Sizeof(uverbs.SiwRqe{}) // 112
	CQESize  = unsafe.Sizeof(uverbs.SiwCqe{}) // 32
	ctrlSize = unsafe.Sizeof(uverbs.SiwCqCtrl{})

	// MaxSGE is the most SGEs a siw work request holds.
	MaxSGE = len(uverbs.SiwSqe{}.Sge)
	// MaxInline is the most inline data a send carries: it occupies
	// sge[1..MaxSGE-1] of the SQE.
	MaxInline = int(unsafe.Sizeof(uverbs.SiwSge{})) * (MaxSGE - 1)

	// offFlags is the offset of the 32-bit word that holds an SQE's or
	// RQE's flags, num_sge and opcode, and a CQE's flags, opcode and
	// status: loaded and stored as one word so that ownership moves with
	// one atomic access.
	offFlags = unsafe.Offsetof(uverbs.SiwSqe{}.Flags)
)

// wqeHead is the word at offFlags of an SQE or RQE.
type wqeHead struct {
	flags  uint16
	numSGE uint8
	opcode uint8
}

func (h wqeHead) word() uint32 { return *(*uint32)(unsafe.Pointer(&h)) }

func headOf(w uint32) wqeHead { return *(*wqeHead)(unsafe.Pointer(&w)) }

// cqeHead is the word at offFlags of a CQE.
type cqeHead struct {
	flags  uint8
	opcode uint8
	status uint16
}

func cqeHeadOf(w uint32) cqeHead { return *(*cqeHead)(unsafe.Pointer(&w)) }

func init() {
	// The one-word ownership accesses rely on these offsets.
	if unsafe.Offsetof(uverbs.SiwRqe{}.Flags) != offFlags || unsafe.Offsetof(uverbs.SiwCqe{}.Flags) != offFlags ||
		unsafe.Offsetof(uverbs.SiwSqe{}.Opcode) != offFlags+3 || unsafe.Offsetof(uverbs.SiwCqe{}.Status) != offFlags+2 {
		panic("siw: unexpected siw-abi layout")
	}
}

// ring is a mapped array of n (a power of two) elements of size esz.
type ring struct {
	mem  []byte
	base unsafe.Pointer
	mask uint32
	esz  uintptr
}

func newRing(mem []byte, n uint32, esz uintptr, extra uintptr) (ring, error) {
	if n == 0 || n&(n-1) != 0 || n > 1<<24 {
		return ring{}, fmt.Errorf("siw: queue of %d elements is not a power of two", n)
	}
	if need := uintptr(n)*esz + extra; uintptr(len(mem)) < need {
		return ring{}, fmt.Errorf("siw: queue mapping of %d bytes, %d elements of %d bytes need %d", len(mem), n, esz, need)
	}
	return ring{mem: mem, base: unsafe.Pointer(&mem[0]), mask: n - 1, esz: esz}, nil
}

func (r *ring) elem(i uint32) unsafe.Pointer { return unsafe.Add(r.base, uintptr(i&r.mask)*r.esz) }

func (r *ring) head(i uint32) *uint32 { return (*uint32)(unsafe.Add(r.elem(i), offFlags)) }

// valid loads the ownership word of element i with acquire order and
// reports whether VALID is set.
func (r *ring) valid(i uint32) bool {
	return headOf(atomic.LoadUint32(r.head(i))).flags&uverbs.SIW_WQE_VALID != 0
}

// QueueLen is the byte length to map for a send queue, receive queue or
// SRQ of n elements of size esz, or a CQ of n CQEs (with its control word).
func QueueLen(n uint32, esz uintptr) int { return int(uintptr(n) * esz) }

// CQLen is the byte length to map for a CQ of n CQEs and its control word.
func CQLen(n uint32) int { return int(uintptr(n)*CQESize + ctrlSize) }

// Opcode mapping of completions (siw_opcode to ibv_wc_opcode), as the
// kernel's siw_cq.c and rdma-core map them. Opcodes past the table (a
// corrupted CQE) report a general error.
var wcOpcode = [uverbs.SIW_NUM_OPCODES]provider.WCOpcode{
	uverbs.SIW_OP_WRITE:           provider.WCRDMAWrite,
	uverbs.SIW_OP_READ:            provider.WCRDMARead,
	uverbs.SIW_OP_READ_LOCAL_INV:  provider.WCRDMARead,
	uverbs.SIW_OP_SEND:            provider.WCSend,
	uverbs.SIW_OP_SEND_WITH_IMM:   provider.WCSend,
	uverbs.SIW_OP_SEND_REMOTE_INV: provider.WCSend,
	uverbs.SIW_OP_FETCH_AND_ADD:   provider.WCFetchAdd,
	uverbs.SIW_OP_COMP_AND_SWAP:   provider.WCCompSwap,
	uverbs.SIW_OP_RECEIVE:         provider.WCRecv,
	uverbs.SIW_OP_READ_RESPONSE:   provider.WCRDMARead,
	uverbs.SIW_OP_INVAL_STAG:      provider.WCLocalInv,
	uverbs.SIW_OP_REG_MR:          provider.WCSend,
}

// wcStatus maps enum siw_wc_status to ibv_wc_status.
var wcStatus = [uverbs.SIW_NUM_WC_STATUS]provider.WCStatus{
	uverbs.SIW_WC_SUCCESS:         provider.WCSuccess,
	uverbs.SIW_WC_LOC_LEN_ERR:     provider.WCLocLenErr,
	uverbs.SIW_WC_LOC_PROT_ERR:    provider.WCLocProtErr,
	uverbs.SIW_WC_LOC_QP_OP_ERR:   provider.WCLocQPOpErr,
	uverbs.SIW_WC_WR_FLUSH_ERR:    provider.WCWRFlushErr,
	uverbs.SIW_WC_BAD_RESP_ERR:    provider.WCBadRespErr,
	uverbs.SIW_WC_LOC_ACCESS_ERR:  provider.WCLocAccessErr,
	uverbs.SIW_WC_REM_ACCESS_ERR:  provider.WCRemAccessErr,
	uverbs.SIW_WC_REM_INV_REQ_ERR: provider.WCRemInvReqErr,
	uverbs.SIW_WC_GENERAL_ERR:     provider.WCGeneralErr,
}
