package rsocket

import (
	"encoding/binary"
)

// state is a connection's protocol state, C's enum rs_state for an
// established stream (rsocket.c 246-265): bits that only go away.
type state uint16

const (
	stConnected    state = 1 << iota // in-band messages may still flow
	stReadable                       // data may still arrive
	stWritable                       // data may still be sent
	stDisconnected                   // no more messages either way
	stError                          // failed: stream.err says why

	stConnectRDWR = stConnected | stReadable | stWritable
)

// native is this host's byte order: the order of the SGL and iomap
// entries the peer writes into our memory.
var native = order(bigEndianHost())

// bigEndianHost reports whether this host is big-endian (rs_host_is_net).
func bigEndianHost() bool { return binary.NativeEndian.Uint16([]byte{0, 1}) == 1 }

// stream is the rsocket protocol state of one connection, apart from the
// verbs objects that carry it: what C keeps in struct rsocket for a
// SOCK_STREAM socket. Its methods decide; Conn posts the work requests
// they describe, under the Conn's mutex. Nothing a peer sends makes a
// method index outside the slices the stream was given: a peer that
// breaks the protocol gets an error wrapping ErrProtocol.
type stream struct {
	// Sizes, fixed once the connection exists.
	sqSize   int // send queue
	rqSize   int // receive queue: the credits this side grants
	sqInline int // the QP's inline limit
	sbufSize int // send buffer
	rbufSize int // receive buffer: two halves the peer writes in turn
	// msgSend is C's RS_OPT_MSG_SEND, set on iWARP devices, which have
	// no WRITE WITH IMMEDIATE: every message is a plain RDMA WRITE (if
	// it has a payload) followed by a 4-byte SEND of its message word.
	// A message with a payload takes two send queue slots (data, iomap
	// updates) or two control slots (SGL updates that carry a buffer).
	msgSend bool
	// held is set on the passive side of an iWARP connection until the
	// active side's first message has arrived: iWARP (MPA without
	// peer-to-peer mode, as on siw) lets the passive side send only
	// then, and this side posts nothing before it (see Conn.start).
	held bool

	state state
	err   error // why stError (or a reset) ended the connection

	// Sending (C: sseq_no, sseq_comp, sqe_avail, sbuf_bytes_avail,
	// ssgl[0].addr, target_sgl, target_sge, ctrl_seqno, ctrl_max_seqno,
	// remote_sgl, remote_sge, remote_iomap).
	sseqNo    uint16 // data messages sent
	sseqComp  uint16 // the limit the peer granted
	sqeAvail  int    // send queue slots free for data
	sbufAvail int    // send buffer bytes free
	sbufHead  int    // where the next chunk goes in the send buffer
	target    [sglSize]sge
	targetIdx int    // the entry of target being filled
	sglNext   int    // the entry the peer's next SGL update fills
	tmem      []byte // the target SGL and iomap table the peer writes
	ctrlSeq   uint32 // control messages posted
	ctrlMax   uint32 // the limit: completions give slots back
	remoteSGL sge    // the peer's target SGL; Length counts entries
	remoteIdx uint32 // the entry our next SGL update fills
	peerOrder order
	remoteMap sge // the peer's iomap table; Length counts entries

	// Receiving (C: rseq_no, rseq_comp, rmsg ring, rbuf_offset,
	// rbuf_free_offset, rbuf_bytes_avail).
	rseqNo    uint16   // data messages consumed
	rseqComp  uint16   // when rseqNo reaches it, grant again
	rmsg      []uint32 // lengths of the data messages not yet read
	rmsgHead  int
	rmsgTail  int
	rbufOff   int // the next byte to read
	rbufFree  int // the half to publish next
	rbufAvail int // bytes read and not yet published again
	// rbufGrant is what the peer may still write: published space not
	// yet filled. C does not track it; a peer that writes more than it
	// was given is a protocol error here.
	rbufGrant int
	rbufAddr  uint64 // the receive buffer as the peer addresses it
	rbufKey   uint32
	iomapLen  int          // entries of our iomap table (after the target SGL in tmem)
	iomaps    []iomapEntry // the peer's windows, copied as their updates arrive

	peer                         connData  // what the peer sent when connecting
	stats                        recvStats // messages received, by kind
	sentSGLBuffer, sentSGLCredit uint64
}

// recvStats counts the messages a stream received, by kind: what the
// interop tests check of the wire.
type recvStats struct {
	Data, EmptyData, SGLBuffer, SGLCredit, IOMap, Shutdown, Disconnect uint64
}

