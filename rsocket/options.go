package rsocket

import (
	"net/netip"
	"time"
)

// Defaults, as rsocket.c has them (lines 131-138) when no
// /etc/rdma/rsocket file overrides them.
const (
	DefaultQueueSize  = 384       // send and receive queue entries (def_sqsize, def_rqsize)
	DefaultInlineSize = 64        // bytes (def_inline)
	DefaultBufferSize = 128 << 10 // send and receive buffer bytes (def_wmem, def_mem)
	DefaultBacklog    = 128       // Listen's queue of established connections
	// DefaultPollTime is how long a blocked call polls the completion
	// queue before it arms it and sleeps (polling_time, 10 µs).
	DefaultPollTime = 10 * time.Microsecond
)

// Limits of the options.
const (
	MaxQueueSize   = 0xFFFE  // queue entries (RS_QP_MAX_SIZE), also capped at the device's max_qp_wr
	MinQueueSize   = 16      // queue entries (RS_QP_MIN_SIZE)
	MinBufferSize  = 4096    // bytes: twice the send room a message needs (RS_SNDLOWAT)
	MaxBufferSize  = 1 << 30 // bytes
	MaxIOMapSize   = 0x7F00  // mappings: the most the conn data's one byte can say (0x7f << 8)
	MaxInlineLimit = 0xFFFE  // bytes (RS_QP_MAX_SIZE, as C caps it)
)

// An Option configures Dial or Listen. A Listener hands its options on to
// every connection it accepts, as rsocket's accepted sockets inherit the
// listening socket's sizes.
type Option func(*config)

type config struct {
	sqSize, rqSize     int
	inline             int
	sbufSize, rbufSize int
	iomapSize          int
	keepalive          time.Duration
	pollTime           time.Duration
	localAddr          netip.AddrPort
	backlog            int
}

func newConfig(opts []Option) config {
	c := config{
		sqSize:   DefaultQueueSize,
		rqSize:   DefaultQueueSize,
		inline:   DefaultInlineSize,
		sbufSize: DefaultBufferSize,
		rbufSize: DefaultBufferSize,
		backlog:  DefaultBacklog,
		pollTime: DefaultPollTime,
	}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return c
}

func clamp(v, lo, hi int) int { return max(lo, min(v, hi)) }

// SendQueueSize sets the send queue's entries (rsocket's RDMA_SQSIZE),
// clamped to [MinQueueSize, min(MaxQueueSize, the device's max_qp_wr)]
// as C does. Four of them carry control messages; the rest carry data.
func SendQueueSize(n int) Option {
	return func(c *config) { c.sqSize = clamp(n, qpMinSize, qpMaxSize) }
}

// ReceiveQueueSize sets the receive queue's entries (RDMA_RQSIZE),
// clamped like SendQueueSize. It is also the credit the peer gets: how
// many data messages it may have in flight and unread.
func ReceiveQueueSize(n int) Option {
	return func(c *config) { c.rqSize = clamp(n, qpMinSize, qpMaxSize) }
}

// InlineSize sets the largest message carried inside the work request
// (RDMA_INLINE); the device may grant more or less, and the connection
// uses what it grants. Credit updates travel inline when it is at least
// 16 bytes. It changes nothing on the wire.
func InlineSize(n int) Option {
	return func(c *config) { c.inline = clamp(n, 0, MaxInlineLimit) }
}

// SendBufferSize sets the send buffer in bytes (C's sbuf_size; the C
// option SO_SNDBUF sets it to twice its value). It is rounded into
// [MinBufferSize, MaxBufferSize].
func SendBufferSize(n int) Option {
	return func(c *config) { c.sbufSize = clamp(n, MinBufferSize, MaxBufferSize) }
}

// ReceiveBufferSize sets the receive buffer in bytes (C's rbuf_size;
// SO_RCVBUF sets it to twice its value). The peer writes it one half at
// a time. It is rounded down to an even size in [MinBufferSize,
// MaxBufferSize].
func ReceiveBufferSize(n int) Option {
	return func(c *config) { c.rbufSize = clamp(n, MinBufferSize, MaxBufferSize) &^ 1 }
}

// IOMapSize sets how many windows of this side's memory the peer may
// describe for IOWrite (RDMA_IOMAPSIZE; 0, the default, allows none). As
// in C it is rounded to what the private data can carry: exact up to
// 128, multiples of 256 above, at most MaxIOMapSize.
func IOMapSize(n int) Option {
	return func(c *config) { c.iomapSize = roundIOMap(n) }
}

// KeepAlive sends a keepalive every period (SO_KEEPALIVE with
// TCP_KEEPIDLE): a zero-length RDMA WRITE that the peer's application
// never sees, whatever the traffic, so that a peer that went away fails
// the connection (and wakes blocked calls) once the device gives up
// retrying. 0 (the default) sends none.
func KeepAlive(period time.Duration) Option {
	return func(c *config) { c.keepalive = max(period, 0) }
}

// PollTime sets how long a call that cannot proceed (a Read with no data,
// a Write with no credits or buffer space) polls the completion queue
// before it arms the queue and sleeps on its completion channel, as C
// rsockets poll for polling_time (/etc/rdma/rsocket/polling_time; 10 µs
// by default, DefaultPollTime). Polling spends a CPU for that long; it
// saves the wake-up through the kernel when the peer answers within it,
// which is most of a small message's round trip. 0 sleeps at once. The
// time counts from the call's first clock read, which it makes after 32
// polls, and a call without a deadline reads the clock again after twice
// as many polls each time (clock reads cost more than polls under
// emulation), so a call polls longer than d, up to about twice as long.
func PollTime(d time.Duration) Option {
	return func(c *config) { c.pollTime = max(d, 0) }
}

// LocalAddr binds a Dial to a local address (rbind before rconnect);
// its port may be 0.
func LocalAddr(addr netip.AddrPort) Option {
	return func(c *config) { c.localAddr = addr }
}

// Backlog sets how many established connections a Listener holds for
// Accept (and the rdma_cm backlog of requests behind them).
func Backlog(n int) Option {
	return func(c *config) { c.backlog = max(n, 1) }
}
