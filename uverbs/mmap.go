package uverbs

import "golang.org/x/sys/unix"

// Mmap maps size bytes of a provider queue at offset of the uverbs fd
// (MAP_SHARED, read-write). Providers such as rxe return the offset and size
// in their create responses; each offset can be mapped once.
//
// A live mapping holds a reference on the uverbs file: the kernel context
// and all its objects stay alive until every mapping is gone.
func Mmap(fd *FD, offset uint64, size int) ([]byte, error) {
	var b []byte
	err := fd.Use(func(raw int) error {
		var err error
		if fd.fake != nil {
			b, err = fd.fake.Mmap(raw, int64(offset), size)
			return err
		}
		b, err = unix.Mmap(raw, int64(offset), size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		return err
	})
	if err != nil {
		return nil, wrap("mmap", err)
	}
	return b, nil
}

// Munmap releases a mapping made by Mmap.
func Munmap(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return wrap("munmap", unix.Munmap(b))
}
