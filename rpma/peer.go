// Package rpma brings librpma's semantics to Go: remote persistent memory
// access over RDMA, connection by connection, with librpma's concepts one
// for one — peer, peer configuration, memory regions and their 21-byte
// descriptors, endpoint, connection request, connection, completion queue,
// shared receive queue — and its error codes. A librpma program ports to
// Go line by line, and a Go peer talks to a C librpma peer: the wire
// formats (private data, descriptors, immediate data, the flush emulated
// as an 8-byte RDMA READ) are librpma 1.2's.
//
// Where librpma passes a void *op_context, this package takes a uint64
// that comes back as the completion's WRID.
package rpma

import (
	"fmt"

	"github.com/goverbs/goverbs/verbs"
)

// Device capability bits of flush and atomic write (kernel 6.2 and
// later; 6.1, and so its rxe, has neither).
const (
	capFlushGlobal     = 1 << 38
	capFlushPersistent = 1 << 39
	capAtomicWrite     = 1 << 40
)

// Peer is the local side of RDMA: a device context and a protection
// domain (rpma_peer).
type Peer struct {
	ctx               *verbs.Context
	pd                *verbs.PD
	nativeFlush       bool
	nativeAtomicWrite bool
}

// NewPeer creates a peer on ctx (rpma_peer_new). The peer does not own
// ctx.
func NewPeer(ctx *verbs.Context) (*Peer, error) {
	if ctx == nil {
		return nil, inval("rpma: peer: no device context")
	}
	attr, err := ctx.QueryDevice()
	if err != nil {
		return nil, provider(err)
	}
	pd, err := ctx.AllocPD()
	if err != nil {
		return nil, provider(err)
	}
	return &Peer{ctx: ctx, pd: pd,
		nativeFlush:       nativeFlush(attr.DeviceCapFlagsEx),
		nativeAtomicWrite: nativeAtomicWrite(attr.DeviceCapFlagsEx)}, nil
}

// nativeFlush reports whether a device with these capability flags can
// flush natively (librpma 1.3's rule: both flush types).
func nativeFlush(caps uint64) bool {
	return caps&capFlushGlobal != 0 && caps&capFlushPersistent != 0
}

// nativeAtomicWrite reports whether a device can do atomic writes.
func nativeAtomicWrite(caps uint64) bool { return caps&capAtomicWrite != 0 }

// Context returns the peer's device context.
func (p *Peer) Context() *verbs.Context { return p.ctx }

// PD returns the peer's protection domain.
func (p *Peer) PD() *verbs.PD { return p.pd }

// NativeFlush reports whether the device flushes natively. goverbs' only
// provider, rxe on Linux 6.1, does not, and flushes are emulated as librpma
// 1.2 does it (an 8-byte RDMA READ); the native verbs are not implemented.
func (p *Peer) NativeFlush() bool { return p.nativeFlush }

// NativeAtomicWrite reports whether the device does atomic writes
// natively (not on Linux 6.1); they are emulated as a fenced inline 8-byte
// write.
func (p *Peer) NativeAtomicWrite() bool { return p.nativeAtomicWrite }

// Close deallocates the PD (rpma_peer_delete).
func (p *Peer) Close() error {
	if p == nil {
		return nil
	}
	if err := p.pd.Close(); err != nil {
		return provider(fmt.Errorf("rpma: peer: %w", err))
	}
	return nil
}

// PeerCfg is a peer configuration (rpma_peer_cfg): whether the peer
// supports direct writes to persistent memory.
type PeerCfg struct {
	DirectWriteToPMem bool
}

// Descriptor returns the configuration's 1-byte descriptor.
func (c *PeerCfg) Descriptor() []byte {
	if c.DirectWriteToPMem {
		return []byte{1}
	}
	return []byte{0}
}

// PeerCfgFromDescriptor decodes a peer configuration descriptor; any
// non-zero byte means direct write to PMem.
func PeerCfgFromDescriptor(desc []byte) (*PeerCfg, error) {
	if len(desc) < 1 {
		return nil, inval("rpma: peer cfg descriptor of %d bytes", len(desc))
	}
	return &PeerCfg{DirectWriteToPMem: desc[0] != 0}, nil
}
