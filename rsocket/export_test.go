package rsocket

import "fmt"

// Test access to what the wire carried.

type RecvStats = recvStats

// Stats returns the messages c received, by kind.
func Stats(c *Conn) RecvStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.s.stats
}

// PeerConnData describes the private data c's peer sent.
func PeerConnData(c *Conn) (version, flags uint8, credits uint16, iomap int, sglEntries, half uint32) {
	d := c.s.peer
	return d.Version, d.Flags, d.Credits, unscaleIOMap(d.IOMapSize), d.TargetSGL.Length, d.DataBuf.Length
}

// Sizes returns c's queue sizes and inline limit as set up.
func Sizes(c *Conn) (sq, rq, inline int) { return c.s.sqSize, c.s.rqSize, c.s.sqInline }

// SetConnDataHook edits the private data of later connections until the
// returned function is called.
func SetConnDataHook(f func(b *[40]byte)) (restore func()) {
	connDataHook = f
	return func() { connDataHook = nil }
}

func (s recvStats) String() string {
	return fmt.Sprintf("data %d (empty %d), SGL updates %d with a buffer and %d credit-only, iomap %d, shutdown %d, disconnect %d",
		s.Data, s.EmptyData, s.SGLBuffer, s.SGLCredit, s.IOMap, s.Shutdown, s.Disconnect)
}

// Sent counts c's SGL updates with a buffer and credit-only ones, and
// its keepalives.
func Sent(c *Conn) (sglBuffer, sglCredit, keepalives uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.s.sentSGLBuffer, c.s.sentSGLCredit, c.kaSent
}

// Waits counts c's waits on its completion channel.
func Waits(c *Conn) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.waits
}

// Arms counts c's REQ_NOTIFYs: a wait arms the CQ first, and the
// condition may be met then without waiting.
func Arms(c *Conn) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.arms
}

// Polled counts c's waits that polling the CQ ended (PollTime).
func Polled(c *Conn) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.polled
}

// Yields counts c's yields between Reads and posts that did not wait.
func Yields(c *Conn) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.yields
}

// YieldEvery is how many Reads and posts pass between those yields.
const YieldEvery = yieldEvery

// PeerIOMaps describes the peer's windows c knows of.
func PeerIOMaps(c *Conn) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("%+v", c.s.iomaps)
}
