package valkeyrdma

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// cmdSize is the size of every control message, the SEND payload of
// Valkey's RDMA transport (union valkeyRdmaCmd in src/rdma.c). A SEND of
// any other length is a protocol error.
const cmdSize = 32

// Control message opcodes (enum ValkeyRdmaOpcode).
const (
	opGetServerFeature   = 0 // client: which features? server: the answer
	opSetClientFeature   = 1 // client: these features, please (no answer)
	opKeepalive          = 2 // nothing to do
	opRegisterXferMemory = 3 // the sender's RX buffer: write here
)

// command is one control message, decoded. Fields follow the message's
// opcode: features and sel for the feature messages, addr, length and
// rkey for RegisterXferMemory. Every field is big-endian on the wire.
type command struct {
	op       uint16
	sel      uint16 // feature messages: the selector, echoed in the answer
	features uint64 // feature messages
	addr     uint64 // RegisterXferMemory: the RX buffer's address
	length   uint32 // RegisterXferMemory: its length
	rkey     uint32 // RegisterXferMemory: its remote key
}

// marshal writes c into b (cmdSize bytes), zeroing what c's opcode does
// not use.
func (c *command) marshal(b []byte) {
	b = b[:cmdSize]
	clear(b)
	binary.BigEndian.PutUint16(b[0:], c.op)
	switch c.op {
	case opGetServerFeature, opSetClientFeature:
		binary.BigEndian.PutUint16(b[2:], c.sel)
		binary.BigEndian.PutUint64(b[24:], c.features)
	case opRegisterXferMemory:
		binary.BigEndian.PutUint64(b[16:], c.addr)
		binary.BigEndian.PutUint32(b[24:], c.length)
		binary.BigEndian.PutUint32(b[28:], c.rkey)
	}
}

// parseCommand decodes a received control message. It fails on a
// length other than cmdSize and on an unknown opcode, both of which end
// a connection in Valkey's server.
func parseCommand(b []byte) (command, error) {
	if len(b) != cmdSize {
		return command{}, protocolError("a control message of %d bytes, not %d", len(b), cmdSize)
	}
	c := command{op: binary.BigEndian.Uint16(b[0:])}
	switch c.op {
	case opGetServerFeature, opSetClientFeature:
		c.sel = binary.BigEndian.Uint16(b[2:])
		c.features = binary.BigEndian.Uint64(b[24:])
	case opKeepalive:
	case opRegisterXferMemory:
		c.addr = binary.BigEndian.Uint64(b[16:])
		c.length = binary.BigEndian.Uint32(b[24:])
		c.rkey = binary.BigEndian.Uint32(b[28:])
		if c.length == 0 {
			return command{}, protocolError("RegisterXferMemory of an empty buffer")
		}
	default:
		return command{}, protocolError("unknown control message opcode %d", c.op)
	}
	return c, nil
}

// ErrProtocol is wrapped by the error of a connection whose peer broke
// the transport's rules: a control message of the wrong size or with an
// unknown opcode, more data than the RX buffer holds, a write before the
// buffer was published.
var ErrProtocol = errors.New("valkeyrdma: protocol violation")

func protocolError(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrProtocol}, args...)...)
}
