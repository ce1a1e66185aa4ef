package rpma

import "github.com/goverbs/goverbs/verbs"

// localSGE returns the SGE for [off, off+length) of m, or none for the
// 0-byte form (m nil, off and length 0). Mixed forms are ErrInval.
// librpma does not check bounds; neither does this (the device reports a
// local protection error instead).
func localSGE(m *LocalMR, off, length uint64, sge *[1]verbs.SGE) ([]verbs.SGE, error) {
	if m == nil {
		if off != 0 || length != 0 {
			return nil, ErrInval
		}
		return nil, nil
	}
	mm := m.m
	sge[0] = verbs.SGE{Addr: mm.IOVA() + off, Length: uint32(length), LKey: mm.LKey()}
	return sge[:], nil
}

func recvSGE(dst *LocalMR, off, length uint64, sge *[1]verbs.SGE) ([]verbs.SGE, error) {
	return localSGE(dst, off, length, sge)
}

// post posts c.swr[0] with its SGE list set from the local side.
func (c *Conn) post(local *LocalMR, off, length uint64) error {
	sgl, err := localSGE(local, off, length, &c.sge)
	if err != nil {
		return err
	}
	c.swr[0].SGList = sgl
	if err := c.q.PostSend(c.swr[:]); err != nil {
		return provider(err)
	}
	return nil
}

// remote returns the address and rkey of [off...) of the remote region, or
// zeros for the 0-byte form.
func remote(r *RemoteMR, off uint64) (uint64, uint32) {
	if r == nil {
		return 0, 0
	}
	return r.Addr + off, r.RKey
}

// bothOrNeither checks librpma's NULL rule for two-sided operations: both
// regions given, or neither with offsets and length 0.
func bothOrNeither(a, b bool, off1, off2, length uint64) bool {
	if a != b {
		return false
	}
	return a || (off1 == 0 && off2 == 0 && length == 0)
}

// Read reads length bytes at srcOff of the remote region into dstOff of
// dst (rpma_read). With dst and src nil (and zero offsets and length) it
// posts a 0-byte read. It allocates nothing.
func (c *Conn) Read(dst *LocalMR, dstOff uint64, src *RemoteMR, srcOff, length uint64, flags CompletionFlags, opContext uint64) error {
	return c.rdma(verbs.WRRDMARead, dst, dstOff, src, srcOff, length, flags, 0, opContext)
}

// Write writes length bytes at srcOff of src to dstOff of the remote
// region (rpma_write). It allocates nothing.
func (c *Conn) Write(dst *RemoteMR, dstOff uint64, src *LocalMR, srcOff, length uint64, flags CompletionFlags, opContext uint64) error {
	return c.rdma(verbs.WRRDMAWrite, src, srcOff, dst, dstOff, length, flags, 0, opContext)
}

// WriteWithImm is Write carrying imm (host order; network order on the
// wire), which completes a receive at the peer (rpma_write_with_imm).
func (c *Conn) WriteWithImm(dst *RemoteMR, dstOff uint64, src *LocalMR, srcOff, length uint64, flags CompletionFlags, imm uint32, opContext uint64) error {
	return c.rdma(verbs.WRRDMAWriteWithImm, src, srcOff, dst, dstOff, length, flags, imm, opContext)
}

// rdma posts a one-sided operation between [localOff, +length) of local
// and [remoteOff, …) of the remote region.
func (c *Conn) rdma(op verbs.WROpcode, local *LocalMR, localOff uint64, rmt *RemoteMR, remoteOff, length uint64, flags CompletionFlags, imm uint32, opContext uint64) error {
	if c == nil || !bothOrNeither(local != nil, rmt != nil, localOff, remoteOff, length) {
		return ErrInval
	}
	sf, err := flags.send()
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	addr, rkey := remote(rmt, remoteOff)
	c.swr[0] = verbs.SendWR{WRID: opContext, Opcode: op, Flags: sf, RemoteAddr: addr, RKey: rkey, Imm: imm}
	return c.post(local, localOff, length)
}

// AtomicWrite writes 8 bytes atomically at dstOff (8-byte aligned) of the
// remote region (rpma_atomic_write). When the peer's device does atomic
// writes (Peer.NativeAtomicWrite) it is an ATOMIC WRITE work request,
// completing as verbs.WCAtomicWrite; else (Linux 6.1) librpma's
// emulation: a fenced, inline 8-byte RDMA WRITE, ordered after earlier
// flushes, completing as an RDMA WRITE. Either way the target sees an
// 8-byte write.
func (c *Conn) AtomicWrite(dst *RemoteMR, dstOff uint64, src [8]byte, flags CompletionFlags, opContext uint64) error {
	if c == nil || dst == nil {
		return ErrInval
	}
	if dstOff%8 != 0 {
		return inval("rpma: atomic write at offset %d: not 8-byte aligned", dstOff)
	}
	sf, err := flags.send()
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nativeAtomicWrite {
		// librpma 1.2's native path: signaled as asked, no fence.
		c.swr[0] = verbs.SendWR{WRID: opContext, Opcode: verbs.WRAtomicWrite, Flags: sf,
			AtomicData: src, RemoteAddr: dst.Addr + dstOff, RKey: dst.RKey}
	} else {
		c.inline = src
		c.swr[0] = verbs.SendWR{WRID: opContext, Opcode: verbs.WRRDMAWrite, Flags: sf | verbs.SendFence,
			InlineData: c.inline[:], RemoteAddr: dst.Addr + dstOff, RKey: dst.RKey}
	}
	if err := c.q.PostSend(c.swr[:]); err != nil {
		return provider(err)
	}
	return nil
}

