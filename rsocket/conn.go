package rsocket

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/goverbs/goverbs/cm"
	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/rdmaconn"
	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/verbs"
)

// recvFlag marks the wr_id of a receive (C's RS_WR_ID_FLAG_RECV); send
// work requests carry their message as wr_id, as in C.
const recvFlag = 1 << 63

// msgSendFlag marks the wr_id of the SEND that follows a message's RDMA
// WRITE on iWARP (C's RS_WR_ID_FLAG_MSG_SEND); the wr_id of a receive
// there is recvFlag and the index of its 4-byte slot.
const msgSendFlag = 1 << 62

// closeTimeout bounds how long Close waits for its disconnect message
// (and what was posted before it) to complete: a peer that is gone
// makes the device retry for a while before failing it.
const closeTimeout = 3 * time.Second

// Conn is a stream connection over RDMA, speaking librdmacm's rsocket
// protocol: the peer may be another Conn or a C program using rsockets
// (rstream, riostream, anything on librdmacm's rsocket API). It
// implements net.Conn.
//
// One Read and one Write may run at once (each is serialized with
// itself); Close, CloseWrite, CloseRead and the deadline setters may be
// called at any time and wake blocked calls. Read and Write allocate
// nothing once the connection is running.
type Conn struct {
	ch            *cm.Channel
	id            *cm.ID
	pd            *verbs.PD
	cch           *verbs.CompChannel
	cq            *cq.CQ
	qp            *qp.QP
	smr, tmr, rmr *mr.MR
	sbuf, rbuf    []byte
	laddr, raddr  *Addr
	keepalive     time.Duration
	pollTime      time.Duration // how long a blocked call polls before it sleeps
	epoch         time.Time     // poll's clock reads are time.Since(epoch): monotonic only
	iwarp         bool

	readMu  sync.Mutex // held by Read, CloseRead and Close
	writeMu sync.Mutex // held by Write, IOWrite, CloseWrite and Close
	mapMu   sync.Mutex // held by IOMap, IOUnmap and Close

	mu      sync.Mutex // the rest
	s       *stream
	closing bool // Close has begun: calls fail with net.ErrClosed
	freed   bool // the verbs objects are gone
	localWR bool // CloseWrite was called
	localRD bool // CloseRead was called

	// Waiting (wait.go).
	bg         context.Context // ends with Close
	bgCancel   context.CancelFunc
	waitCtx    context.Context // what the leader waits with; replaced when kicked
	waitCancel context.CancelFunc
	leader     *waiter
	rw, ww, cw waiter // Read's, Write's (and CloseWrite's), Close's
	waits      uint64 // channel waits (for tests)
	arms       uint64 // REQ_NOTIFYs: one per wait, or before a condition met after arming (for tests)
	polled     uint64 // waits that polling ended, without arming (for tests)
	unyielded  int    // Reads and posts since the last yield, and their data (see maybeYield)
	yields     uint64 // maybeYield's yields (for tests)

	wc      [32]verbs.WorkCompletion
	recvWRs []verbs.RecvWR
	ctrlWR  [2]verbs.SendWR // [1]: the SEND of the message word on iWARP
	ctrlSGE [1]verbs.SGE
	ctrlBuf [maxCtrlMsg]byte
	dataWR  [2]verbs.SendWR // [1]: the SEND of the message word on iWARP
	dataSGE [2]verbs.SGE

	// iWARP (RS_OPT_MSG_SEND): the receives' 4-byte slots after the
	// receive buffer, each receive's SGE, the slot the next re-posted
	// receive uses, and the message words the SENDs carry inline.
	msgSlots []byte
	recvSGEs []verbs.SGE
	recvNext int
	ctrlWord [msgSize]byte
	dataWord [msgSize]byte

	maps     []*iomapping // our mapped buffers, by peer table entry (iomap.go)
	mapQueue []*iomapping // mapped, not yet sent
	mapBuf   [iomapSize]byte

	kaTimer *time.Timer
	kaSent  uint64 // keepalives posted
	cmDone  chan struct{}
}

// Addr is the address of one end of an rsocket connection: an IP address
// and a port of rdma_cm's TCP port space, which is rsocket's.
type Addr struct {
	netip.AddrPort
}

