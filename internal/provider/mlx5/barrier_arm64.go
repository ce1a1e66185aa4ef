package mlx5

// wcStartLocked is mmio_wc_spinlock's barrier, after the lock of a shared
// BlueFlame register was taken: on arm64 wcStart's DSB ST (taking the lock
// orders nothing for device memory).
func wcStartLocked()