// streamConfig is what newStream needs of the local side.
type streamConfig struct {
	sqSize, rqSize, sqInline int
	sbufSize, rbufSize       int
	rbufAddr                 uint64
	rbufKey                  uint32
	tmem                     []byte // 2 SGL entries, then iomapLen entries
	iomapLen                 int
	msgSend                  bool // RS_OPT_MSG_SEND (iWARP)
}

func newStream(c streamConfig) *stream {
	s := &stream{
		sqSize:    c.sqSize,
		rqSize:    c.rqSize,
		sqInline:  c.sqInline,
		sbufSize:  c.sbufSize,
		rbufSize:  c.rbufSize,
		msgSend:   c.msgSend,
		tmem:      c.tmem,
		iomapLen:  c.iomapLen,
		rbufAddr:  c.rbufAddr,
		rbufKey:   c.rbufKey,
		rmsg:      make([]uint32, c.rqSize+1),
		iomaps:    make([]iomapEntry, c.iomapLen),
		ctrlMax:   qpCtrlSize,
		sglNext:   1,
		sqeAvail:  c.sqSize - qpCtrlSize,
		sbufAvail: c.sbufSize,
	}
	// rs_init_bufs: half 0 goes out in the private data, half 1 in the
	// first SGL update.
	half := c.rbufSize >> 1
	s.rbufFree = half
	s.rbufAvail = half
	s.rbufGrant = half
	s.rseqComp = uint16(c.rqSize >> 1)
	return s
}

// localConnData is what this side puts in its REQ or REP.
func (s *stream) localConnData(tmemAddr uint64, tmemKey uint32) connData {
	d := connData{
		Version:   1,
		Flags:     connFlagIOMap,
		Credits:   uint16(s.rqSize),
		IOMapSize: scaleIOMap(s.iomapLen),
		TargetSGL: sge{Addr: tmemAddr, Key: tmemKey, Length: sglSize},
		DataBuf:   sge{Addr: s.rbufAddr, Key: s.rbufKey, Length: uint32(s.rbufSize >> 1)},
	}
	if bigEndianHost() {
		d.Flags |= connFlagNet
	}
	return d
}

// connect adopts the peer's private data (rs_save_conn_data).
func (s *stream) connect(d connData) {
	s.peer = d
	s.remoteSGL = d.TargetSGL
	s.remoteIdx = 1
	s.peerOrder = d.order()
	if d.Flags&connFlagIOMap != 0 {
		s.remoteMap = sge{
			Addr:   d.TargetSGL.Addr + sgeSize*uint64(d.TargetSGL.Length),
			Key:    d.TargetSGL.Key,
			Length: uint32(unscaleIOMap(d.IOMapSize)),
		}
	}
	s.target[0] = d.DataBuf
	s.sseqComp = d.Credits
	s.state = stConnectRDWR
}

// fail ends the stream with err, unless it has ended already.
func (s *stream) fail(err error) {
	if s.state&stError != 0 {
		return
	}
	if s.err == nil {
		s.err = err
	}
	s.state = stError
}

// Sending.

// canSend reports whether a data message may go out now (rs_can_send):
// a free send slot, send-buffer room, a credit and target space. C tests
// the credit as sseq_no != sseq_comp; a peer granting a limit behind
// what was sent would give 65535 credits that way, so the window is
// compared as a signed distance here.
func (s *stream) canSend() bool {
	if s.msgSend {
		return s.sqeAvail >= 2 && !s.held && s.sbufAvail >= sndLowat &&
			int16(s.sseqComp-s.sseqNo) > 0 && s.target[s.targetIdx].Length != 0
	}
	return s.sqeAvail > 0 && s.sbufAvail >= sndLowat &&
		int16(s.sseqComp-s.sseqNo) > 0 && s.target[s.targetIdx].Length != 0
}

// chunk is one data message as stream.nextChunk plans it.
type chunk struct {
	n      int    // bytes
	inline bool   // carried in the work request (n <= sqInline)
	off    int    // else: where in the send buffer it is copied,
	wrap   int    // and how many of its bytes wrap to the buffer's start
	raddr  uint64 // where it lands at the peer
	rkey   uint32
	imm    uint32
}