// Network returns "rsocket", which Dial and Listen take as they take
// "tcp" (either IP version), so Dial(a.Network(), a.String()) reaches a.
func (a *Addr) Network() string { return "rsocket" }

// String returns the address as host:port.
func (a *Addr) String() string { return a.AddrPort.String() }

// newConn creates the connection's verbs objects on id's device (C's
// rs_create_ep and rs_init_bufs): one CQ with a completion channel for
// both directions, an RC QP, the send buffer, the target SGL (and iomap
// table) and the receive buffer, and posts the receives. It does not
// connect. On failure everything it made is closed (and id and ch too).
func newConn(ch *cm.Channel, id *cm.ID, cfg *config) (_ *Conn, err error) {
	c := &Conn{ch: ch, id: id, keepalive: cfg.keepalive, pollTime: cfg.pollTime, epoch: time.Now(), cmDone: make(chan struct{})}
	defer func() {
		if err != nil {
			c.free()
		}
	}()
	dev := id.Context()
	if dev == nil {
		return nil, errors.New("rsocket: the connection's ID is not bound to a device")
	}
	// iWARP has no RDMA WRITE WITH IMMEDIATE: there every message is a
	// WRITE and a SEND (rs_create_ep sets RS_OPT_MSG_SEND by the
	// device's transport).
	c.iwarp = dev.Device().NodeType.Transport() == verbs.TransportIWARP
	attr, err := dev.QueryDevice()
	if err != nil {
		return nil, err
	}
	// rs_set_qp_size.
	maxWR := min(attr.MaxQPWR, qpMaxSize)
	sqSize := clamp(cfg.sqSize, qpMinSize, maxWR)
	rqSize := clamp(cfg.rqSize, qpMinSize, maxWR)

	if c.pd, err = dev.AllocPD(); err != nil {
		return nil, err
	}
	if c.cch, err = dev.NewCompChannel(); err != nil {
		return nil, err
	}
	if c.cq, err = cq.New(dev, cq.Options{CQE: sqSize + rqSize, Channel: c.cch}); err != nil {
		return nil, err
	}
	inline := cfg.inline
	if c.iwarp {
		// The message word goes inline. C asks for the configured
		// size and fails with ENOTSUP if the provider grants less than
		// 4 bytes; asking for at least 4 changes nothing on the wire.
		inline = max(inline, msgSize)
	}
	c.qp, err = id.CreateQP(c.pd, qp.Options{
		SendCQ: c.cq, RecvCQ: c.cq, SigAll: true,
		Caps: qp.Caps{MaxSendWR: sqSize, MaxRecvWR: rqSize, MaxSendSGE: 2, MaxRecvSGE: 1, MaxInlineData: inline},
	})
	if err != nil {
		return nil, err
	}
	inline = c.qp.Caps().MaxInlineData // C adopts what the provider grants
	if c.iwarp && inline < msgSize {
		return nil, fmt.Errorf("rsocket: %s is an iWARP device and grants %d bytes of inline data, fewer than the %d of a message word: %w",
			dev.Device().Name, inline, msgSize, verbs.ErrNotCapable)
	}
	sbufLen := cfg.sbufSize
	if inline < maxCtrlMsg {
		sbufLen += maxCtrlMsg * qpCtrlSize // control messages' slots
	}
	if c.smr, err = mr.New(c.pd, sbufLen, mr.LocalWrite); err != nil {
		return nil, err
	}
	if c.tmr, err = mr.New(c.pd, sglSize*sgeSize+cfg.iomapSize*iomapSize, mr.LocalWrite|mr.RemoteWrite); err != nil {
		return nil, err
	}
	rmrLen := cfg.rbufSize
	if c.iwarp {
		rmrLen += rqSize * msgSize // rs_init_bufs: the receives' slots
	}
	if c.rmr, err = mr.New(c.pd, rmrLen, mr.LocalWrite|mr.RemoteWrite); err != nil {
		return nil, err
	}
	c.sbuf, c.rbuf = c.smr.Bytes(), c.rmr.Bytes()[:cfg.rbufSize]
	c.s = newStream(streamConfig{
		sqSize: sqSize, rqSize: rqSize, sqInline: inline,
		sbufSize: cfg.sbufSize, rbufSize: cfg.rbufSize,
		rbufAddr: c.rmr.IOVA(), rbufKey: c.rmr.RKey(),
		tmem: c.tmr.Bytes(), iomapLen: cfg.iomapSize, msgSend: c.iwarp,
	})
	// rs_create_ep posts rq_size receives before connecting: each
	// WRITE WITH IMM consumes one and places nothing in it. On iWARP
	// each receive has a 4-byte slot of its own after the receive
	// buffer, for a SEND's message word (rs_post_recv).
	c.recvWRs = make([]verbs.RecvWR, rqSize)
	if c.iwarp {
		c.msgSlots = c.rmr.Bytes()[cfg.rbufSize : cfg.rbufSize+rqSize*msgSize]
		c.recvSGEs = make([]verbs.SGE, rqSize)
		for i := range c.recvWRs {
			off := cfg.rbufSize + i*msgSize
			c.recvSGEs[i] = verbs.SGE{Addr: c.rmr.IOVA() + uint64(off), Length: msgSize, LKey: c.rmr.LKey()}
			c.recvWRs[i] = verbs.RecvWR{WRID: recvFlag | uint64(i), SGList: c.recvSGEs[i : i+1]}
		}
	} else {
		for i := range c.recvWRs {
			c.recvWRs[i].WRID = recvFlag
		}
	}
	if err := c.qp.PostRecv(c.recvWRs); err != nil {
		return nil, fmt.Errorf("rsocket: post receives: %w", err)
	}
	c.bg, c.bgCancel = context.WithCancel(context.Background())
	c.waitCtx, c.waitCancel = context.WithCancel(c.bg)
	c.initWaiters()
	return c, nil
}

