package valkeyrdma

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
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

// Work request IDs. A receive's wr_id is recvFlag and the index of its
// 32-byte slot; a control message's SEND is ctrlFlag and its send slot;
// a data WRITE's wr_id is its sequence number (Conn.dataPosted when it
// was posted).
const (
	recvFlag = 1 << 63
	ctrlFlag = 1 << 62
)

// closeTimeout bounds how long Close waits for what was written to
// leave (cm.ID.Disconnect's own bound is 2 s).
const closeTimeout = 3 * time.Second

// signalEvery is how many data WRITEs in a row may go without asking
// for a completion while the send queue and the staging ring are less
// than half full. Valkey's client asks for one every 1024; a completion
// per WRITE costs a completion event (a wake-up of the poller) per
// request on top of the reply's.
const signalEvery = 64

// spinPolls is how many times a call that cannot proceed polls the CQ,
// yielding between polls, before it sleeps on the completion channel.
const spinPolls = 32

// Conn is a connection speaking Valkey's RDMA transport. It implements
// net.Conn. One Read and one Write may run at once; Close and the
// deadline setters may be called at any time and wake blocked calls.
// Read and Write allocate nothing once the connection runs.
type Conn struct {
	ch           *cm.Channel
	id           *cm.ID
	pd           *verbs.PD
	cch          *verbs.CompChannel
	cq           *cq.CQ
	qp           *qp.QP
	cmdMR        *mr.MR // rqSize receive slots, then ctrlSlots send slots
	rxMR, txMR   *mr.MR
	cmdBuf       []byte
	rx, tx       []byte
	laddr, raddr *Addr
	keepalive    time.Duration
	server       bool // accepted by a Listener: answers GetServerFeature

	readMu  sync.Mutex // held by Read and Close
	writeMu sync.Mutex // held by Write and Close

	mu         sync.Mutex // the rest
	err        error      // why the connection failed (sticky)
	peerClosed bool       // the peer disconnected: EOF after the data
	closing    bool       // Close has begun
	freed      bool       // the verbs objects are gone

	// Receiving: the peer has written rx[:rxTail], the application has
	// read rx[:rxHead]. Once both reach len(rx), the buffer is
	// published again (RegisterXferMemory) and both restart at 0.
	rxHead, rxTail int
	rxPending      bool // the buffer is to be published, waiting for a send slot

	// Sending: the peer's RX buffer (valid once remote.length > 0) and
	// how much of it this side has written; the staging ring tx, whose
	// txUsed bytes from txTail are in flight; free send queue slots.
	remoteAddr   uint64
	remoteKey    uint32
	remoteLen    int
	remoteOff    int
	txHead       int
	txTail       int
	txUsed       int
	sqAvail      int
	ctrlNext     int // the next send slot to use
	ctrlInFlight int

	// Most data WRITEs are posted unsignaled; a completion (of a
	// signaled WRITE, or of a control message's SEND: the send queue
	// completes in order) frees every WRITE posted before it.
	// dataLens holds the lengths of the WRITEs not yet freed, by
	// sequence number; dataCovered is how many WRITEs a signaled
	// work request posted so far will free.
	dataLens    []int
	dataPosted  uint64
	dataDone    uint64
	dataCovered uint64
	ctrlData    [ctrlSlots]uint64 // dataPosted when each send slot's SEND was posted

	peerFeatures   uint64
	peerFeaturesOK bool

	// Waiting: a call that cannot proceed sets its waiter blocked and
	// sleeps on its wake channel; the poller goroutine keeps the CQ
	// armed, processes completions after each event and wakes each
	// blocked call whose condition holds.
	rw, ww, cw waiter
	bg         context.Context
	bgCancel   context.CancelFunc
	pollDone   chan struct{}
	cmDone     chan struct{}
	kaTimer    *time.Timer
	kaSent     uint64 // keepalives posted (for tests)
	waits      uint64 // sleeps on a wake channel (for tests)
	events     uint64 // the poller's waits on the completion channel (for tests)

	wc       [32]verbs.WorkCompletion
	recvWRs  []verbs.RecvWR
	recvSGEs []verbs.SGE
	recvNext int
	dataWR   [1]verbs.SendWR
	dataSGE  [1]verbs.SGE
	ctrlWR   [1]verbs.SendWR
	ctrlSGE  [1]verbs.SGE
}

