package rpma

import (
	"encoding/binary"
	"unsafe"

	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/verbs"
)

// Usage says what a memory region is used for (RPMA_MR_USAGE_*); it
// decides the access flags and travels in the descriptor.
type Usage uint8

// Memory region usages.
const (
	UsageReadSrc         Usage = 1 << 0
	UsageReadDst         Usage = 1 << 1
	UsageWriteSrc        Usage = 1 << 2
	UsageWriteDst        Usage = 1 << 3
	UsageFlushVisibility Usage = 1 << 4
	UsageFlushPersistent Usage = 1 << 5
	UsageSend            Usage = 1 << 6
	UsageRecv            Usage = 1 << 7
)

// access maps usages to access flags as librpma 1.2 does (InfiniBand and
// RoCE; on iWARP a read destination is also remotely writable); with
// nativeFlush also the flush access of librpma 1.3 (see
// Peer.UseNativeFlush).
func (u Usage) access(iwarp, nativeFlush bool) mr.Access {
	var a mr.Access
	if u&(UsageReadSrc|UsageFlushVisibility|UsageFlushPersistent) != 0 {
		a |= mr.RemoteRead
	}
	if nativeFlush {
		if u&UsageFlushVisibility != 0 {
			a |= mr.Access(verbs.AccessFlushGlobal)
		}
		if u&UsageFlushPersistent != 0 {
			a |= mr.Access(verbs.AccessFlushPersistent)
		}
	}
	if u&UsageReadDst != 0 {
		a |= mr.LocalWrite
		if iwarp {
			a |= mr.RemoteWrite
		}
	}
	if u&UsageWriteSrc != 0 {
		a |= mr.LocalWrite
	}
	if u&UsageWriteDst != 0 {
		a |= mr.RemoteWrite | mr.LocalWrite
	}
	if u&UsageRecv != 0 {
		a |= mr.LocalWrite
	}
	return a
}

// DescriptorSize is the size of a memory region descriptor.
const DescriptorSize = 21

// LocalMR is a registered local memory region (rpma_mr_local).
type LocalMR struct {
	m     *mr.MR
	usage Usage
}

// RegisterMR registers buf for usage (rpma_mr_reg). buf must stay valid
// (and, if it is Go memory, it is kept reachable) until Close; prefer
// memory from mr.Alloc.
func (p *Peer) RegisterMR(buf []byte, usage Usage) (*LocalMR, error) {
	if p == nil || len(buf) == 0 || usage == 0 {
		return nil, inval("rpma: register MR: peer, buffer and usage are required")
	}
	iwarp := p.ctx.Device().NodeType == 4
	m, err := mr.Register(p.pd, buf, usage.access(iwarp, p.useNativeFlush))
	if err != nil {
		return nil, provider(err)
	}
	return &LocalMR{m: m, usage: usage}, nil
}

// MR returns the underlying verbs memory region.
func (l *LocalMR) MR() *mr.MR { return l.m }

// Bytes returns the registered memory (rpma_mr_get_ptr and _get_size).
func (l *LocalMR) Bytes() []byte { return l.m.Bytes() }

// Size returns the size of the region.
func (l *LocalMR) Size() int { return l.m.Len() }

// Descriptor returns the region's 21-byte descriptor for a peer:
// little-endian address, length, rkey and the usage byte.
func (l *LocalMR) Descriptor() []byte {
	b := l.m.Bytes()
	if len(b) == 0 {
		return nil // closed: there is nothing to describe
	}
	d := make([]byte, DescriptorSize)
	binary.LittleEndian.PutUint64(d[0:], uint64(uintptr(unsafe.Pointer(&b[0]))))
	binary.LittleEndian.PutUint64(d[8:], uint64(l.m.Len()))
	binary.LittleEndian.PutUint32(d[16:], l.m.RKey())
	d[20] = byte(l.usage)
	return d
}

// Close deregisters the region (rpma_mr_dereg).
func (l *LocalMR) Close() error {
	if l == nil {
		return nil
	}
	return wrap(ErrProvider, l.m.Close())
}

// RemoteMR is a peer's memory region known from its descriptor
// (rpma_mr_remote).
type RemoteMR struct {
	Addr   uint64
	Length uint64
	RKey   uint32
	Usage  Usage
}

// RemoteMRFromDescriptor decodes a descriptor with librpma's checks: at
// least 21 bytes (more are ignored) and a non-zero usage.
func RemoteMRFromDescriptor(desc []byte) (*RemoteMR, error) {
	if len(desc) < DescriptorSize {
		return nil, inval("rpma: MR descriptor of %d bytes, need %d", len(desc), DescriptorSize)
	}
	r := &RemoteMR{
		Addr:   binary.LittleEndian.Uint64(desc[0:]),
		Length: binary.LittleEndian.Uint64(desc[8:]),
		RKey:   binary.LittleEndian.Uint32(desc[16:]),
		Usage:  Usage(desc[20]),
	}
	if r.Usage == 0 {
		return nil, inval("rpma: MR descriptor with usage 0")
	}
	return r, nil
}

// Size returns the remote region's length.
func (r *RemoteMR) Size() uint64 { return r.Length }

// FlushType returns the flush types the remote region supports.
func (r *RemoteMR) FlushType() Usage {
	return r.Usage & (UsageFlushPersistent | UsageFlushVisibility)
}