// connData is the private data this side sends.
func (c *Conn) connData() [connDataSize]byte {
	d := c.s.localConnData(c.tmr.IOVA(), c.tmr.RKey())
	b := d.marshal()
	if connDataHook != nil {
		connDataHook(&b)
	}
	return b
}

// connDataHook, set by tests, edits the private data before it goes out.
var connDataHook func(*[connDataSize]byte)

// start runs the connection once the CM has established it: it learns
// the addresses, watches the CM for the peer's disconnect and starts the
// keepalive.
func (c *Conn) start() {
	src, dst := rdmaconn.Addrs(c.id)
	c.laddr, c.raddr = &Addr{src}, &Addr{dst}
	// C publishes the second half of its receive buffer with the first
	// credit update its application's first call sends; doing it now
	// gives the peer the whole buffer from the start (a C sender takes
	// an SGL update whenever it comes).
	c.mu.Lock()
	c.progress()
	c.mu.Unlock()
	go c.watchCM()
	if c.keepalive > 0 {
		// Under c.mu, which sendKeepalive takes before it reads kaTimer:
		// the timer may fire before AfterFunc's result is stored (the
		// race detector saw it in TestInteropKeepalive).
		c.mu.Lock()
		c.kaTimer = time.AfterFunc(c.keepalive, c.sendKeepalive)
		c.mu.Unlock()
	}
}

// watchCM turns the CM's DISCONNECTED into a connection state, as
// rsocket's connect_svc thread does: a peer whose ID went away without
// the in-band disconnect (its process died) resets the connection.
func (c *Conn) watchCM() {
	defer close(c.cmDone)
	rdmaconn.WatchDisconnect(c.bg, c.id, func(bool) {
		c.mu.Lock()
		if !c.freed {
			c.progress() // an in-band disconnect that came first counts
			if c.s.state&stConnected != 0 {
				c.s.state = stDisconnected
				c.s.err = syscall.ECONNRESET
			}
			c.wakeAll(nil)
		}
		c.mu.Unlock()
	})
}

