// Package cm is the RDMA connection manager (rdma_cm), spoken directly to
// the kernel over /dev/infiniband/rdma_cm instead of through librdmacm.
//
// A [Channel] owns the rdma_cm file; one goroutine per channel reads its
// events, parked on Go's netpoller, and queues each on the [ID] it belongs
// to. IDs live in a port space ([TCP] for reliable connected QPs,
// qp.RC; [UDP] for unreliable datagram QPs, qp.UD: rdma_cm's names, no IP
// protocol is involved) and follow the sockets-like flow of
// librdmacm: [ID.Bind], [ID.ResolveAddr] and [ID.ResolveRoute] on the active
// side, [ID.Listen] and [ID.GetRequest] on the passive side, then
// [ID.CreateQP], [ID.Connect] / [ID.Accept] or [ID.Reject], and
// [ID.Disconnect] or [ID.DisconnectContext]. Everything that waits for the
// peer or the fabric takes a context.Context. [ID.Done] is closed when a
// connection ends (the peer disconnected, or the attempt failed), so a
// program selects on it instead of running an event loop for it; [ID.Err]
// says why.
//
// Around the kernel's commands the package does what librdmacm does: it
// moves the ID's queue pair through its states with the attributes the
// kernel hands out (INIT_QP_ATTR), re-applying INIT before RTR so remote
// access is granted, sends the RTU, and moves the QP to ERR before a
// disconnect. One thing it does differently: the kernel's connection
// manager gives an RC QP a minimum RNR timer of 655.36 ms, so that every
// SEND that finds no receive posted waits two thirds of a second before it
// is retried, and librdmacm leaves it so; cm sets [ConnParam.MinRNRTimer],
// 0.64 ms unless told otherwise. Each channel opens (or is given, [Channel.AttachContext]) the
// verbs Context of the devices its IDs bind to, shared by the IDs and
// reference-counted. [ID.Migrate] moves an ID to another channel.
//
// [Queues] is librdmacm's rdma_verbs.h layer: a QP with its own send and
// receive completion queues and the one-call post and blocking,
// cancellable completion helpers ([Queues.GetRecvComp],
// [Queues.GetSendComp]).
//
// [Listen] and [Listener.Accept] are the shortcut for a server: one call
// per connection returns it established, its Queues made and, through
// [ListenOptions].Ready, its receives posted before the peer can send.
//
// Runnable programs are in the package's Examples (example_test.go,
// ep_example_test.go, listener_example_test.go; pkg.go.dev shows them, go
// doc does not): Example (an ID-level server and client), ExampleCreateEP
// (librdmacm's rdma_getaddrinfo and rdma_create_ep) and ExampleListen.
// They open rxe0 at 169.254.77.1, as the test bed in hack/vm has it.
//
// Private data reaches the peer padded by the kernel to the size of the
// message that carries it; [EncodePrivateData] frames a length for peers
// that want the exact bytes back.
package cm
