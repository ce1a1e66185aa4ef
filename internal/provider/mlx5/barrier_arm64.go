package mlx5

import "unsafe"

// copyFlush is copy64 of the n bytes at src (a multiple of 64) to dst,
// block after block, and then wcFlush.
func copyFlush(dst, src unsafe.Pointer, n uintptr) {
	for i := uintptr(0); i < n; i += 64 {
		copy64(unsafe.Add(dst, i), unsafe.Add(src, i))
	}
	wcFlush()
}

// wcStartLocked is mmio_wc_spinlock's barrier, after the lock of a shared
// BlueFlame register was taken: on arm64 wcStart's DSB ST (taking the lock
// orders nothing for device memory).
func wcStartLocked()
