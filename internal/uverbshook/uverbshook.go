// Package uverbshook lets a test answer for the uverbs kernel driver: a
// fake kernel installed here receives the commands (RDMA_VERBS_IOCTL and
// legacy write) and mmaps that goverbs issues on the descriptors it opened,
// in place of the system calls. The mlx5 provider's differential tests use
// it (internal/provider/mlx5/difftest) to run goverbs against the same fake
// device as rdma-core's libmlx5.
//
// Nothing outside tests installs a kernel, and nothing reads the
// environment: a program built from goverbs cannot turn the hook on. When
// no kernel is installed, the cost is a nil check when a descriptor is
// opened and when a command is issued, none on the data path.
package uverbshook

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Kernel is a user-space stand-in for the uverbs kernel driver.
type Kernel interface {
	// Open opens the character device at path (verbs.OpenDevice's
	// open, stat and device checks in one) and returns a real
	// descriptor the caller owns and closes, which the kernel answers
	// from then on.
	Open(path string) (raw int, err error)
	// Answers reports whether raw is a descriptor Open returned and not
	// yet seen closed.
	Answers(raw int) bool
	// Ioctl carries out RDMA_VERBS_IOCTL on raw, whose argument (struct
	// ib_uverbs_ioctl_hdr and its attributes) is at req.
	Ioctl(raw int, req unsafe.Pointer) unix.Errno
	// Write carries out a legacy write() command on raw.
	Write(raw int, b []byte) unix.Errno
	// Mmap maps size bytes at offset of raw.
	Mmap(raw int, offset int64, size int) ([]byte, error)
}

type box struct{ k Kernel }

var installed atomic.Pointer[box]

// Install makes k the kernel for every device opened until restore is
// called. Only tests call it.
func Install(k Kernel) (restore func()) {
	old := installed.Swap(&box{k})
	return func() { installed.Store(old) }
}

// Installed returns the installed kernel, or nil.
func Installed() Kernel {
	if b := installed.Load(); b != nil {
		return b.k
	}
	return nil
}

// For returns the installed kernel if it answers raw, or nil.
func For(raw int) Kernel {
	if k := Installed(); k != nil && k.Answers(raw) {
		return k
	}
	return nil
}

// Sysfs is implemented by a Kernel that also presents a sysfs tree, as
// a fake kernel for libibverbs does through $SYSFS_PATH. While such a
// kernel is installed, verbs.Devices lists the devices of that tree
// instead of asking RDMA netlink, and reports their sysfs directories
// under it.
type Sysfs interface {
	// SysfsRoot returns the directory that stands for /sys, or "" for
	// the real one.
	SysfsRoot() string
}

// SysfsRoot returns the installed kernel's sysfs root (Sysfs), or "".
func SysfsRoot() string {
	if s, ok := Installed().(Sysfs); ok {
		return s.SysfsRoot()
	}
	return ""
}