// sendKeepalive posts rsocket's keepalive (tcp_svc_send_keepalive): a
// zero-length RDMA WRITE without immediate, to address 0 with rkey 0,
// which the peer's device acknowledges and its application never sees.
func (c *Conn) sendKeepalive() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.freed || c.closing {
		return
	}
	c.progress() // give back control slots of earlier messages
	if c.s.ctrlAvail() && c.s.state&stConnected != 0 {
		c.s.ctrlSeq++
		// A plain WRITE on iWARP too: postCtrl sends no message word.
		c.ctrlWR[0] = verbs.SendWR{WRID: uint64(msg(opCtrl, ctrlKeepalive)), Opcode: verbs.WRRDMAWrite}
		c.postCtrl()
		c.kaSent++
	}
	c.kaTimer.Reset(c.keepalive)
}

// progress polls the CQ dry and applies every completion
// (rs_poll_cq), re-posts a receive for each one consumed, and grants
// credits when due (rs_update_credits, before and after, as
// rs_process_cq does). Blocked calls that may proceed are woken. The
// caller holds c.mu.
func (c *Conn) progress() {
	c.updateCredits()
	did := false
	for {
		n, err := c.cq.Poll(c.wc[:])
		if err != nil {
			c.s.fail(err)
			break
		}
		recvs := 0
		for i := range c.wc[:n] {
			wc := &c.wc[i]
			if wc.WRID&recvFlag == 0 {
				c.s.sent(wc.WRID, wc.Status == verbs.WCSuccess)
				if wc.Status != verbs.WCSuccess && c.s.err == errSendFailed {
					c.s.err = &CompletionError{Msg: wrKind(wc.WRID), Status: wc.Status, iwarp: c.iwarp}
				}
				continue
			}
			switch {
			case wc.Status != verbs.WCSuccess:
				// C skips failed receives. They come from a QP in
				// the error state: past a disconnect, a flush;
				// before it, the connection is broken.
				if c.s.state&stConnected != 0 {
					c.s.fail(&CompletionError{Msg: "receive", Status: wc.Status, iwarp: c.iwarp})
				}
			case c.s.state&(stConnected|stError) != stConnected:
				// Past the peer's disconnect (C stops polling there).
			case c.s.msgSend:
				// iWARP: the SEND of a message word, into the
				// receive's slot (rs_poll_cq reads it in host order,
				// as the sender wrote it).
				recvs++
				slot := int(wc.WRID&^recvFlag) * msgSize
				if wc.Flags&verbs.WCWithImm != 0 || wc.ByteLen != msgSize {
					c.s.fail(protocolError("a receive of %d bytes (opcode %v) where a %d-byte message word was due", wc.ByteLen, wc.Opcode, msgSize))
				} else if err := c.s.recvMsg(native.uint32(c.msgSlots[slot : slot+msgSize])); err != nil {
					c.s.fail(err)
				}
			case wc.Flags&verbs.WCWithImm == 0:
				c.s.fail(protocolError("a receive without immediate data (opcode %v, %d bytes)", wc.Opcode, wc.ByteLen))
			default:
				recvs++
				if err := c.s.recv(wc.Imm(), wc.ByteLen); err != nil {
					c.s.fail(err)
				}
			}
		}
		if recvs > 0 && c.s.state&stConnected != 0 {
			if c.s.msgSend {
				c.repostSlots(recvs)
			} else if err := c.qp.PostRecv(c.recvWRs[:recvs]); err != nil {
				c.s.fail(err)
			}
		}
		if n > 0 {
			did = true
		}
		if n < len(c.wc) {
			break
		}
	}
	c.updateCredits()
	if did {
		c.wakeFollowers()
	}
}

// repostSlots re-posts n receives on iWARP, each with the slot after the
// last one posted (rs_post_recv's rbuf_msg_index): receives complete in
// the order they were posted, so a slot is posted again only once the
// message word in it has been read.
func (c *Conn) repostSlots(n int) {
	if err := rdmaconn.Repost(c.qp, c.recvWRs, &c.recvNext, n); err != nil {
		c.s.fail(err)
	}
}

// errSendFailed marks a failed send completion until progress puts the
// completion's status in its place.
var errSendFailed = errors.New("rsocket: send failed")

// CompletionError is the error of a connection one of whose work
// requests completed with an error status: the peer went away (its
// memory or QP vanished under an RDMA write, or it stopped answering) or
// the QP failed. Msg says what the work request carried.
type CompletionError struct {
	Msg    string // "data", "SGL update", "control message", "keepalive", "receive"
	Status verbs.WCStatus
	iwarp  bool // on an iWARP device
}