// Addr is the address of one end of a connection: an IP address and a
// port of rdma_cm's TCP port space.
type Addr struct {
	netip.AddrPort
}

// Network returns "valkey-rdma".
func (a *Addr) Network() string { return "valkey-rdma" }

// String returns the address as host:port.
func (a *Addr) String() string { return a.AddrPort.String() }

// Wait conditions.
const (
	condRead  = iota // data to read, or reading is over
	condWrite        // a WRITE may go out, or writing is over
	condSent         // every send has completed, or the connection is down
	condCtrl         // a control slot is free, or the connection is down
)

// waiter is one kind of blocked call (Read, Write, Close) and what it
// waits for.
type waiter struct {
	rdmaconn.Waiter
	cond int
}

// newConn creates the connection's verbs objects on id's device, as
// Valkey's client does before rdma_connect: a CQ with a completion
// channel for both directions, an RC QP, the command slots with every
// receive posted, the RX buffer and the staging buffer. On failure it
// closes everything it made, id and ch too.
func newConn(ch *cm.Channel, id *cm.ID, cfg *config, server bool) (_ *Conn, err error) {
	c := &Conn{ch: ch, id: id, keepalive: cfg.keepalive, server: server, pollDone: make(chan struct{}), cmDone: make(chan struct{})}
	defer func() {
		if err != nil {
			c.free()
		}
	}()
	dev := id.Context()
	if dev == nil {
		return nil, errors.New("valkeyrdma: the connection's ID is not bound to a device")
	}
	if dev.Device().NodeType.Transport() == verbs.TransportIWARP {
		// Every data transfer of the transport is a WRITE WITH
		// IMMEDIATE, which iWARP does not have (nor RNR retry, which
		// Valkey's server does without but this side's sends use).
		return nil, fmt.Errorf("valkeyrdma: %s is an iWARP device, without the RDMA WRITE WITH IMMEDIATE Valkey's transport sends all data with: %w",
			dev.Device().Name, verbs.ErrNotCapable)
	}
	attr, err := dev.QueryDevice()
	if err != nil {
		return nil, err
	}
	qsize := min(queueSize, attr.MaxQPWR)
	if c.pd, err = dev.AllocPD(); err != nil {
		return nil, err
	}
	if c.cch, err = dev.NewCompChannel(); err != nil {
		return nil, err
	}
	if c.cq, err = cq.New(dev, cq.Options{CQE: 2 * qsize, Channel: c.cch}); err != nil {
		return nil, err
	}
	c.qp, err = id.CreateQP(c.pd, qp.Options{
		SendCQ: c.cq, RecvCQ: c.cq,
		Caps: qp.Caps{MaxSendWR: qsize, MaxRecvWR: qsize, MaxSendSGE: 1, MaxRecvSGE: 1},
	})
	if err != nil {
		return nil, err
	}
	if c.cmdMR, err = mr.New(c.pd, (qsize+ctrlSlots)*cmdSize, mr.LocalWrite); err != nil {
		return nil, err
	}
	if c.rxMR, err = mr.New(c.pd, cfg.rxSize, mr.LocalWrite|mr.RemoteWrite|mr.RemoteRead); err != nil {
		return nil, err
	}
	if c.txMR, err = mr.New(c.pd, cfg.txSize, mr.LocalWrite); err != nil {
		return nil, err
	}
	c.cmdBuf, c.rx, c.tx = c.cmdMR.Bytes(), c.rxMR.Bytes(), c.txMR.Bytes()
	c.sqAvail = qsize - ctrlSlots
	c.dataLens = make([]int, c.sqAvail)
	// Every receive has a slot of its own: a control message lands in
	// it; a WRITE WITH IMMEDIATE places nothing there.
	c.recvWRs = make([]verbs.RecvWR, qsize)
	c.recvSGEs = make([]verbs.SGE, qsize)
	for i := range c.recvWRs {
		c.recvSGEs[i] = verbs.SGE{Addr: c.cmdMR.IOVA() + uint64(i*cmdSize), Length: cmdSize, LKey: c.cmdMR.LKey()}
		c.recvWRs[i] = verbs.RecvWR{WRID: recvFlag | uint64(i), SGList: c.recvSGEs[i : i+1]}
	}
	if err := c.qp.PostRecv(c.recvWRs); err != nil {
		return nil, fmt.Errorf("valkeyrdma: post receives: %w", err)
	}
	c.bg, c.bgCancel = context.WithCancel(context.Background())
	for _, w := range [...]*waiter{&c.rw, &c.ww, &c.cw} {
		// A deadline that passes while the call is blocked wakes it.
		w.Init(func() {
			c.mu.Lock()
			c.wake(w)
			c.mu.Unlock()
		})
	}
	return c, nil
}

