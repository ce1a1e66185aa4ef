// Package verbs is the entry point of goverbs: RDMA devices, the device
// context, and the objects and types every other package shares.
//
// [Devices] lists the RDMA devices the kernel has (over RDMA netlink, with a
// sysfs fallback), each with its driver, uverbs character device and node
// GUID. [Open] opens one and returns a [Context]: the uverbs file with the
// provider's context, the async-event file on Go's netpoller, and the
// registry of every object created on the context, which [Context.Close]
// destroys in the kernel's dependency order. From a Context come the device
// and port queries ([Context.QueryDevice], [Context.QueryPort], the GID
// table and [Context.RoutableGID], the GID a peer addresses a port by),
// protection domains ([Context.AllocPD]), address handles, completion
// channels and typed asynchronous events. On RoCE a [GID] is an IP
// address: [GID.Addr] and [GIDFromAddr] convert to and from netip.Addr.
//
// Examples call the Context dev: ctx is the name Go programs give a
// context.Context, which the waiting calls of the other packages take.
//
// The objects of the data path live in their own packages, built on a
// Context and a PD: memory regions and windows in mr, completion queues in
// cq, queue pairs in qp, shared receive queues in srq. Work requests
// ([SendWR], [RecvWR]) and completions ([WorkCompletion]) are defined here so
// that the provider code can encode and decode them without importing those
// packages. rdma_cm connections are in package cm, librpma's API in rpma.
//
// # Providers
//
// Posting and polling run in user space on the rings the provider's kernel
// driver maps into the process; goverbs implements the ring formats itself.
// A device whose driver goverbs has no implementation for is refused by
// [Open] with an error that names the driver and matches
// [ErrProviderNotSupported].
//
// # Errors
//
// Kernel calls fail with errors that wrap the errno (errors.Is(err,
// unix.EINVAL)); operations on a closed object fail with [ErrClosed]; the
// other conditions have sentinels in this package ([ErrNoDevice],
// [ErrQueueFull], ...). A completion that failed is an error too:
// [WorkCompletion.Err] returns a [*WCError], which errors.Is matches
// against its [WCStatus] (errors.Is(err, verbs.WCRetryExcErr)).
package verbs
