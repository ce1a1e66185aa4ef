//go:build amd64 || arm64

package mlx5

import "unsafe"

// The barriers of rdma-core's util/udma_barrier.h that libmlx5 uses, in
// assembly: Go's sync/atomic orders memory between goroutines (on arm64
// with load-acquire and store-release, which order accesses for observers
// in the inner shareable domain), but a device reading memory by DMA and
// device memory (the UAR page) stand outside that domain, and Go has no
// fence instruction of its own. Each function is also a compiler barrier:
// the compiler neither inlines an assembly function nor moves memory
// accesses across a call to one.

// toDevice is udma_to_device_barrier: WQEs and doorbell records written
// before it reach memory before anything written after it (amd64: a
// compiler barrier only, x86-TSO keeps stores in order; arm64: DSB ST).
func toDevice()

// fromDevice is udma_from_device_barrier: the CQE read after it is not
// older than the owner bit read before it (amd64: LFENCE; arm64: DSB LD).
func fromDevice()

// wcStart is mmio_wc_start: the doorbell record is visible before the
// stores to the write-combining BlueFlame register that follow (amd64:
// SFENCE; arm64: DSB ST).
func wcStart()

// wcFlush is mmio_flush_writes: the BlueFlame stores leave the CPU's
// write-combining buffer before anything after (amd64: SFENCE; arm64:
// DSB ST).
func wcFlush()

// full is a full barrier (amd64: MFENCE; arm64: DSB SY): the arm doorbell
// before any CQE check after it (see provider.CQ's Arm).
func full()

// copy64 copies 64 bytes from src to the BlueFlame register at dst in
// ascending address order (mmio_memcpy_x64 of one block): on amd64 eight
// 8-byte stores, as rdma-core's generic version; on arm64 one 64-byte
// store of four vector registers (ST1; rdma-core's vst4q_u64 of a vld4q_u64
// stores the same bytes with one instruction too), so that the
// write-combining buffer sees the block whole.
func copy64(dst, src unsafe.Pointer)

// store64 is a single 64-bit store to device memory that the compiler
// neither splits nor merges (mmio_write64_be's store; the value is in
// memory order already).
func store64(p *uint64, v uint64)
