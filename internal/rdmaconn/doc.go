// Package rdmaconn holds the machinery goverbs' two stream transports
// over RDMA connections, rsocket and valkeyrdma, share: both are a
// net.Conn and a net.Listener on rdma_cm's TCP port space, with one RC QP
// and one CQ (and completion channel) per connection, a ring of
// receives, and blocked calls that deadlines, Close and completions
// wake.
//
// It gives them the Listener's background accept loop and its queue of
// established connections; the active side's channel, ID and resolution
// steps, and the errno a failed connect wraps; the passive side's
// migration of a request to a channel of its own and its bounded accept;
// the Waiter of a blocked call (deadline, timer, wake-up channel); the
// re-posting of the receive ring; the watch for the CM's disconnect; the
// errno a failed work completion maps to; and the teardown of a
// connection's verbs objects. The protocols themselves (what goes on the
// wire, credits, buffers, who polls the CQ) stay in their packages.
package rdmaconn
