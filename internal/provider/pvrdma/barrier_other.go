//go:build !amd64 && !arm64

package pvrdma

import "sync/atomic"

var fence atomic.Uint32

// toDevice and full are, on architectures goverbs does not test, a
// sequentially consistent atomic operation: at least as strong as the
// fences barrier.go describes for amd64 and arm64 on the CPU side, and
// unverified against device memory.
func toDevice() { fence.Add(1) }

func full() { fence.Add(1) }
