package valkeyrdma

import "fmt"

// Events returns how often c's poller has waited on the completion
// channel.
func Events(c *Conn) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.events
}

// KeepalivesSent returns how many keepalives c has posted.
func KeepalivesSent(c *Conn) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.kaSent
}

// Command is a control message for the wire tests.
type Command = command

// NewCommand builds one.
func NewCommand(op, sel uint16, features, addr uint64, length, rkey uint32) Command {
	return command{op: op, sel: sel, features: features, addr: addr, length: length, rkey: rkey}
}

// Marshal encodes c.
func (c *command) Marshal(b []byte) { c.marshal(b) }

// ParseCommand decodes b.
func ParseCommand(b []byte) (Command, error) { return parseCommand(b) }

// State describes c's protocol state, for a test's failure report.
func State(c *Conn) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("rx %d..%d of %d (publish pending %v), remote %d of %d, staging %d in flight, sq %d free, control %d in flight, blocked r/w/c %v/%v/%v, err %v, peer closed %v, poller waits %d",
		c.rxHead, c.rxTail, len(c.rx), c.rxPending, c.remoteOff, c.remoteLen, c.txUsed, c.sqAvail, c.ctrlInFlight,
		c.rw.Blocked, c.ww.Blocked, c.cw.Blocked, c.err, c.peerClosed, c.events)
}
