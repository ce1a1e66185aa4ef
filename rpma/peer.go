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
//
// One difference in behaviour: a connection's completion waits end with
// the connection. Once the peer has disconnected (or our Disconnect was
// answered, or the device went away), Conn.Wait and the CQ.Wait of the
// connection's CQs return at once with what the CQs hold, and then with
// ErrNoCompletion, where librpma's rpma_conn_wait and rpma_cq_wait block
// until a completion comes, which for a message the peer never sent is
// never.
package rpma

import (
	"fmt"

	"github.com/goverbs/goverbs/internal/kobj"
	"github.com/goverbs/goverbs/verbs"
)

// Peer is the local side of RDMA: a device context and a protection
// domain (rpma_peer).
type Peer struct {
	ctx               *verbs.Context
	pd                *verbs.PD
	nativeFlush       bool // the device can (librpma 1.3's rule)
	nativeAtomicWrite bool
	useNativeFlush    bool // UseNativeFlush was called
}

// NewPeer creates a peer on ctx (rpma_peer_new). The peer does not own
// ctx.
func NewPeer(ctx *verbs.Context) (*Peer, error) {
	if ctx == nil {
		return nil, inval("rpma: peer: no device context")
	}
	caps, err := ctx.CapFlags()
	if err != nil {
		return nil, provider(err)
	}
	pd, err := ctx.AllocPD()
	if err != nil {
		return nil, provider(err)
	}
	return &Peer{ctx: ctx, pd: pd,
		nativeFlush:       nativeFlush(caps),
		nativeAtomicWrite: nativeAtomicWrite(caps)}, nil
}

// nativeFlush reports whether a device with these capability flags can
// flush natively (librpma 1.3's rule: both placement types).
func nativeFlush(caps uint64) bool {
	const both = verbs.DeviceCapFlushGlobal | verbs.DeviceCapFlushPersistent
	return caps&both == both
}

// nativeAtomicWrite reports whether a device can do atomic writes
// (librpma 1.2's rule, when built with ibv_wr_atomic_write).
func nativeAtomicWrite(caps uint64) bool { return caps&verbs.DeviceCapAtomicWrite != 0 }

// Context returns the peer's device context.
func (p *Peer) Context() *verbs.Context { return p.ctx }

// PD returns the peer's protection domain.
func (p *Peer) PD() *verbs.PD { return p.pd }

// NativeFlush reports whether the device can flush natively: it reports
// both flush placement types (librpma 1.3's rule; rxe from Linux 6.2, so
// 6.12 but not 6.1). Flushes still go out as librpma 1.2 sends them (an
// 8-byte RDMA READ) unless UseNativeFlush was called.
func (p *Peer) NativeFlush() bool { return p.nativeFlush }

// UseNativeFlush makes the peer flush natively, as librpma 1.3 built with
// native flush does: connections created afterwards post RDMA FLUSH work
// requests, and regions registered afterwards for a flush usage also get
// the matching flush access (FLUSH_GLOBAL for UsageFlushVisibility,
// FLUSH_PERSISTENT for UsageFlushPersistent; rxe grants the latter on
// persistent memory only). Unlike librpma 1.3 the regions keep remote
// read access, so peers that emulate flushes (librpma 1.2, goverbs by
// default, devices without the capability) can still flush them.
//
// It is opt-in because nothing on the wire tells a requester how the
// target registered its region: a native FLUSH of a region registered by
// librpma 1.2 (remote read only) fails with a remote access error. Call
// it when every target is native: goverbs peers that called it, or
// librpma 1.3 built with native flush. It fails with ErrNotSupported when
// the device cannot (NativeFlush is false).
func (p *Peer) UseNativeFlush() error {
	if p == nil {
		return ErrInval
	}
	if err := kobj.CheckPD(p.pd); err != nil {
		return fmt.Errorf("rpma: native flush: %w", err)
	}
	if !p.nativeFlush {
		return wrap(ErrNotSupported, fmt.Errorf("rpma: native flush: %w", verbs.ErrNotCapable))
	}
	p.useNativeFlush = true
	return nil
}

// NativeAtomicWrite reports whether atomic writes go out natively, as
// librpma 1.2 decides it (built with ibv_wr_atomic_write): the device
// reports the ATOMIC_WRITE capability (rxe on 6.12, not 6.1). Otherwise
// they are emulated as a fenced inline 8-byte RDMA WRITE. Both arrive at
// the target as an 8-byte write to remotely writable memory, so either
// works with any peer; only the requester's completion opcode differs
// (ATOMIC_WRITE or RDMA_WRITE).
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