func (e *CompletionError) Error() string {
	return fmt.Sprintf("rsocket: %s completed with status %v", e.Msg, e.Status)
}

// Unwrap gives the errno a socket would report: ECONNRESET when the
// peer's side refused the request (a dead process's registrations are
// gone), or on iWARP when the request was flushed or failed locally in
// transmission (siw moves the QP to the error state when the peer's end
// of its TCP stream goes away, as when the peer's process dies, and
// completes the request it was sending then with LOC_QP_OP_ERR:
// siw_qp_sq_process; both seen on siw), ETIMEDOUT when it stopped
// answering (retries exceeded), EIO otherwise (C's rsocket reports EIO
// for all of them).
func (e *CompletionError) Unwrap() error {
	if e.iwarp && (e.Status == verbs.WCWRFlushErr || e.Status == verbs.WCLocQPOpErr) {
		return syscall.ECONNRESET
	}
	return rdmaconn.StatusErrno(e.Status)
}

// wrKind names what one of our work requests carried, from its wr_id.
func wrKind(wrID uint64) string {
	if wrID&recvFlag != 0 {
		return "receive"
	}
	switch m := uint32(wrID); msgOp(m) {
	case opData:
		return "data"
	case opWrite:
		return "iowrite"
	case opSGL:
		return "SGL update"
	case opIOMapSGL:
		return "iomap update"
	default:
		if msgData(m) == ctrlKeepalive {
			return "keepalive"
		}
		return "control message"
	}
}

// updateCredits sends a credit (and SGL) update when one is due.
func (c *Conn) updateCredits() {
	if !c.s.giveCredits() {
		return
	}
	cr := c.s.credits()
	c.ctrlWR[0] = verbs.SendWR{WRID: uint64(cr.imm), Opcode: verbs.WRRDMAWriteWithImm, Imm: cr.imm}
	if cr.sge {
		wr := &c.ctrlWR[0]
		wr.RemoteAddr, wr.RKey = cr.raddr, cr.rkey
		if c.s.sqInline >= sgeSize {
			c.ctrlBuf = cr.e
			wr.InlineData = c.ctrlBuf[:]
		} else {
			// rs_get_ctrl_buf: one of four slots after the send
			// buffer, in turn; a slot comes round again only after
			// its message completed (at most four are in flight).
			off := c.s.sbufSize + maxCtrlMsg*int(c.s.ctrlSeq&(qpCtrlSize-1))
			copy(c.sbuf[off:off+sgeSize], cr.e[:])
			c.ctrlSGE[0] = verbs.SGE{Addr: c.smr.IOVA() + uint64(off), Length: sgeSize, LKey: c.smr.LKey()}
			wr.SGList = c.ctrlSGE[:]
		}
	}
	c.postCtrl()
}

// postCtrl posts c.ctrlWR[0], whose control slot(s) the caller took
// (as a WRITE and a SEND on iWARP: msgSendWRs).
func (c *Conn) postCtrl() {
	n := 1
	if c.s.msgSend {
		n = msgSendWRs(&c.ctrlWR, &c.ctrlWord)
	}
	err := c.qp.PostSend(c.ctrlWR[:n])
	c.ctrlWR[0] = verbs.SendWR{}
	if n > 1 {
		c.ctrlWR[1] = verbs.SendWR{}
	}
	if err != nil {
		c.s.fail(fmt.Errorf("rsocket: post: %w", err))
	}
}

