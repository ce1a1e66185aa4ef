package mlx5

import "unsafe"

// copyFlush is copy64 of the n bytes at src (a multiple of 64) to dst,
// block after block, and then wcFlush: one call where a WQE's BlueFlame
// copy would make several.
func copyFlush(dst, src unsafe.Pointer, n uintptr)

// wcStartLocked is mmio_wc_spinlock's barrier, after the lock of a shared
// BlueFlame register was taken: on amd64 none, the locked instruction that
// took it orders the write-combining stores after it (rdma-core relies on
// the same), so it is an empty function the compiler inlines.
func wcStartLocked() {}