// start runs the connection once the CM has established it: it learns
// the addresses, publishes the RX buffer, asks a server for its features
// (a client), and starts the poller, the CM watcher and the keepalive.
func (c *Conn) start() {
	src, dst := rdmaconn.Addrs(c.id)
	c.laddr, c.raddr = &Addr{src}, &Addr{dst}
	c.mu.Lock()
	c.rxPending = true
	c.progress()
	if !c.server {
		c.postCtrl(command{op: opGetServerFeature})
	}
	if c.keepalive > 0 {
		c.kaTimer = time.AfterFunc(c.keepalive, c.sendKeepalive)
	}
	c.mu.Unlock()
	go c.pollLoop()
	go c.watchCM()
}

// watchCM turns the CM's DISCONNECTED into the connection's state: the
// peer closed (or its host's CM gave up on it).
func (c *Conn) watchCM() {
	defer close(c.cmDone)
	rdmaconn.WatchDisconnect(c.bg, c.id, func(removal bool) {
		c.mu.Lock()
		if !c.freed {
			c.progress() // what arrived before it can still be read
			c.peerClosed = true
			if removal {
				c.fail(fmt.Errorf("valkeyrdma: the RDMA device went away: %w", syscall.ENODEV))
			}
			c.wakeAll()
		}
		c.mu.Unlock()
	})
}

// sendKeepalive posts a Keepalive; a peer that is gone fails it.
func (c *Conn) sendKeepalive() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.freed || c.closing || c.err != nil || c.peerClosed {
		return
	}
	c.progress()
	if c.ctrlInFlight < ctrlSlots {
		c.postCtrl(command{op: opKeepalive})
		c.kaSent++
	}
	c.kaTimer.Reset(c.keepalive)
}

// pollLoop keeps the CQ armed and polls it after each completion
// event, whether or not a call is blocked: the receives the peer's
// writes consume must be re-posted even while the application reads
// nothing (Valkey's server has no RNR retry), and the calls that sleep
// are woken from here.
func (c *Conn) pollLoop() {
	defer close(c.pollDone)
	for {
		c.mu.Lock()
		if c.freed {
			c.mu.Unlock()
			return
		}
		c.progress()
		if err := c.cq.ReqNotify(false); err != nil {
			c.fail(fmt.Errorf("valkeyrdma: arm the CQ: %w", err))
			c.wakeAll()
			c.mu.Unlock()
			return
		}
		pending := c.cq.Pending()
		if !pending {
			c.events++
		}
		c.mu.Unlock()
		if pending {
			continue
		}
		if _, err := cq.WaitChannel(c.bg, c.cch); err != nil {
			if c.bg.Err() != nil {
				return
			}
			c.mu.Lock()
			c.fail(fmt.Errorf("valkeyrdma: wait for completions: %w", err))
			c.wakeAll()
			c.mu.Unlock()
			return
		}
	}
}

// fail records err as why the connection failed, unless one is already
// recorded. The caller holds c.mu.
func (c *Conn) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

// ready reports whether cond holds. The caller holds c.mu.
func (c *Conn) ready(cond int) bool {
	down := c.err != nil || c.peerClosed || c.closing
	switch cond {
	case condRead:
		return c.rxHead < c.rxTail || down
	case condWrite:
		return c.canWrite() || down
	case condCtrl:
		return c.ctrlInFlight < ctrlSlots || down
	default:
		return c.allSent() || c.err != nil
	}
}

