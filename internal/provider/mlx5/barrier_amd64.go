package mlx5

// wcStartLocked is mmio_wc_spinlock's barrier, after the lock of a shared
// BlueFlame register was taken: on amd64 none, the locked instruction that
// took it orders the write-combining stores after it (rdma-core relies on
// the same), so it is an empty function the compiler inlines.
func wcStartLocked() {}
