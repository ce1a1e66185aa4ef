// Package rxe is the provider for the rxe (Soft-RoCE) driver: it
// implements package internal/provider's interfaces (provider.go) with the
// layout of rxe's shared queues and work queue elements. The kernel
// allocates every queue; user space maps it (mmap of the uverbs fd at the
// offset the create response gives) and moves indices:
//
//   - send, receive and SRQ queues: user space writes the element at the
//     producer index, then publishes producer+1 with release order; the
//     kernel owns the consumer index;
//   - completion queues: the kernel produces; user space loads the producer
//     with acquire order, copies the element, and publishes consumer+1.
//
// Indices are stored masked, and one slot always stays empty: the queue is
// empty when producer == consumer and full when producer+1 == consumer.
//
// Sends need a system call: the kernel's POST_SEND with no work requests
// (SendQueue.Post asks the generic code for it), in which rxe sends (Linux
// 6.1) or schedules its sender (6.12). Receives need none. CQs are armed
// with the kernel's REQ_NOTIFY_CQ command (CQ.Arm asks for it).
package rxe

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/uverbs"
)

// Offsets in struct rxe_queue_buf (pinned by the uverbs ABI test).
const (
	offProducer = unsafe.Offsetof(uverbs.RxeQueueBuf{}.Producer_index)
	offConsumer = unsafe.Offsetof(uverbs.RxeQueueBuf{}.Consumer_index)
	offData     = unsafe.Sizeof(uverbs.RxeQueueBuf{})
)

// Queue is one mapped rxe queue.
type Queue struct {
	mem   []byte
	base  unsafe.Pointer
	data  unsafe.Pointer
	prod  *uint32
	cons  *uint32
	mask  uint32
	shift uint32
}

// NewQueue checks the header of a mapped queue and wraps it. minElem is the
// smallest element size the caller will write or read.
func NewQueue(mem []byte, minElem uintptr) (*Queue, error) {
	if uintptr(len(mem)) < offData {
		return nil, fmt.Errorf("rxe: queue mapping of %d bytes is shorter than its header", len(mem))
	}
	hdr := (*uverbs.RxeQueueBuf)(unsafe.Pointer(&mem[0]))
	shift, mask := hdr.Log2_elem_size, hdr.Index_mask
	if shift < 6 || shift > 16 || mask == 0 || mask&(mask+1) != 0 {
		return nil, fmt.Errorf("rxe: bad queue header: log2_elem_size %d, index_mask %#x", shift, mask)
	}
	if uintptr(1)<<shift < minElem {
		return nil, fmt.Errorf("rxe: queue elements of %d bytes, need %d", 1<<shift, minElem)
	}
	if need := offData + uintptr(mask+1)<<shift; uintptr(len(mem)) < need {
		return nil, fmt.Errorf("rxe: queue mapping of %d bytes, %d slots of %d bytes need %d", len(mem), mask+1, 1<<shift, need)
	}
	base := unsafe.Pointer(&mem[0])
	return &Queue{
		mem:   mem,
		base:  base,
		data:  unsafe.Add(base, offData),
		prod:  (*uint32)(unsafe.Add(base, offProducer)),
		cons:  (*uint32)(unsafe.Add(base, offConsumer)),
		mask:  mask,
		shift: shift,
	}, nil
}

// Mem returns the mapping, for munmap.
func (q *Queue) Mem() []byte { return q.mem }

// Slots is the number of slots; one is always kept empty.
func (q *Queue) Slots() uint32 { return q.mask + 1 }

// ElemSize is the size of one element.
func (q *Queue) ElemSize() uintptr { return uintptr(1) << q.shift }

// Elem returns the address of the element at (masked) index i.
func (q *Queue) Elem(i uint32) unsafe.Pointer {
	return unsafe.Add(q.data, uintptr(i&q.mask)<<q.shift)
}

// Index accesses. Each side owns one index and only reads the other's:
//
//   - its own index it reads with a plain load: only this process writes
//     it, always under the ring's Lock, so the last value written is the
//     one read (no ordering with the kernel is involved);
//   - the kernel's index it reads with atomic.LoadUint32, an acquire load:
//     a plain MOV on amd64 (x86-TSO never reorders a load with a later load
//     or store) and LDARW on arm64. Acquire is needed: the kernel stores
//     its index with release order after it finished reading a WQE (or
//     writing a CQE), and the slot must not be reused (or the CQE read)
//     before that;
//   - its own index it publishes with provider.StoreRelease: the WQE writes (or CQE
//     reads) before it must be complete when the kernel sees the new
//     index. That is a plain MOV on amd64 and STLRW on arm64, what
//     rdma-core's atomic_store_explicit(memory_order_release) compiles to.

// Producer-side operations (SQ, RQ, SRQ: user space produces).

// ProducerIndex returns the current producer index (user-owned; the
// caller holds the ring's Lock).
func (q *Queue) ProducerIndex() uint32 { return *q.prod }

// Free returns how many elements can be produced now.
func (q *Queue) Free() uint32 {
	c := atomic.LoadUint32(q.cons) // acquire: the kernel is done with slots before c
	return (c - *q.prod - 1) & q.mask
}

// Publish makes the elements up to index p (exclusive, masked) visible to
// the kernel: a release store of the producer index.
func (q *Queue) Publish(p uint32) { provider.StoreRelease(q.prod, p&q.mask) }

// Next returns index i+1, masked.
func (q *Queue) Next(i uint32) uint32 { return (i + 1) & q.mask }

// Consumer-side operations (CQ: user space consumes).

// ConsumerIndex returns the current consumer index (user-owned; the
// caller holds the ring's Lock).
func (q *Queue) ConsumerIndex() uint32 { return *q.cons }

// Available returns how many elements the kernel has produced and user
// space has not consumed. It may run without the ring's Lock (a count for
// CQ.Queued), so it loads the consumer index atomically too: on amd64 that
// is the same MOV as a plain load.
func (q *Queue) Available() uint32 {
	p := atomic.LoadUint32(q.prod) // acquire: elements before p are written
	return (p - atomic.LoadUint32(q.cons)) & q.mask
}

// Consume releases the elements before index c (masked) back to the
// kernel: a release store, so the copies out of them are complete before
// the kernel may overwrite them.
func (q *Queue) Consume(c uint32) { provider.StoreRelease(q.cons, c&q.mask) }
