//go:build amd64 || arm64

package pvrdma

// toDevice orders every store before it (WQEs, SGEs, a ring's producer
// index: ordinary write-back memory the device reads by DMA) before every
// store after it, the UAR doorbell (uncached device memory) in particular.
// It is rdma-core's udma_to_device_barrier, written in assembly because Go
// has no such fence:
//
//   - amd64: nothing but a compiler barrier (a call to an assembly
//     function, which the compiler neither inlines nor reorders memory
//     accesses across). x86-TSO keeps stores in program order, and a store
//     to uncached (UC) memory, as the kernel maps the UAR
//     (pgprot_noncached), is not passed by earlier write-back stores; this
//     is what rdma-core's asm volatile("" ::: "memory") relies on too.
//   - arm64: DSB ST. The UAR is Device memory and the rings Normal memory;
//     a store-release (STLR) orders them for observers in the inner
//     shareable domain, but the device is outside it, so the stores must
//     complete first, as rdma-core's udma_to_device_barrier (dsb st) and
//     the kernel's writel (dmb oshst before the store) make sure.
func toDevice()

// full is a full barrier: every load and store before it completes before
// any load after it (MFENCE on amd64, DSB SY on arm64). It follows the arm
// doorbell, which the CQE check after an arm must not pass (see CQ.Arm).
func full()