// msgSendWRs turns wrs[0], if it is an RDMA WRITE WITH IMM, into what C
// posts on iWARP (RS_OPT_MSG_SEND: rs_post_write_msg, rs_post_msg) and
// returns how many of wrs to post. A message with a payload becomes a
// plain WRITE of it (same wr_id) and wrs[1], a SEND of the message word
// with the message's operation and msgSendFlag as wr_id; a message
// without one becomes the SEND alone, with the message as wr_id. The
// word goes inline, in this host's order, as C sends it.
func msgSendWRs(wrs *[2]verbs.SendWR, word *[msgSize]byte) int {
	w := &wrs[0]
	if w.Opcode != verbs.WRRDMAWriteWithImm {
		return 1
	}
	m := w.Imm
	native.putUint32(word[:], m)
	send := verbs.SendWR{WRID: w.WRID, Opcode: verbs.WRSend, InlineData: word[:]}
	if len(w.SGList) == 0 && w.InlineData == nil {
		*w = send
		return 1
	}
	w.Opcode, w.Imm = verbs.WRRDMAWrite, 0
	send.WRID = uint64(msg(msgOp(m), 0)) | msgSendFlag
	wrs[1] = send
	return 2
}

// postCtrlMsg sends control message code (rs_post_msg): a zero-length
// WRITE WITH IMM, whose remote address and key the peer does not check.
func (c *Conn) postCtrlMsg(code uint32) {
	m := msg(opCtrl, code)
	c.s.ctrlSeq++
	c.ctrlWR[0] = verbs.SendWR{WRID: uint64(m), Opcode: verbs.WRRDMAWriteWithImm, Imm: m}
	c.postCtrl()
}

// Read reads received data into p: what has arrived, up to len(p),
// waiting for some if there is none. After the peer's CloseWrite or
// Close, Read returns the data that came before it and then io.EOF.
func (c *Conn) Read(p []byte) (int, error) {
	c.readMu.Lock()
	defer c.readMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.maybeYield()
	for {
		if c.closing {
			return 0, c.opError("read", net.ErrClosed)
		}
		if c.rw.Expired() {
			return 0, c.opError("read", errTimeout)
		}
		if len(p) == 0 {
			return 0, nil
		}
		if !c.s.haveData() {
			c.progress()
		}
		if c.s.haveData() {
			n := c.s.consume(p, c.rbuf)
			c.unyielded += n / yieldBytes
			c.updateCredits()
			return n, nil
		}
		if err := c.readErr(); err != nil {
			return 0, err
		}
		if err := c.wait(&c.rw, condRead); err != nil {
			return 0, c.opError("read", err)
		}
	}
}

// readErr is why Read cannot wait for data, or nil.
func (c *Conn) readErr() error {
	switch {
	case c.s.state&stReadable != 0:
		return nil
	case c.s.state&stError != 0 || c.s.err != nil:
		return c.opError("read", c.s.err)
	default:
		return io.EOF // the peer's shutdown or disconnect, or CloseRead
	}
}

// Write writes p, waiting for credits, buffer space and the peer's
// receive buffer as needed (rsend). Each call cuts p into messages of
// 2 KiB, 4 KiB, ... up to 64 KiB, as C does, and copies them into the
// send buffer (messages up to the inline size go in the work request),
// so p may be reused as soon as Write returns.
func (c *Conn) Write(p []byte) (int, error) {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.sendIOMaps("write"); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, c.writeOver("write")
	}
	n := 0
	olen := olapStartSize
	for n < len(p) {
		if err := c.awaitPost("write", condWrite); err != nil {
			return n, err
		}
		n += c.postData(p[n:], &olen)
	}
	return n, nil
}

// awaitPost returns nil once a post of kind cond (condWrite: a message;
// condDirect: an IOWrite chunk) may go out, or the error that ends the
// writing call op: Close, the write deadline, or the write side's end.
// Write, IOWrite and sendIOMaps share it. The caller holds writeMu and
// c.mu.
func (c *Conn) awaitPost(op string, cond int) error {
	c.maybeYield()
	for {
		if err := c.writeOver(op); err != nil {
			return err
		}
		if !c.canPost(cond) {
			c.progress()
		}
		if c.canPost(cond) {
			return nil
		}
		// A wait also ends when the write side does: the loop then
		// reports why.
		if err := c.wait(&c.ww, cond); err != nil {
			return c.opError(op, err)
		}
	}
}

// canPost reports whether a post of kind cond may go out now.
func (c *Conn) canPost(cond int) bool {
	if cond == condDirect {
		return c.s.canWriteDirect()
	}
	return c.s.canSend()
}