// Flush makes earlier writes to the remote region reach the requested
// durability (rpma_flush). A persistent flush needs the peer's direct
// write to PMem (ApplyRemotePeerCfg) and the region's
// UsageFlushPersistent; a visibility flush the region's
// UsageFlushVisibility; else ErrNotSupported. By default it is librpma
// 1.2's emulation: an 8-byte RDMA READ at dstOff into a buffer of the
// connection, completing as an RDMA READ; length is ignored. On a
// connection of a peer that called UseNativeFlush it is librpma 1.3's
// native flush: an RDMA FLUSH of length bytes at dstOff (placement
// global for FlushVisibility, persistent for FlushPersistent, selectivity
// range), completing as verbs.WCFlush.
func (c *Conn) Flush(dst *RemoteMR, dstOff, length uint64, typ FlushType, flags CompletionFlags, opContext uint64) error {
	if c == nil || dst == nil {
		return ErrInval
	}
	sf, err := flags.send()
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch typ {
	case FlushPersistent:
		if !c.directWrite || dst.Usage&UsageFlushPersistent == 0 {
			return ErrNotSupported
		}
	case FlushVisibility:
		if dst.Usage&UsageFlushVisibility == 0 {
			return ErrNotSupported
		}
	}
	if c.nativeFlush {
		placement := verbs.FlushGlobal
		if typ == FlushPersistent {
			placement = verbs.FlushPersistent
		}
		c.swr[0] = verbs.SendWR{WRID: opContext, Opcode: verbs.WRFlush, Flags: sf,
			RemoteAddr: dst.Addr + dstOff, RKey: dst.RKey, FlushLength: uint32(min(length, 1<<32-1)),
			FlushPlacement: placement, FlushLevel: verbs.FlushRange}
		if err := c.q.PostSend(c.swr[:]); err != nil {
			return provider(err)
		}
		return nil
	}
	c.sge[0] = verbs.SGE{Addr: c.raw.IOVA(), Length: 8, LKey: c.raw.LKey()}
	c.swr[0] = verbs.SendWR{WRID: opContext, Opcode: verbs.WRRDMARead, Flags: sf, SGList: c.sge[:],
		RemoteAddr: dst.Addr + dstOff, RKey: dst.RKey}
	if err := c.q.PostSend(c.swr[:]); err != nil {
		return provider(err)
	}
	return nil
}

// Send sends length bytes at off of src (rpma_send); src nil with off and
// length 0 sends an empty message. It allocates nothing.
func (c *Conn) Send(src *LocalMR, off, length uint64, flags CompletionFlags, opContext uint64) error {
	return c.send(src, off, length, flags, verbs.WRSend, 0, opContext)
}

// SendWithImm is Send carrying imm (host order; network order on the
// wire) (rpma_send_with_imm).
func (c *Conn) SendWithImm(src *LocalMR, off, length uint64, flags CompletionFlags, imm uint32, opContext uint64) error {
	return c.send(src, off, length, flags, verbs.WRSendWithImm, imm, opContext)
}

func (c *Conn) send(src *LocalMR, off, length uint64, flags CompletionFlags, op verbs.WROpcode, imm uint32, opContext uint64) error {
	if c == nil {
		return ErrInval
	}
	sf, err := flags.send()
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.swr[0] = verbs.SendWR{WRID: opContext, Opcode: op, Flags: sf, Imm: imm}
	return c.post(src, off, length)
}

// Recv posts a receive buffer of length bytes at off of dst (rpma_recv);
// dst nil with off and length 0 receives an empty message. It allocates
// nothing.
func (c *Conn) Recv(dst *LocalMR, off, length uint64, opContext uint64) error {
	if c == nil {
		return ErrInval
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	sgl, err := recvSGE(dst, off, length, &c.sge)
	if err != nil {
		return err
	}
	c.rwr[0] = verbs.RecvWR{WRID: opContext, SGList: sgl}
	if err := c.q.PostRecv(c.rwr[:]); err != nil {
		return provider(err)
	}
	return nil
}
