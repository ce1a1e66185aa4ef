//go:build !amd64 || race

package provider

import "sync/atomic"

// StoreRelease stores v at p with release order (see release_amd64.go for
// the contract). On arm64 sync/atomic's StoreUint32 is STLRW, a
// store-release and nothing more, the instruction rdma-core's
// atomic_store_explicit(memory_order_release) also compiles to; on other
// architectures it is at least as strong as release. Race builds use it on
// amd64 too, so the race detector sees the synchronization.
func StoreRelease(p *uint32, v uint32) { atomic.StoreUint32(p, v) }
