//go:build !amd64 && !arm64

package mlx5

import (
	"sync/atomic"
	"unsafe"
)

var fence atomic.Uint32

// On architectures goverbs does not test, every barrier is a sequentially
// consistent atomic operation: at least as strong on the CPU side as
// barrier.go describes, and unverified against device memory.
func toDevice()      { fence.Add(1) }
func fromDevice()    { fence.Add(1) }
func wcStart()       { fence.Add(1) }
func wcStartLocked() { fence.Add(1) }
func wcFlush()       { fence.Add(1) }
func full()          { fence.Add(1) }

func store64(p *uint64, v uint64) { atomic.StoreUint64(p, v) }

func copyFlush(dst, src unsafe.Pointer, n uintptr) {
	for i := uintptr(0); i < n; i += 64 {
		copy64(unsafe.Add(dst, i), unsafe.Add(src, i))
	}
	wcFlush()
}

func copy64(dst, src unsafe.Pointer) {
	for i := uintptr(0); i < 64; i += 8 {
		atomic.StoreUint64((*uint64)(unsafe.Add(dst, i)), *(*uint64)(unsafe.Add(src, i)))
	}
}