func (c *Conn) allSent() bool { return c.txUsed == 0 && c.ctrlInFlight == 0 }

// canWrite reports whether a data WRITE may go out now: the peer's
// buffer has room, and so do the send queue and the staging ring.
func (c *Conn) canWrite() bool {
	return c.remoteOff < c.remoteLen && c.sqAvail > 0 && c.txUsed < len(c.tx)
}

// wake wakes w if it is blocked. The caller holds c.mu.
func (c *Conn) wake(w *waiter) {
	if w.Blocked {
		w.Signal()
	}
}

// wakeAll wakes every blocked call. The caller holds c.mu.
func (c *Conn) wakeAll() {
	c.wake(&c.rw)
	c.wake(&c.ww)
	c.wake(&c.cw)
}

// wakeReady wakes the blocked calls whose condition holds. The caller
// holds c.mu.
func (c *Conn) wakeReady() {
	for _, w := range [...]*waiter{&c.rw, &c.ww, &c.cw} {
		if w.Blocked && c.ready(w.cond) {
			c.wake(w)
		}
	}
}

// wait blocks the call w until its condition may hold, its deadline
// passes (os.ErrDeadlineExceeded) or the connection changes state. It may
// return early; callers look again and loop. The caller holds c.mu,
// which wait releases while blocked.
func (c *Conn) wait(w *waiter, cond int) error {
	if w.Expired() {
		return os.ErrDeadlineExceeded
	}
	for i := 0; i < spinPolls; i++ {
		c.mu.Unlock()
		runtime.Gosched()
		c.mu.Lock()
		c.progress()
		if c.ready(cond) || c.closing && w != &c.cw {
			return nil
		}
	}
	if !w.Block() {
		return os.ErrDeadlineExceeded
	}
	w.cond = cond
	c.waits++
	w.Sleep(&c.mu)
	w.Unblock()
	return nil
}

// progress polls the CQ dry and applies every completion, re-posting a
// receive for each one consumed, then publishes the RX buffer if that is
// due, and wakes the blocked calls that may proceed. The caller holds
// c.mu.
func (c *Conn) progress() {
	if c.freed {
		return
	}
	did := false
	for {
		n, err := c.cq.Poll(c.wc[:])
		if err != nil {
			c.fail(fmt.Errorf("valkeyrdma: poll: %w", err))
			break
		}
		recvs := 0
		for i := range c.wc[:n] {
			wc := &c.wc[i]
			if wc.WRID&recvFlag != 0 {
				recvs++
				c.received(wc)
			} else {
				c.sent(wc)
			}
		}
		if recvs > 0 && c.err == nil && !c.peerClosed {
			c.repost(recvs)
		}
		if n > 0 {
			did = true
		}
		if n < len(c.wc) {
			break
		}
	}
	if c.rxPending && c.ctrlInFlight < ctrlSlots && c.err == nil && !c.peerClosed {
		c.rxPending = false
		c.postCtrl(command{op: opRegisterXferMemory, addr: c.rxMR.IOVA(), length: uint32(len(c.rx)), rkey: c.rxMR.RKey()})
	}
	if did {
		c.wakeReady()
	}
}