// writeOver is why the writing call op cannot go on (Close, the write
// deadline, the write side's end), or nil.
func (c *Conn) writeOver(op string) error {
	switch {
	case c.closing:
		return c.opError(op, net.ErrClosed)
	case c.ww.Expired():
		return c.opError(op, errTimeout)
	}
	return c.writeErr(op)
}

// writeErr is why the writing call op cannot send, or nil.
func (c *Conn) writeErr(op string) error {
	switch {
	case c.s.state&stWritable != 0:
		return nil
	case c.localWR:
		return c.opError(op, syscall.EPIPE)
	case c.s.state&stError != 0 || c.s.err != nil:
		return c.opError(op, c.s.err)
	default:
		return c.opError(op, syscall.ECONNRESET) // as C's rsend
	}
}

// postData sends the next message of a write (rs_write_data) and
// returns its length.
func (c *Conn) postData(p []byte, olen *int) int {
	ch := c.s.nextChunk(len(p), olen)
	c.post(ch, p[:ch.n], verbs.WRRDMAWriteWithImm)
	return ch.n
}

// post posts one planned message: payload (len ch.n) inline, or copied
// into the send buffer where ch says, written to the peer with op (WITH
// IMM ch.imm, or plain) and ch.imm as wr_id.
func (c *Conn) post(ch chunk, payload []byte, op verbs.WROpcode) {
	wr := &c.dataWR[0]
	*wr = verbs.SendWR{WRID: uint64(ch.imm), Opcode: op, RemoteAddr: ch.raddr, RKey: ch.rkey}
	if op == verbs.WRRDMAWriteWithImm {
		wr.Imm = ch.imm
	}
	if ch.inline {
		wr.InlineData = payload
	} else {
		first := ch.n - ch.wrap
		copy(c.sbuf[ch.off:ch.off+first], payload[:first])
		c.dataSGE[0] = verbs.SGE{Addr: c.smr.IOVA() + uint64(ch.off), Length: uint32(first), LKey: c.smr.LKey()}
		wr.SGList = c.dataSGE[:1]
		if ch.wrap > 0 {
			copy(c.sbuf[:ch.wrap], payload[first:])
			c.dataSGE[1] = verbs.SGE{Addr: c.smr.IOVA(), Length: uint32(ch.wrap), LKey: c.smr.LKey()}
			wr.SGList = c.dataSGE[:2]
		}
	}
	c.unyielded += ch.n / yieldBytes
	n := 1
	if c.s.msgSend {
		n = msgSendWRs(&c.dataWR, &c.dataWord)
	}
	err := c.qp.PostSend(c.dataWR[:n])
	*wr = verbs.SendWR{}
	if n > 1 {
		c.dataWR[1] = verbs.SendWR{}
	}
	if err != nil {
		c.s.fail(fmt.Errorf("rsocket: post: %w", err))
	}
}

// CloseWrite shuts down the sending side (rshutdown(SHUT_WR)): a Write
// in progress returns, later writes fail with EPIPE, and the peer reads
// io.EOF after the data sent so far. It waits until everything sent has
// been acknowledged, within the write deadline.
func (c *Conn) CloseWrite() error {
	return c.shutdown(false, true)
}

// CloseRead shuts down the receiving side (rshutdown(SHUT_RD)): Read
// returns io.EOF. Nothing goes to the peer while this side may still
// write (rsocket has no message for it).
func (c *Conn) CloseRead() error {
	return c.shutdown(true, false)
}

// shutdown is rshutdown: it clears readable and/or writable and tells
// the peer (SHUTDOWN when this side still reads, DISCONNECT when neither
// direction is left), then waits for all sends to complete.
func (c *Conn) shutdown(rd, wr bool) error {
	op := "close write"
	if rd {
		op = "close read"
	}
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return c.opError(op, net.ErrClosed)
	}
	if rd {
		c.localRD = true
	}
	if wr {
		c.localWR = true
	}
	connected := c.s.state&stConnected != 0
	if connected {
		if rd {
			c.s.state &^= stReadable
		}
		if wr {
			c.s.state &^= stWritable
		}
	}
	// Only CloseWrite, or CloseRead once writing is over too, has
	// something to tell the peer.
	tell := connected && (wr || c.s.state&stWritable == 0)
	c.wakeAll(nil)
	c.mu.Unlock()
	if !tell {
		return nil
	}
	// A Write in progress returns (writable is gone) before the control
	// message goes out behind its data.
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	code := uint32(ctrlDisconnect)
	if c.s.state&stReadable != 0 {
		code = ctrlShutdown
	}
	if err := c.sendCtrl(&c.ww, code); err != nil {
		return c.opError(op, err)
	}
	return nil
}