// nextChunk plans the next data message of a write of left bytes and
// takes what it uses (rs_write_data, and rsend's chunk size: olen starts
// at olapStartSize for each write and doubles up to maxTransfer). The
// caller has checked canSend.
func (s *stream) nextChunk(left int, olen *int) chunk {
	n := left
	if *olen < left {
		n = *olen
		if *olen < maxTransfer {
			*olen <<= 1
		}
	}
	n = min(n, s.sbufAvail)
	t := &s.target[s.targetIdx]
	if uint64(n) > uint64(t.Length) {
		n = int(t.Length)
	}
	c := chunk{n: n, raddr: t.Addr, rkey: t.Key, imm: msg(opData, uint32(n))}
	t.Addr += uint64(n)
	t.Length -= uint32(n)
	if t.Length == 0 {
		s.targetIdx = (s.targetIdx + 1) % sglSize
	}
	s.sseqNo++
	s.place(&c)
	if s.msgSend {
		s.sqeAvail-- // the SEND of the message word
	}
	return c
}

// place takes a send queue slot and send-buffer space for c.n bytes: in
// the work request when they fit the inline limit, else at the buffer's
// head, wrapping to its start (C's ssgl[0] and ssgl[1]). Inline messages
// count against the buffer too, as in C.
func (s *stream) place(c *chunk) {
	s.sqeAvail--
	s.sbufAvail -= c.n
	if c.n <= s.sqInline {
		c.inline = true
		return
	}
	c.off = s.sbufHead
	if left := s.sbufSize - s.sbufHead; c.n >= left {
		c.wrap = c.n - left
		s.sbufHead = c.wrap
	} else {
		s.sbufHead += c.n
	}
}

// nextIOMap plans the message that tells the peer about our window in its
// iomap table entry idx (rs_write_iomap): 24 bytes WRITTEN WITH IMM into
// the table, which costs a data credit the peer never returns (C's
// receiver does not count it; ours does). The caller has checked
// canSend.
func (s *stream) nextIOMap(idx int) chunk {
	c := chunk{n: iomapSize, raddr: s.remoteMap.Addr + iomapSize*uint64(idx), rkey: s.remoteMap.Key,
		imm: msg(opIOMapSGL, uint32(idx))}
	s.sseqNo++
	s.place(&c)
	if s.msgSend {
		s.sqeAvail-- // the SEND of the message word
	}
	return c
}

// canWriteDirect reports whether an IOWrite chunk may go out: a send
// slot and send-buffer room. (C's riowrite also waits for a data credit
// and target space, which it does not use.)
func (s *stream) canWriteDirect() bool {
	return s.sqeAvail > 0 && s.sbufAvail >= sndLowat && !s.held
}

// nextDirect plans the next chunk of an IOWrite of left bytes at offset
// off into the peer's window e (rs_write_direct): a plain RDMA WRITE,
// sized like a data message and cut at the window's end. The caller has
// checked canWriteDirect and that e covers off.
func (s *stream) nextDirect(left int, olen *int, e iomapEntry, off uint64) chunk {
	n := left
	if *olen < left {
		n = *olen
		if *olen < maxTransfer {
			*olen <<= 1
		}
	}
	n = min(n, s.sbufAvail)
	if end := e.Offset + uint64(e.SGE.Length) - off; uint64(n) > end {
		n = int(end)
	}
	c := chunk{n: n, raddr: e.SGE.Addr + (off - e.Offset), rkey: e.SGE.Key, imm: msg(opWrite, uint32(n))}
	s.place(&c)
	return c
}

// findIOMap returns the peer's window that covers offset off
// (rs_find_iomap).
func (s *stream) findIOMap(off uint64) (iomapEntry, bool) {
	for _, e := range s.iomaps {
		if e.SGE.Length != 0 && off >= e.Offset && off-e.Offset < uint64(e.SGE.Length) {
			return e, true
		}
	}
	return iomapEntry{}, false
}

// sent processes the completion of one of our send work requests, whose
// wr_id is the message it carried (as C's is); on iWARP the SEND that
// follows a message's WRITE has the message's operation with data 0 and
// msgSendFlag. ok is false for an error completion.
func (s *stream) sent(wrID uint64, ok bool) {
	m := uint32(wrID)
	switch msgOp(m) {
	case opSGL:
		s.ctrlMax++
	case opCtrl:
		s.ctrlMax++
		if msgData(m) == ctrlDisconnect && s.state&stError == 0 {
			s.state = stDisconnected
		}
	case opIOMapSGL:
		s.sqeAvail++
		if wrID&msgSendFlag == 0 {
			s.sbufAvail += iomapSize
		}
	default: // data, riowrite
		s.sqeAvail++
		s.sbufAvail += int(msgData(m))
	}
	if !ok && s.state&stConnected != 0 {
		s.fail(errSendFailed)
	}
}

