package valkeyrdma

import (
	"net/netip"
	"time"
)

// Defaults.
const (
	// DefaultRXBufferSize is the RX buffer's size, the buffer the peer
	// RDMA-writes into: 1 MiB, as Valkey's C client and the server's
	// default rdma-rx-size. The server's TX staging buffer for the
	// connection takes the client's RX size.
	DefaultRXBufferSize = 1 << 20
	// DefaultTXBufferSize is the local staging buffer Write copies into
	// before the RDMA WRITE takes it out.
	DefaultTXBufferSize = 256 << 10
	// DefaultKeepalive is how often a Keepalive goes to the peer: 3 s,
	// as Valkey's server sends its own. A peer that stopped answering
	// fails it, and with it the connection.
	DefaultKeepalive = 3 * time.Second
	// DefaultBacklog is Listen's queue of established connections.
	DefaultBacklog = 128
)

// Limits.
const (
	// MinRXBufferSize and MaxRXBufferSize bound the RX buffer, as
	// Valkey bounds its server's rdma-rx-size.
	MinRXBufferSize = 64 << 10
	MaxRXBufferSize = 16 << 20
	// MinTXBufferSize and MaxTXBufferSize bound the staging buffer.
	MinTXBufferSize = 4 << 10
	MaxTXBufferSize = 16 << 20
)

// queueSize is the send and receive queue depth (VALKEY_RDMA_MAX_WQE),
// capped at the device's max_qp_wr. Every receive carries a 32-byte
// slot, so that a control message always finds one.
const queueSize = 1024

// maxChunk is the largest RDMA WRITE a Write makes: the staging buffer
// holds several in flight.
const maxChunk = 64 << 10

// ctrlSlots is how many control messages this side may have in flight:
// RegisterXferMemory, Keepalive and the feature messages, one or two at
// a time.
const ctrlSlots = 16

// An Option configures Dial or Listen. A Listener hands its options on
// to every connection it accepts.
type Option func(*config)

type config struct {
	rxSize, txSize int
	keepalive      time.Duration
	localAddr      netip.AddrPort
	backlog        int
}

func newConfig(opts []Option) config {
	c := config{rxSize: DefaultRXBufferSize, txSize: DefaultTXBufferSize, keepalive: DefaultKeepalive, backlog: DefaultBacklog}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return c
}

func clamp(v, lo, hi int) int { return max(lo, min(v, hi)) }

// RXBufferSize sets the RX buffer's size, clamped to [MinRXBufferSize,
// MaxRXBufferSize]. The peer writes into it until it is full, and this
// side publishes it again once its application has read all of it.
func RXBufferSize(n int) Option {
	return func(c *config) { c.rxSize = clamp(n, MinRXBufferSize, MaxRXBufferSize) }
}

// TXBufferSize sets the staging buffer's size, clamped to
// [MinTXBufferSize, MaxTXBufferSize].
func TXBufferSize(n int) Option {
	return func(c *config) { c.txSize = clamp(n, MinTXBufferSize, MaxTXBufferSize) }
}

// Keepalive sets how often a Keepalive message goes to the peer; 0 sends
// none.
func Keepalive(d time.Duration) Option {
	return func(c *config) { c.keepalive = max(d, 0) }
}

// LocalAddr makes Dial bind to addr (its port may be 0) before it
// resolves the peer's address: the RDMA device that has addr carries
// the connection.
func LocalAddr(addr netip.AddrPort) Option {
	return func(c *config) { c.localAddr = addr }
}

// Backlog sets how many established connections a Listener queues for
// Accept (at least 1).
func Backlog(n int) Option {
	return func(c *config) { c.backlog = max(n, 1) }
}