// received applies one receive completion. The caller holds c.mu.
func (c *Conn) received(wc *verbs.WorkCompletion) {
	if wc.Status != verbs.WCSuccess {
		if wc.Status == verbs.WCWRFlushErr {
			// The QP went to the error state: the peer's disconnect
			// (the CM's event may come later), or a failure a send
			// completion reported.
			c.peerClosed = true
			return
		}
		c.fail(&CompletionError{Op: "receive", Status: wc.Status})
		return
	}
	if c.err != nil || c.peerClosed {
		return
	}
	if wc.Opcode == verbs.WCRecvRDMAWithImm {
		n := int(wc.Imm())
		if n > len(c.rx)-c.rxTail {
			c.fail(protocolError("the peer wrote %d bytes at offset %d of the %d-byte RX buffer", n, c.rxTail, len(c.rx)))
			return
		}
		c.rxTail += n
		return
	}
	if wc.Flags&verbs.WCWithImm != 0 {
		c.fail(protocolError("a SEND with immediate data (opcode %v)", wc.Opcode))
		return
	}
	if wc.ByteLen != cmdSize {
		c.fail(protocolError("a control message of %d bytes, not %d", wc.ByteLen, cmdSize))
		return
	}
	slot := int(wc.WRID &^ recvFlag)
	cmd, err := parseCommand(c.cmdBuf[slot*cmdSize : (slot+1)*cmdSize])
	if err != nil {
		c.fail(err)
		return
	}
	switch cmd.op {
	case opRegisterXferMemory:
		c.remoteAddr, c.remoteKey = cmd.addr, cmd.rkey
		c.remoteLen, c.remoteOff = int(cmd.length), 0
	case opGetServerFeature:
		if c.server {
			if c.ctrlInFlight >= ctrlSlots {
				c.fail(protocolError("GetServerFeature requests faster than this side answers them"))
				return
			}
			c.postCtrl(command{op: opGetServerFeature, sel: cmd.sel})
		} else {
			c.peerFeatures, c.peerFeaturesOK = cmd.features, true
		}
	case opSetClientFeature:
		if !c.server {
			c.fail(protocolError("SetClientFeature from the server"))
		} else if cmd.features != 0 {
			c.fail(protocolError("the client asks for features %#x, none of which this side has", cmd.features))
		}
	case opKeepalive:
	}
}

// sent applies one send completion. The caller holds c.mu.
func (c *Conn) sent(wc *verbs.WorkCompletion) {
	if wc.WRID&ctrlFlag != 0 {
		c.ctrlInFlight--
		c.freeData(c.ctrlData[int(wc.WRID&^ctrlFlag)-len(c.recvWRs)])
	} else {
		c.freeData(wc.WRID + 1)
	}
	if wc.Status == verbs.WCSuccess {
		return
	}
	if wc.Status == verbs.WCWRFlushErr {
		c.peerClosed = true
		return
	}
	op := "data"
	if wc.WRID&ctrlFlag != 0 {
		op = "control message"
	}
	c.fail(&CompletionError{Op: op, Status: wc.Status})
}

// freeData frees the data WRITEs before sequence number end: their
// bytes of the staging ring and their send queue slots. The caller holds
// c.mu.
func (c *Conn) freeData(end uint64) {
	for ; c.dataDone < end; c.dataDone++ {
		n := c.dataLens[c.dataDone%uint64(len(c.dataLens))]
		c.txUsed -= n
		c.txTail += n
		if c.txTail == len(c.tx) {
			c.txTail = 0
		}
		c.sqAvail++
	}
}

// repost re-posts n receives, each with the slot after the last one
// posted: receives complete in the order they were posted.
func (c *Conn) repost(n int) {
	if err := rdmaconn.Repost(c.qp, c.recvWRs, &c.recvNext, n); err != nil {
		c.fail(fmt.Errorf("valkeyrdma: post receives: %w", err))
	}
}

// postCtrl sends cmd from the next send slot. The caller holds c.mu
// and checked that a slot is free.
func (c *Conn) postCtrl(cmd command) {
	slot := len(c.recvWRs) + c.ctrlNext
	c.ctrlNext = (c.ctrlNext + 1) % ctrlSlots
	b := c.cmdBuf[slot*cmdSize : (slot+1)*cmdSize]
	cmd.marshal(b)
	c.ctrlSGE[0] = verbs.SGE{Addr: c.cmdMR.IOVA() + uint64(slot*cmdSize), Length: cmdSize, LKey: c.cmdMR.LKey()}
	c.ctrlWR[0] = verbs.SendWR{WRID: ctrlFlag | uint64(slot), Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGList: c.ctrlSGE[:]}
	err := c.qp.PostSend(c.ctrlWR[:])
	c.ctrlWR[0] = verbs.SendWR{}
	if err != nil {
		c.fail(fmt.Errorf("valkeyrdma: post a control message: %w", err))
		return
	}
	c.ctrlData[slot-len(c.recvWRs)] = c.dataPosted
	c.dataCovered = c.dataPosted
	c.ctrlInFlight++
}