// ctrlAvail reports whether a control message (credits, SGL update,
// shutdown, keepalive) may be posted.
func (s *stream) ctrlAvail() bool { return s.ctrlSeq != s.ctrlMax && !s.held }

// allSent reports whether every posted send has completed, or the
// connection is down (rs_conn_all_sends_done).
func (s *stream) allSent() bool {
	return int(s.ctrlMax-s.ctrlSeq)+s.sqeAvail == s.sqSize || s.state&stConnected == 0
}

// Receiving.

// recv processes a successful receive completion: the immediate imm of
// an RDMA WRITE WITH IMM that placed n bytes (the completion's byte_len).
// This is the message decoder: whatever the peer sends, it either
// updates the state within the bounds the stream was built with or
// returns an error wrapping ErrProtocol.
func (s *stream) recv(imm, n uint32) error {
	switch op, data := msgOp(imm), msgData(imm); op {
	case opData:
		if n != data {
			return protocolError("data message of %d bytes carried %d", data, n)
		}
		if uint64(data) > uint64(s.rbufGrant) {
			return protocolError("%d bytes written, %d granted", data, s.rbufGrant)
		}
		s.rbufGrant -= int(data)
		s.stats.Data++
		if data == 0 {
			s.stats.EmptyData++
			// Nothing to read: consumed on arrival (C would queue an
			// empty entry; rsend never sends one).
			s.rseqNo++
			return nil
		}
		next := s.rmsgTail + 1
		if next == len(s.rmsg) {
			next = 0
		}
		if next == s.rmsgHead {
			return protocolError("more than %d data messages unread: credits exceeded", len(s.rmsg)-1)
		}
		s.rmsg[s.rmsgTail] = data
		s.rmsgTail = next
	case opSGL:
		switch n {
		case 0: // credits only
			s.stats.SGLCredit++
		case sgeSize:
			s.stats.SGLBuffer++
			// The peer fills our SGL entries 1, 0, 1, ... (it starts
			// at 1: entry 0 came in the private data), each only
			// after we have filled the half it held before.
			i := s.sglNext
			if s.target[i].Length != 0 {
				return protocolError("SGL update for entry %d, which still has %d bytes to fill", i, s.target[i].Length)
			}
			e := getSGE(s.tmem[i*sgeSize:(i+1)*sgeSize], native)
			if e.Length == 0 {
				return protocolError("SGL update of an empty buffer")
			}
			s.target[i] = e
			s.sglNext = (i + 1) % sglSize
			if s.msgSend {
				// Cleared, so that recvMsg tells the next update
				// of this entry from a credit-only one.
				native.putUint32(s.tmem[i*sgeSize+12:(i+1)*sgeSize], 0)
			}
		default:
			return protocolError("SGL update of %d bytes", n)
		}
		s.sseqComp = uint16(data)
	case opIOMapSGL:
		// The entry is in our iomap table now (RC places the write
		// before its completion). C takes no action and reads the
		// table whenever riowrite runs; a copy taken here is what
		// IOWrite uses, never a half-written entry.
		if n != iomapSize || int(data) >= s.iomapLen {
			return protocolError("iomap update of %d bytes for entry %d of %d", n, data, s.iomapLen)
		}
		off := sglSize*sgeSize + int(data)*iomapSize
		s.iomaps[data] = getIOMapEntry(s.tmem[off:off+iomapSize], native)
		// It took one of the credits the peer counts; C's receiver
		// never gives it back (the peer's window narrows by one for
		// good), this one counts it as consumed. It is not in the
		// ring, so the ring still holds every message in flight.
		s.rseqNo++
		s.stats.IOMap++
	case opWrite:
		// Never sent (it tags riowrite's own work requests); C
		// ignores it.
	case opCtrl:
		switch data {
		case ctrlDisconnect:
			s.stats.Disconnect++
			s.state = stDisconnected
		case ctrlShutdown:
			s.stats.Shutdown++
			if s.state&stWritable != 0 {
				s.state &^= stReadable
			} else {
				s.state = stDisconnected
			}
		case ctrlKeepalive:
			// C never sends it with an immediate.
		default:
			return protocolError("unknown control message %d", data)
		}
	default:
		return protocolError("reserved operation %d", op)
	}
	return nil
}

