// Package uverbs is the kernel ABI of goverbs and nothing else: the structs
// and constants of the RDMA user-space ABI (generated from the UAPI headers
// in /usr/include/rdma by mkabi.sh), the framing of RDMA_VERBS_IOCTL requests
// and legacy write() commands on /dev/infiniband/uverbsN and
// /dev/infiniband/rdma_cm, and mmap of provider queues.
//
// It knows nothing about completion queues, rings or connections; the verbs,
// cq, qp, srq, mr and cm packages build those on top of it.
//
// # Errors
//
// Every failing kernel call returns an *OpError naming the operation, which
// wraps the errno:
//
//	err := req.Do(fd)
//	errors.Is(err, unix.EINVAL) // true for a malformed request
//
// # Memory
//
// Attributes and commands embed user addresses as 64-bit integers. Requests
// keep a GC-visible pointer to everything they point at (see Ioctl.In and
// Ioctl.Out) for the duration of the call; callers must not pass the address
// of memory that can move (goroutine stacks) to anything the kernel keeps
// after the call returns. Memory the kernel keeps (memory regions, rings) is
// the business of the mr and provider packages, which use off-heap mappings.
//
// Field names of the generated structs follow cgo -godefs, which drops a
// prefix shared by a struct's fields (timeout_ms becomes Ms in
// UcmResolveRoute, wr_id becomes Id in RxeRecvWqe); abi_test.go pins every
// offset the rest of goverbs relies on.
package uverbs

//go:generate ./mkabi.sh