// postData copies the next chunk of p into the staging ring and writes
// it to the peer's buffer, WITH IMMEDIATE its length. It returns the
// chunk's length. The caller holds c.mu and checked canWrite.
func (c *Conn) postData(p []byte) int {
	if c.txUsed == 0 {
		c.txHead, c.txTail = 0, 0
	}
	if c.txHead == len(c.tx) {
		c.txHead = 0
	}
	room := len(c.tx) - c.txHead // contiguous free bytes from txHead
	if c.txTail > c.txHead || c.txTail == c.txHead && c.txUsed > 0 {
		room = c.txTail - c.txHead
	}
	n := min(len(p), room, maxChunk, c.remoteLen-c.remoteOff)
	copy(c.tx[c.txHead:c.txHead+n], p[:n])
	// Ask for a completion once the send queue or the staging ring is
	// half full (a Write waiting for room then has one coming), and
	// every signalEvery WRITEs.
	var flags verbs.SendFlags
	seq := c.dataPosted
	if c.sqAvail <= len(c.dataLens)/2 || c.txUsed+n > len(c.tx)/2 || seq+1-c.dataCovered >= signalEvery {
		flags = verbs.SendSignaled
	}
	c.dataSGE[0] = verbs.SGE{Addr: c.txMR.IOVA() + uint64(c.txHead), Length: uint32(n), LKey: c.txMR.LKey()}
	c.dataWR[0] = verbs.SendWR{WRID: seq, Opcode: verbs.WRRDMAWriteWithImm, Flags: flags, Imm: uint32(n),
		SGList: c.dataSGE[:], RemoteAddr: c.remoteAddr + uint64(c.remoteOff), RKey: c.remoteKey}
	err := c.qp.PostSend(c.dataWR[:])
	c.dataWR[0] = verbs.SendWR{}
	if err != nil {
		c.fail(fmt.Errorf("valkeyrdma: post a write: %w", err))
		return 0
	}
	c.dataLens[seq%uint64(len(c.dataLens))] = n
	c.dataPosted++
	if flags != 0 {
		c.dataCovered = c.dataPosted
	}
	c.txHead += n
	c.txUsed += n
	c.sqAvail--
	c.remoteOff += n
	return n
}

// Read reads received data into p: what has arrived, up to len(p),
// waiting for some if there is none. Once the peer has disconnected, Read
// returns what came before and then io.EOF.
func (c *Conn) Read(p []byte) (int, error) {
	c.readMu.Lock()
	defer c.readMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if c.closing {
			return 0, c.opError("read", net.ErrClosed)
		}
		if c.rw.Expired() {
			return 0, c.opError("read", os.ErrDeadlineExceeded)
		}
		if len(p) == 0 {
			return 0, nil
		}
		if c.rxHead == c.rxTail {
			c.progress()
		}
		if c.rxHead < c.rxTail {
			n := copy(p, c.rx[c.rxHead:c.rxTail])
			c.rxHead += n
			if c.rxHead == len(c.rx) {
				// All of it read: publish it again (the peer waits
				// for this before it writes on).
				c.rxHead, c.rxTail = 0, 0
				c.rxPending = true
				c.progress()
			}
			return n, nil
		}
		if c.err != nil {
			return 0, c.opError("read", c.err)
		}
		if c.peerClosed {
			return 0, io.EOF
		}
		if err := c.wait(&c.rw, condRead); err != nil {
			return 0, c.opError("read", err)
		}
	}
}

// Write writes p to the peer, waiting for room as needed: in the peer's
// RX buffer (which the peer publishes again once its application has
// read all of it), in the send queue and in the staging buffer. p may be
// reused as soon as Write returns; the data may still be on its way.
//
// Unlike a TCP socket's, a Write does not return before all of p has
// gone into the peer's RX buffer: a Write that fills it waits until the
// peer's application has read the whole buffer. A program that writes
// more than the peer's buffer holds before it reads (Valkey's server
// reads all the time, so clients need not care) must read in another
// goroutine.
func (c *Conn) Write(p []byte) (int, error) {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for {
		if err := c.writeErr(); err != nil {
			return n, err
		}
		if n == len(p) {
			return n, nil
		}
		if !c.canWrite() {
			c.progress()
		}
		if c.canWrite() {
			n += c.postData(p[n:])
			continue
		}
		if err := c.wait(&c.ww, condWrite); err != nil {
			return n, c.opError("write", err)
		}
	}
}