// recvMsg processes a successful receive on iWARP (RS_OPT_MSG_SEND): the
// 4-byte SEND that carried message word m, after the plain RDMA WRITE
// that placed the message's payload, if it has one. The completion does
// not say how much that WRITE placed: a data message's size is in its
// word, an iomap update is one table entry, and an SGL update carried a
// buffer when the target SGL entry it fills holds one (recv clears an
// entry's length as it adopts it; the peer writes an entry again only
// after this side has filled the half it held). The first message from
// the active side lets the passive side send.
func (s *stream) recvMsg(m uint32) error {
	s.held = false
	var n uint32
	switch msgOp(m) {
	case opData:
		n = msgData(m)
	case opSGL:
		i := s.sglNext
		if getSGE(s.tmem[i*sgeSize:(i+1)*sgeSize], native).Length != 0 {
			n = sgeSize
		}
	case opIOMapSGL:
		n = iomapSize
	}
	return s.recv(m, n)
}

// haveData reports whether received data waits to be read.
func (s *stream) haveData() bool { return s.rmsgHead != s.rmsgTail }

// consume moves up to len(p) received bytes from rbuf into p (rrecv's
// loop) and returns how many. C reads the receive buffer as a ring in
// arrival order, ignoring where the writes went: the sender fills the
// halves it was given in order.
func (s *stream) consume(p []byte, rbuf []byte) int {
	n := 0
	for n < len(p) && s.haveData() {
		left := len(p) - n
		m := int(s.rmsg[s.rmsgHead])
		if left < m {
			s.rmsg[s.rmsgHead] -= uint32(left)
			m = left
		} else {
			s.rseqNo++
			s.rmsgHead++
			if s.rmsgHead == len(s.rmsg) {
				s.rmsgHead = 0
			}
		}
		for m > 0 {
			k := min(m, s.rbufSize-s.rbufOff)
			copy(p[n:n+k], rbuf[s.rbufOff:s.rbufOff+k])
			s.rbufOff += k
			if s.rbufOff == s.rbufSize {
				s.rbufOff = 0
			}
			s.rbufAvail += k
			n += k
			m -= k
		}
	}
	return n
}

// Credits.

// giveCredits reports whether a credit or SGL update is due
// (rs_give_credits): half the receive buffer is free to publish, or the
// application has read past the point where the last grant said to grant
// again; a control slot is free; and the connection is up.
func (s *stream) giveCredits() bool {
	if s.msgSend {
		// rs_2ctrl_avail: room for a WRITE and a SEND.
		return (s.rbufAvail >= s.rbufSize>>1 || int16(s.rseqNo-s.rseqComp) >= 0) &&
			int32(s.ctrlSeq+1-s.ctrlMax) < 0 && !s.held && s.state&stConnected != 0
	}
	return (s.rbufAvail >= s.rbufSize>>1 || int16(s.rseqNo-s.rseqComp) >= 0) &&
		s.ctrlAvail() && s.state&stConnected != 0
}

// credit is one credit message as stream.credits plans it.
type credit struct {
	imm   uint32
	sge   bool // it carries a buffer: entry e, written to raddr/rkey
	e     [sgeSize]byte
	raddr uint64
	rkey  uint32
}

// credits plans a credit message and takes its control slot
// (rs_send_credits): the new limit rseqNo+rqSize, and the next free half
// of the receive buffer when there is one, written into the peer's
// target SGL entry 1, 0, 1, ... in the peer's byte order.
func (s *stream) credits() credit {
	s.ctrlSeq++
	s.rseqComp = s.rseqNo + uint16(s.rqSize>>1)
	c := credit{imm: msg(opSGL, uint32(s.rseqNo)+uint32(s.rqSize))}
	half := s.rbufSize >> 1
	if s.rbufAvail >= half {
		if s.msgSend {
			s.ctrlSeq++ // a WRITE and a SEND
		}
		sge{Addr: s.rbufAddr + uint64(s.rbufFree), Key: s.rbufKey, Length: uint32(half)}.put(c.e[:], s.peerOrder)
		c.sge = true
		s.sentSGLBuffer++
		c.raddr = s.remoteSGL.Addr + sgeSize*uint64(s.remoteIdx)
		c.rkey = s.remoteSGL.Key
		s.rbufAvail -= half
		s.rbufGrant += half
		s.rbufFree += half
		if s.rbufFree >= s.rbufSize {
			s.rbufFree = 0
		}
		s.remoteIdx = (s.remoteIdx + 1) % s.remoteSGL.Length // Length >= 1: parseConnData
	} else {
		s.sentSGLCredit++
	}
	return c
}
