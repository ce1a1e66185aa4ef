// Package rdmaconn holds the machinery goverbs' two stream transports
// over RDMA connections, rsocket and valkeyrdma, share: both are a
// net.Conn and a net.Listener on rdma_cm's TCP port space, with one RC QP
// and one CQ per connection. It gives them the Listener's background
// accept loop and its queue of established connections, the active
// side's channel, ID and resolution steps, the errno a failed connect
// wraps, and the passive side's migration of a request to a channel of
// its own. The protocols themselves (what goes on the wire, credits,
// buffers) stay in their packages.
package rdmaconn