// writeErr is why Write cannot go on, or nil.
func (c *Conn) writeErr() error {
	switch {
	case c.closing:
		return c.opError("write", net.ErrClosed)
	case c.ww.Expired():
		return c.opError("write", os.ErrDeadlineExceeded)
	case c.err != nil:
		return c.opError("write", c.err)
	case c.peerClosed:
		return c.opError("write", syscall.ECONNRESET)
	}
	return nil
}

// PeerFeatures returns the feature bits the server answered a
// GetServerFeature with (a dialed connection asks once it is
// established), and whether the answer has arrived. Valkey 8.1 has none.
func (c *Conn) PeerFeatures() (features uint64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.progress()
	return c.peerFeatures, c.peerFeaturesOK
}

// Close closes the connection: blocked Read and Write calls return
// net.ErrClosed; what was written is given a little time (closeTimeout)
// to reach the peer; then the connection is disconnected (the peer sees
// the CM's DISCONNECTED, which is how Valkey's transport closes) and its
// resources are freed.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return c.opError("close", net.ErrClosed)
	}
	c.closing = true
	c.wakeAll()
	c.mu.Unlock()

	c.readMu.Lock()
	defer c.readMu.Unlock()
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	c.mu.Lock()
	if c.kaTimer != nil {
		c.kaTimer.Stop()
	}
	c.cw.SetDeadline(time.Now().Add(closeTimeout))
	for !c.allSent() && c.err == nil && !c.peerClosed && !c.cw.Expired() {
		c.progress()
		if c.allSent() {
			break
		}
		if c.dataCovered < c.dataPosted && c.ctrlInFlight < ctrlSlots {
			// The last WRITEs went unsignaled: a Keepalive's
			// completion tells when they are done.
			c.postCtrl(command{op: opKeepalive})
		}
		c.wait(&c.cw, condSent)
	}
	c.mu.Unlock()
	c.id.Disconnect() // best effort: the peer may be gone
	c.bgCancel()
	<-c.pollDone
	<-c.cmDone
	return c.free()
}

// free destroys what newConn made, QP first, and the CM ID and channel.
func (c *Conn) free() error {
	c.mu.Lock()
	c.freed = true
	c.mu.Unlock()
	return rdmaconn.Free(c.bgCancel, c.ch, c.id, c.pd, c.cch, c.cq, c.qp, c.cmdMR, c.rxMR, c.txMR)
}

// LocalAddr returns the local address (an *Addr).
func (c *Conn) LocalAddr() net.Addr { return c.laddr }

// RemoteAddr returns the peer's address (an *Addr).
func (c *Conn) RemoteAddr() net.Addr { return c.raddr }

// SetDeadline sets the read and write deadlines.
func (c *Conn) SetDeadline(t time.Time) error { return rdmaconn.SetDeadline(c, t) }

// SetReadDeadline sets the deadline of Read calls, a blocked one too;
// they then fail with an error wrapping os.ErrDeadlineExceeded. The zero
// time means none.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.setDeadline(&c.rw, t) }

// SetWriteDeadline sets the deadline of Write calls, a blocked one too.
// A Write that times out may have sent part of its data.
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
	return rdmaconn.OpError(op, "valkey-rdma", c.laddr, c.raddr, err)
}

// CompletionError is the error of a connection one of whose work
// requests completed with an error status: the peer went away, stopped
// answering, or the QP failed. Op says what the work request carried.
type CompletionError struct {
	Op     string // "data", "control message", "receive"
	Status verbs.WCStatus
}

func (e *CompletionError) Error() string {
	return fmt.Sprintf("valkeyrdma: %s completed with status %v", e.Op, e.Status)
}

// Unwrap gives the errno a socket would report: ECONNRESET when the
// peer's side refused the request, ETIMEDOUT when it stopped answering,
// EIO otherwise.
func (e *CompletionError) Unwrap() error {
	return rdmaconn.StatusErrno(e.Status)
}

var _ net.Conn = (*Conn)(nil)
