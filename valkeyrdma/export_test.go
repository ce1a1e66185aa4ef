package valkeyrdma

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
