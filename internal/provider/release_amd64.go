//go:build amd64 && !race

package provider

// StoreRelease stores v at p with release order: every load and store
// before it in program order is visible to (and complete before) any agent
// that observes v — the kernel reading a producer index, or the next holder
// of a Lock.
//
// On amd64 a plain MOV is a release store: x86-TSO never reorders a store
// with an earlier load or store of the same CPU. So this is what
// atomic_store_explicit(memory_order_release) compiles to in rdma-core,
// instead of sync/atomic's StoreUint32, which is a sequentially consistent
// XCHG (a locked instruction, tens of cycles) on amd64.
//
// The compiler keeps the order too: gc threads every store through the
// SSA memory chain and schedules all loads of a memory state before the
// store that follows it, so no earlier access moves below this store after
// inlining. The race detector does not know that argument, so race builds
// use the atomic store (release_other.go).
func StoreRelease(p *uint32, v uint32) { *p = v }