// sendCtrl posts control message code once a control slot is free and
// waits until every send has completed, as rshutdown does; w's deadline
// bounds the waits. The caller holds c.mu.
func (c *Conn) sendCtrl(w *waiter, code uint32) error {
	for c.s.state&stConnected != 0 && !c.s.ctrlAvail() {
		c.progress()
		if c.s.ctrlAvail() {
			break
		}
		if c.closing && w != &c.cw {
			return net.ErrClosed
		}
		if err := c.wait(w, condCtrl); err != nil {
			return err
		}
	}
	if c.s.state&stConnected != 0 {
		c.postCtrlMsg(code)
	}
	for {
		c.progress()
		if c.s.allSent() {
			return nil
		}
		if c.closing && w != &c.cw {
			return net.ErrClosed
		}
		if err := c.wait(w, condSent); err != nil {
			return err
		}
	}
}

// Close closes the connection: blocked Read and Write calls return
// net.ErrClosed; if the connection is still up, the peer is told
// (rsocket's in-band disconnect) and Close waits a little for that
// message to go out; then the QP, the memory and the CM ID are
// destroyed, which sends the CM's DREQ (rclose).
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return c.opError("close", net.ErrClosed)
	}
	c.closing = true
	c.wakeAll(nil)
	c.mu.Unlock()

	c.readMu.Lock()
	defer c.readMu.Unlock()
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	c.mapMu.Lock()
	defer c.mapMu.Unlock()
	c.mu.Lock()
	if c.kaTimer != nil {
		c.kaTimer.Stop()
	}
	if c.s.state&stConnected != 0 {
		c.s.state &^= stReadable | stWritable
		c.cw.SetDeadline(time.Now().Add(closeTimeout))
		c.sendCtrl(&c.cw, ctrlDisconnect) // best effort: the peer may be gone
	}
	c.mu.Unlock()
	c.bgCancel()
	<-c.cmDone
	return c.free()
}

// free destroys what newConn made, QP first, and the CM ID and channel.
func (c *Conn) free() error {
	c.mu.Lock()
	c.freed = true
	c.mu.Unlock()
	var mrs []*mr.MR
	for _, m := range c.maps {
		if m != nil {
			mrs = append(mrs, m.mr)
		}
	}
	return rdmaconn.Free(c.bgCancel, c.ch, c.id, c.pd, c.cch, c.cq, c.qp, append(mrs, c.smr, c.tmr, c.rmr)...)
}

// LocalAddr returns the local address (an *Addr).
func (c *Conn) LocalAddr() net.Addr { return c.laddr }

// RemoteAddr returns the peer's address (an *Addr).
func (c *Conn) RemoteAddr() net.Addr { return c.raddr }

// SetDeadline sets the read and write deadlines.
func (c *Conn) SetDeadline(t time.Time) error { return rdmaconn.SetDeadline(c, t) }

// SetReadDeadline sets the deadline of Read calls, including one that is
// blocked now; they then fail with an error that wraps
// os.ErrDeadlineExceeded. The zero time means none.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.setDeadline(&c.rw, t) }

// SetWriteDeadline sets the deadline of Write (and CloseWrite) calls,
// including one that is blocked now. A Write that times out may have
// sent part of its data.
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.setDeadline(&c.ww, t) }

func (c *Conn) setDeadline(w *waiter, t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return c.opError("set deadline", net.ErrClosed)
	}
	w.SetDeadline(t)
	c.wake(w)
	return nil
}

func (c *Conn) opError(op string, err error) error {
	return rdmaconn.OpError(op, "rsocket", c.laddr, c.raddr, err)
}

// errTimeout is what a deadline ends a wait with.
var errTimeout = os.ErrDeadlineExceeded

var _ net.Conn = (*Conn)(nil)
