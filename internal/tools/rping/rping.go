// Package rping is goverbs rping: rdma-core's rping (librdmacm/examples/rping.c, rdma-core
// 44), an RC ping over the RDMA connection manager. Either end may be the C
// tool: the messages, the RDMA operations, the states and the output
// follow the C program.
//
// One ping: the client SENDs the address, rkey and size of its "start"
// buffer (struct rping_rdma_info: u64, u32, u32, big-endian); the server
// RDMA READs the ping data from it and SENDs a go-ahead; the client SENDs
// the same for its "rdma" sink buffer; the server RDMA WRITEs the data
// back there and SENDs a go-ahead. The client disconnects after -C pings.
//
// The C tool runs a connection manager thread and a CQ thread that move a
// state variable and post a semaphore the main thread waits on; so do the
// goroutines here, so that every check and message happens where the C
// tool makes it.
package rping

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"time"

	"github.com/goverbs/goverbs/cm"
	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/tools/cmcommon"
	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/verbs"
)

// The C tool's states (enum test_state); their numbers appear in its
// messages.
const (
	rpingIdle = 1 + iota
	rpingConnectRequest
	rpingAddrResolved
	rpingRouteResolved
	rpingConnected
	rpingReadAdv
	rpingReadComplete
	rpingWriteAdv
	rpingWriteComplete
	rpingDisconnected
	rpingError
)

const (
	rpingBufSize = 64 * 1024
	rpingSQDepth = 16
	rpingInfoLen = 16 // struct rping_rdma_info
	// rpingMinBufSize is the C tool's RPING_MIN_BUFSIZE as Debian builds
	// it: sizeof(stringify(INT_MAX)) + sizeof(RPING_MSG_FMT), and INT_MAX
	// is no macro there, so "INT_MAX" (8) + "rdma-ping-%d: " (15).
	rpingMinBufSize = 23
	rpingPort       = 7174
	rpingMsgFmt     = "rdma-ping-%d: "
)

const rpingUsage = `%[1]s -s [-vVd] [-S size] [-C count] [-a addr] [-p port]
%[1]s -c [-vVd] [-S size] [-C count] [-I addr] -a addr [-p port]
	-c		client side
	-I		Source address to bind to for client.
	-s		server side.  To bind to any address with IPv6 use -a ::0
	-v		display ping data to stdout
	-V		validate ping data
	-d		debug printfs
	-S size 	ping data size
	-C count	ping count times
	-a addr		address
	-p port		port
	-P		persistent server mode allowing multiple connections
	-q		use self-created, self-modified QP
`

// rpingOptions are the settings of one run, with the C tool's defaults.
type rpingOptions struct {
	server     int // -1 unset, 0 client, 1 server
	addr       netip.Addr
	addrSet    bool
	src        netip.Addr // -I, client
	port       uint16
	count      int // 0: forever
	size       int
	verbose    bool
	validate   bool
	debug      bool
	persistent bool
	selfQP     bool // -q: the QP is always created through the CM here; same wire
}

// parseRpingArgs parses the command line as rping's getopt loop does. A
// status >= 0 means stop with it.
func parseRpingArgs(args []string, out, errw *cmcommon.Out) (*rpingOptions, int) {
	o := &rpingOptions{server: -1, size: 64, port: rpingPort, addr: netip.IPv4Unspecified()}
	ret := 0
	// The C tool's DEBUG_LOG cmLines of option parsing, once -d is seen.
	debugf := func(format string, args ...any) {
		if o.debug {
			out.Printf(format, args...)
		}
	}
	opts, _ := cmcommon.Getopt(args, "a:I:Pp:C:S:t:scvVdq")
	for _, op := range opts {
		switch op.Opt {
		case 'a':
			a, err := cmcommon.Lookup(op.Arg)
			if err != nil {
				out.Printf("getaddrinfo failed (%s) - invalid hostname or IP address\n", err)
				ret = 255
				break
			}
			o.addr, o.addrSet = a, true
		case 'I':
			a, err := cmcommon.Lookup(op.Arg)
			if err != nil {
				out.Printf("getaddrinfo failed (%s) - invalid hostname or IP address\n", err)
				ret = 255
				break
			}
			o.src = a
		case 'P':
			o.persistent = true
		case 'p':
			p, err := cmcommon.ParsePort(op.Arg)
			if err != nil {
				errw.Printf("Invalid port %s\n", op.Arg)
				ret = 22
				break
			}
			o.port = p
			debugf("port %d\n", p)
		case 's':
			o.server = 1
			debugf("server\n")
		case 'c':
			o.server = 0
			debugf("client\n")
		case 'S':
			n, err := cmcommon.Atoi(op.Arg)
			if err != nil || n < rpingMinBufSize || n > rpingBufSize-1 {
				errw.Printf("Invalid size %s (valid range is %d to %d)\n", op.Arg, rpingMinBufSize, rpingBufSize)
				ret = 22
				break
			}
			o.size = n
			debugf("size %d\n", n)
		case 'C':
			n, err := cmcommon.Atoi(op.Arg)
			if err != nil || n < 0 {
				errw.Printf("Invalid count %s\n", op.Arg)
				ret = 22
				break
			}
			o.count = n
			debugf("count %d\n", n)
		case 'v':
			o.verbose = true
			debugf("verbose\n")
		case 'V':
			o.validate = true
			debugf("validate data\n")
		case 'd':
			o.debug = true
		case 'q':
			o.selfQP = true
		default: // '?', and -t, which the C tool accepts in getopt but not in its switch
			out.Printf(rpingUsage, "goverbs rping")
			return nil, 22
		}
	}
	if ret != 0 {
		return nil, ret
	}
	if o.server == -1 {
		out.Printf(rpingUsage, "goverbs rping")
		return nil, 22
	}
	if o.server == 0 && !o.addrSet {
		errw.Printf("goverbs rping: the client needs the server's address (-a addr)\n")
		return nil, 22
	}
	if o.src.IsValid() && o.addr.Is4() != o.src.Is4() {
		errw.Printf("goverbs rping: -I %v and -a %v are of different address families\n", o.src, o.addr)
		return nil, 22
	}
	return o, -1
}

// Summary is goverbs rping's line in goverbs' command list.
const Summary = "RDMA CM ping with RDMA READ/WRITE, like rping"

// Main is goverbs rping: args are its arguments after the subcommand; it
// returns the exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	out, errw := &cmcommon.Out{W: stdout}, &cmcommon.Out{W: stderr}
	o, status := parseRpingArgs(args, out, errw)
	if status >= 0 {
		return status
	}
	r := &rping{o: o, out: out, errw: errw}
	ch, status := cmcommon.NewChannel(errw)
	if ch == nil {
		return status
	}
	defer ch.Close()
	id, err := ch.CreateID(cm.TCP)
	if err != nil {
		errw.Printf("rdma_create_id: %s\n", cmcommon.Strerror(err))
		return 255
	}
	r.debugf("created cm_id %p\n", id)
	var ret int
	switch {
	case o.server == 0:
		ret = r.newConn(id).runClient()
	case o.persistent:
		ret = r.runPersistentServer(id)
	default:
		ret = r.runServer(id)
	}
	r.debugf("destroy cm_id %p\n", id)
	id.Close()
	return cmcommon.Exit(ret)
}

// rping is one run.
type rping struct {
	o         *rpingOptions
	out, errw *cmcommon.Out
}

func (r *rping) debugf(format string, args ...any) {
	if r.o.debug {
		r.out.Printf(format, args...)
	}
}

// rpingConn is one connection: the C tool's control block (struct
// rping_cb) of a client, or of a server's child.
type rpingConn struct {
	*rping
	server bool
	id     *cm.ID // the connection's ID (cm_id of a client, child_cm_id of a server)

	mu    sync.Mutex
	state int
	sem   chan struct{} // a counting semaphore, the C tool's sem_t

	pd      *verbs.PD
	cch     *verbs.CompChannel
	cq      *cq.CQ
	qp      *qp.QP
	recvMR  *mr.MR // struct rping_rdma_info recv_buf
	sendMR  *mr.MR // struct rping_rdma_info send_buf
	rdmaMR  *mr.MR // the RDMA sink (client), source and sink (server)
	startMR *mr.MR // the RDMA READ source (client)

	remoteRKey uint32
	remoteAddr uint64
	remoteLen  uint32

	cqDone, cmDone chan struct{}
	stopCQ, stopCM context.CancelFunc
	disconnected   chan struct{} // closed by the CM goroutine on DISCONNECTED
}

func (r *rping) newConn(id *cm.ID) *rpingConn {
	return &rpingConn{rping: r, server: r.o.server == 1, id: id, state: rpingIdle,
		sem: make(chan struct{}, 1024), disconnected: make(chan struct{})}
}

func (c *rpingConn) getState() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

func (c *rpingConn) setState(s int) {
	c.mu.Lock()
	c.state = s
	c.mu.Unlock()
}

func (c *rpingConn) post() {
	select {
	case c.sem <- struct{}{}:
	default: // cannot happen: every post is waited for
	}
}

// waitFor waits for the state want and, like rping, reports any other
// state it ends in by name.
func (c *rpingConn) waitFor(want int, name string) bool {
	if s := c.wait(); s != want {
		c.errw.Printf("wait for %s state %d\n", name, s)
		return false
	}
	return true
}

// wait is the C tool's sem_wait: it returns once the CQ goroutine (a
// completion, or a failed one), the CM goroutine (DISCONNECTED, a failure
// event) or the failure of either goroutine (it cannot post any more)
// posts. Like the C tool it has no timeout: a peer that is alive but never
// answers, as when siw leaves a message unread in its socket, is waited
// for until it goes.
func (c *rpingConn) wait() int {
	<-c.sem
	return c.getState()
}

func (c *rpingConn) side() string {
	if c.server {
		return "child"
	}
	return "parent"
}

// cmEvent handles a connection manager event after the connection is up,
// as rping_cma_event_handler does.
func (c *rpingConn) cmEvent(ev cm.Event) {
	c.debugf("cma_event type %s cma_id %p (%s)\n", ev.Type, c.id, c.side())
	switch ev.Type {
	case cm.EventEstablished:
		c.debugf("ESTABLISHED\n")
		if !c.server {
			c.setState(rpingConnected)
		}
		c.post()
	case cm.EventAddrError, cm.EventRouteError, cm.EventConnectError, cm.EventUnreachable, cm.EventRejected:
		c.errw.Printf("cma event %s, error %d\n", ev.Type, ev.Status)
		c.setState(rpingError) // the C tool exits here
		c.post()
	case cm.EventDisconnected:
		who := "client"
		if c.server {
			who = "server"
		}
		c.errw.Printf("%s DISCONNECT EVENT...\n", who)
		c.setState(rpingDisconnected)
		select {
		case <-c.disconnected:
		default:
			close(c.disconnected)
		}
		c.post()
	case cm.EventDeviceRemoval:
		c.errw.Printf("cma detected device removal!!!!\n")
		c.setState(rpingError)
		c.post()
	default:
		c.errw.Printf("unhandled event: %s, ignoring\n", ev.Type)
	}
}

// startCM runs the connection's event handler (the C tool's cm_thread) from
// establishment on. If the events stop for another reason than stop (the
// channel's reader failed), nothing could wake the main goroutine again:
// the failure is reported as the C tool reports rdma_get_cm_event's (it
// then exits) and the main goroutine is woken in the error state.
func (c *rpingConn) startCM() {
	ctx, cancel := context.WithCancel(context.Background())
	c.stopCM, c.cmDone = cancel, make(chan struct{})
	go func() {
		defer close(c.cmDone)
		for {
			ev, err := c.id.Event(ctx)
			if err != nil {
				if ctx.Err() == nil {
					c.errw.Printf("rdma_get_cm_event: %s\n", cmcommon.Strerror(err))
					c.setState(rpingError)
					c.post()
				}
				return
			}
			c.cmEvent(ev)
		}
	}()
}

// eventFailed reports a failure the connection manager signalled in an
// event the way the C tool's event handler does, or a failed command the
// way perror does.
func (c *rpingConn) eventFailed(err error, call string) {
	if ee, ok := cmcommon.EventError(err); ok {
		c.errw.Printf("cma event %s, error %d\n", ee.Event, ee.Status)
		return
	}
	c.errw.Printf("%s: %s\n", call, cmcommon.Strerror(err))
}

// setupQP creates the PD, the completion channel, the CQ and the QP, as
// rping_setup_qp does.
func (c *rpingConn) setupQP() error {
	dev := c.id.Context()
	var err error
	if c.pd, err = dev.AllocPD(); err != nil {
		c.errw.Printf("ibv_alloc_pd failed\n")
		return err
	}
	c.debugf("created pd %p\n", c.pd)
	if c.cch, err = dev.NewCompChannel(); err != nil {
		c.errw.Printf("ibv_create_comp_channel failed\n")
		return err
	}
	c.debugf("created channel %p\n", c.cch)
	if c.cq, err = cq.New(dev, cq.Options{CQE: rpingSQDepth * 2, Channel: c.cch}); err != nil {
		c.errw.Printf("ibv_create_cq failed\n")
		return err
	}
	c.debugf("created cq %p\n", c.cq)
	if err = c.cq.ReqNotify(false); err != nil {
		c.errw.Printf("ibv_create_cq failed\n")
		return err
	}
	c.qp, err = c.id.CreateQP(c.pd, qp.Options{SendCQ: c.cq, RecvCQ: c.cq,
		Caps: qp.Caps{MaxSendWR: rpingSQDepth, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		c.errw.Printf("rdma_create_qp: %s\n", cmcommon.Strerror(err))
		return err
	}
	c.debugf("created qp %p\n", c.qp)
	return nil
}

// setupBuffers registers the buffers, as rping_setup_buffers does.
func (c *rpingConn) setupBuffers() error {
	c.debugf("rping_setup_buffers called on cb %p\n", c)
	var err error
	if c.recvMR, err = mr.New(c.pd, rpingInfoLen, mr.LocalWrite); err != nil {
		c.errw.Printf("recv_buf reg_mr failed\n")
		return err
	}
	if c.sendMR, err = mr.New(c.pd, rpingInfoLen, 0); err != nil {
		c.errw.Printf("send_buf reg_mr failed\n")
		return err
	}
	remote := mr.LocalWrite | mr.RemoteRead | mr.RemoteWrite
	if c.rdmaMR, err = mr.New(c.pd, c.o.size, remote); err != nil {
		c.errw.Printf("rdma_buf reg_mr failed\n")
		return err
	}
	if !c.server {
		if c.startMR, err = mr.New(c.pd, c.o.size, remote); err != nil {
			c.errw.Printf("start_buf reg_mr failed\n")
			return err
		}
	}
	c.debugf("allocated & registered buffers...\n")
	return nil
}

func (c *rpingConn) freeBuffers() {
	c.debugf("rping_free_buffers called on cb %p\n", c)
	for _, m := range []*mr.MR{c.recvMR, c.sendMR, c.rdmaMR, c.startMR} {
		if m != nil {
			m.Close()
		}
	}
}

// freeQP destroys the QP (through its ID, which owns it), the CQ, the
// channel and the PD.
func (c *rpingConn) freeQP() {
	if c.qp != nil {
		c.qp.Close()
	}
	if c.cq != nil {
		c.cq.Close()
	}
	if c.cch != nil {
		c.cch.Close()
	}
	if c.pd != nil {
		c.pd.Close()
	}
}

func (c *rpingConn) postRecv() error {
	return c.qp.PostRecv([]verbs.RecvWR{{SGList: []verbs.SGE{{Addr: c.recvMR.IOVA(), Length: rpingInfoLen, LKey: c.recvMR.LKey()}}}})
}

// postSend sends send_buf (the SEND the C tool keeps in sq_wr).
func (c *rpingConn) postSend() error {
	return c.qp.PostSend([]verbs.SendWR{{Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
		SGList: []verbs.SGE{{Addr: c.sendMR.IOVA(), Length: rpingInfoLen, LKey: c.sendMR.LKey()}}}})
}

// postRDMA posts the RDMA READ or WRITE of length bytes of rdma_buf (the
// C tool's rdma_sq_wr).
func (c *rpingConn) postRDMA(op verbs.WROpcode, length uint32) error {
	c.mu.Lock()
	addr, rkey := c.remoteAddr, c.remoteRKey
	c.mu.Unlock()
	return c.qp.PostSend([]verbs.SendWR{{Opcode: op, Flags: verbs.SendSignaled,
		SGList:     []verbs.SGE{{Addr: c.rdmaMR.IOVA(), Length: length, LKey: c.rdmaMR.LKey()}},
		RemoteAddr: addr, RKey: rkey}})
}

// remoteLength returns the length the client advertised last.
func (c *rpingConn) remoteLength() uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.remoteLen
}

// formatSend fills send_buf with the address, rkey and size of buf, as
// rping_format_send does.
func (c *rpingConn) formatSend(buf *mr.MR) {
	info := c.sendMR.Bytes()
	binary.BigEndian.PutUint64(info[0:], buf.IOVA())
	binary.BigEndian.PutUint32(info[8:], buf.RKey())
	binary.BigEndian.PutUint32(info[12:], uint32(c.o.size))
	c.debugf("RDMA addr %x rkey %x len %d\n", buf.IOVA(), buf.RKey(), c.o.size)
}

// startCQ runs the CQ handler (the C tool's cq_thread): it sleeps on the
// completion channel and handles completions until one fails or a flushed
// one shows the QP is gone. If the channel fails, no completion can wake
// the main goroutine again; the C tool's main thread then waits on, ours
// is woken in the error state.
func (c *rpingConn) startCQ() {
	ctx, cancel := context.WithCancel(context.Background())
	c.stopCQ, c.cqDone = cancel, make(chan struct{})
	c.debugf("cq_thread started.\n")
	go func() {
		defer close(c.cqDone)
		for {
			if ret := c.cqEvent(); ret != 0 {
				return
			}
			if err := c.cq.Wait(ctx); err != nil {
				if ctx.Err() == nil {
					c.errw.Printf("Failed to get cq event!\n")
					c.setState(rpingError)
					c.post()
				}
				return
			}
		}
	}()
}

// cqEvent polls the CQ dry, as rping_cq_event_handler does; non-zero
// stops the handler.
func (c *rpingConn) cqEvent() int {
	var wcs [1]verbs.WorkCompletion
	flushed := 0
	for {
		n, err := c.cq.Poll(wcs[:])
		if err != nil {
			c.errw.Printf("poll error %d\n", -1)
			c.setState(rpingError)
			c.post()
			return -1
		}
		if n == 0 {
			return flushed
		}
		wc := &wcs[0]
		if wc.Status != verbs.WCSuccess {
			if wc.Status == verbs.WCWRFlushErr {
				flushed = 1
				continue
			}
			c.errw.Printf("cq completion failed status %d\n", wc.Status)
			c.setState(rpingError)
			c.post()
			return -1
		}
		switch wc.Opcode {
		case verbs.WCSend:
			c.debugf("send completion\n")
		case verbs.WCRDMAWrite:
			c.debugf("rdma write completion\n")
			c.setState(rpingWriteComplete)
			c.post()
		case verbs.WCRDMARead:
			c.debugf("rdma read completion\n")
			c.setState(rpingReadComplete)
			c.post()
		case verbs.WCRecv:
			c.debugf("recv completion\n")
			var ret int
			if c.server {
				ret = c.serverRecv(wc)
			} else {
				ret = c.clientRecv(wc)
			}
			if ret != 0 {
				c.errw.Printf("recv wc error: %d\n", ret)
				c.setState(rpingError)
				c.post()
				return ret
			}
			if err := c.postRecv(); err != nil {
				c.errw.Printf("post recv error: %d\n", -1)
				c.setState(rpingError)
				c.post()
				return -1
			}
			c.post()
		default:
			c.debugf("unknown!!!!! completion\n")
			c.setState(rpingError)
			c.post()
			return -1
		}
	}
}

func (c *rpingConn) serverRecv(wc *verbs.WorkCompletion) int {
	if wc.ByteLen != rpingInfoLen {
		c.errw.Printf("Received bogus data, size %d\n", wc.ByteLen)
		return -1
	}
	info := c.recvMR.Bytes()
	addr, rkey, n := binary.BigEndian.Uint64(info[0:]), binary.BigEndian.Uint32(info[8:]), binary.BigEndian.Uint32(info[12:])
	c.debugf("Received rkey %x addr %x len %d from peer\n", rkey, addr, n)
	c.mu.Lock()
	c.remoteAddr, c.remoteRKey, c.remoteLen = addr, rkey, n
	if c.state <= rpingConnected || c.state == rpingWriteComplete {
		c.state = rpingReadAdv
	} else {
		c.state = rpingWriteAdv
	}
	c.mu.Unlock()
	return 0
}

func (c *rpingConn) clientRecv(wc *verbs.WorkCompletion) int {
	if wc.ByteLen != rpingInfoLen {
		c.errw.Printf("Received bogus data, size %d\n", wc.ByteLen)
		return -1
	}
	c.mu.Lock()
	if c.state == rpingReadAdv {
		c.state = rpingWriteAdv
	} else {
		c.state = rpingWriteComplete
	}
	c.mu.Unlock()
	return 0
}

// cmCString is buf up to its first NUL, as %s prints it.
func cmCString(buf []byte) []byte {
	if i := bytes.IndexByte(buf, 0); i >= 0 {
		return buf[:i]
	}
	return buf
}

// testServer is rping_test_server.
func (c *rpingConn) testServer() int {
	ret := 0
	for {
		// Wait for the client's start STAG/TO/Len.
		if !c.waitFor(rpingReadAdv, "RDMA_READ_ADV") {
			ret = -1
			break
		}
		c.debugf("server received sink adv\n")
		if err := c.postRDMA(verbs.WRRDMARead, c.remoteLength()); err != nil {
			c.errw.Printf("post send error %d\n", -1)
			ret = -1
			break
		}
		c.debugf("server posted rdma read req \n")
		if !c.waitFor(rpingReadComplete, "RDMA_READ_COMPLETE") {
			ret = -1
			break
		}
		c.debugf("server received read complete\n")
		if c.o.verbose {
			c.out.Printf("server ping data: %s\n", cmCString(c.rdmaMR.Bytes()))
		}
		// Tell the client to continue.
		if err := c.postSend(); err != nil {
			c.errw.Printf("post send error %d\n", -1)
			ret = -1
			break
		}
		c.debugf("server posted go ahead\n")
		// Wait for the client's RDMA STAG/TO/Len.
		if !c.waitFor(rpingWriteAdv, "RDMA_WRITE_ADV") {
			ret = -1
			break
		}
		c.debugf("server received sink adv\n")
		// RDMA WRITE the echo: the string and its NUL.
		n := len(cmCString(c.rdmaMR.Bytes())) + 1
		n = min(n, c.rdmaMR.Len())
		c.debugf("rdma write from lkey %x laddr %x len %d\n", c.rdmaMR.LKey(), c.rdmaMR.IOVA(), n)
		if err := c.postRDMA(verbs.WRRDMAWrite, uint32(n)); err != nil {
			c.errw.Printf("post send error %d\n", -1)
			ret = -1
			break
		}
		if !c.waitFor(rpingWriteComplete, "RDMA_WRITE_COMPLETE") {
			ret = -1
			break
		}
		c.debugf("server rdma write complete \n")
		// Tell the client to begin again.
		if err := c.postSend(); err != nil {
			c.errw.Printf("post send error %d\n", -1)
			ret = -1
			break
		}
		c.debugf("server posted go ahead\n")
	}
	if c.getState() == rpingDisconnected {
		return 0
	}
	return ret
}

// testClient is rping_test_client.
func (c *rpingConn) testClient() int {
	ret := 0
	start := byte(65)
	buf := c.startMR.Bytes()[:c.o.size]
	for ping := 0; c.o.count == 0 || ping < c.o.count; ping++ {
		c.setState(rpingReadAdv)
		// Put some ASCII text in the buffer.
		cc := copy(buf, fmt.Sprintf(rpingMsgFmt, ping))
		ch := start
		for i := cc; i < len(buf); i++ {
			buf[i] = ch
			ch++
			if ch > 122 {
				ch = 65
			}
		}
		start++
		if start > 122 {
			start = 65
		}
		buf[len(buf)-1] = 0

		c.formatSend(c.startMR)
		if err := c.postSend(); err != nil {
			c.errw.Printf("post send error %d\n", -1)
			ret = -1
			break
		}
		// Wait for the server to ACK.
		if !c.waitFor(rpingWriteAdv, "RDMA_WRITE_ADV") {
			ret = -1
			break
		}
		c.formatSend(c.rdmaMR)
		if err := c.postSend(); err != nil {
			c.errw.Printf("post send error %d\n", -1)
			ret = -1
			break
		}
		// Wait for the server to say the RDMA WRITE is complete.
		if !c.waitFor(rpingWriteComplete, "RDMA_WRITE_COMPLETE") {
			ret = -1
			break
		}
		sink := c.rdmaMR.Bytes()[:c.o.size]
		if c.o.validate && !bytes.Equal(buf, sink) {
			c.errw.Printf("data mismatch!\n")
			ret = -1
			break
		}
		if c.o.verbose {
			c.out.Printf("ping data: %s\n", cmCString(sink))
		}
	}
	if c.getState() == rpingDisconnected {
		return 0
	}
	return ret
}

// stop ends the CQ and CM goroutines. The C tool joins its CQ thread,
// which ends on the flushed receive after the disconnect; a peer that
// already answered the disconnect is waited for briefly, so that its
// DISCONNECTED event is reported as the C tool reports it.
func (c *rpingConn) stop(waitPeer bool) {
	if c.cqDone != nil {
		select {
		case <-c.cqDone:
		case <-time.After(2 * time.Second):
		}
		c.stopCQ()
		<-c.cqDone
	}
	if c.cmDone != nil {
		if waitPeer {
			select {
			case <-c.disconnected:
			case <-time.After(3 * time.Second):
			}
		}
		c.stopCM()
		<-c.cmDone
	}
}

// runClient is rping_run_client.
func (c *rpingConn) runClient() int {
	ctx := context.Background()
	// rping_bind_client: the address and the route, 2 s each.
	var src netip.AddrPort
	if c.o.src.IsValid() {
		src = netip.AddrPortFrom(c.o.src, 0)
	}
	if err := c.id.ResolveAddr(ctx, src, netip.AddrPortFrom(c.o.addr, c.o.port)); err != nil {
		if cmIsEvent(err) {
			c.eventFailed(err, "rdma_resolve_addr")
			c.errw.Printf("waiting for addr/route resolution state %d\n", c.getState())
		} else {
			c.errw.Printf("rdma_resolve_addr: %s\n", cmcommon.Strerror(err))
		}
		return -1
	}
	c.debugf("cma_event type %s cma_id %p (parent)\n", cm.EventAddrResolved, c.id)
	c.setState(rpingAddrResolved)
	if err := c.id.ResolveRoute(ctx); err != nil {
		if cmIsEvent(err) {
			c.eventFailed(err, "rdma_resolve_route")
		} else {
			c.errw.Printf("rdma_resolve_route: %s\n", cmcommon.Strerror(err))
			c.setState(rpingError)
		}
		c.errw.Printf("waiting for addr/route resolution state %d\n", c.getState())
		return -1
	}
	c.debugf("cma_event type %s cma_id %p (parent)\n", cm.EventRouteResolved, c.id)
	c.setState(rpingRouteResolved)
	c.debugf("rdma_resolve_addr - rdma_resolve_route successful\n")

	if !c.prepare() {
		return -1
	}
	defer c.release()
	c.startCQ()

	// rping_connect_client
	_, err := c.id.Connect(ctx, cm.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7})
	if err != nil {
		if cmIsEvent(err) {
			c.eventFailed(err, "rdma_connect")
			c.errw.Printf("wait for CONNECTED state %d\n", c.getState())
		} else {
			c.errw.Printf("rdma_connect: %s\n", cmcommon.Strerror(err))
		}
		c.errw.Printf("connect error %d\n", -1)
		c.stop(false)
		return -1
	}
	c.debugf("cma_event type %s cma_id %p (parent)\n", cm.EventEstablished, c.id)
	c.debugf("ESTABLISHED\n")
	c.setState(rpingConnected)
	c.startCM()
	c.debugf("rdma_connect successful\n")

	ret := c.testClient()
	if ret != 0 {
		c.errw.Printf("rping client failed: %d\n", ret)
	}
	c.id.Disconnect()
	c.stop(true)
	return ret
}

// cmIsEvent reports whether err is a failure the connection manager
// reported in an event.
func cmIsEvent(err error) bool {
	_, ok := cmcommon.EventError(err)
	return ok
}

// bindServer is rping_bind_server.
func (r *rping) bindServer(id *cm.ID) int {
	if err := id.Bind(netip.AddrPortFrom(r.o.addr, r.o.port)); err != nil {
		r.errw.Printf("rdma_bind_addr: %s\n", cmcommon.Strerror(err))
		return -1
	}
	r.debugf("rdma_bind_addr successful\n")
	r.debugf("rdma_listen\n")
	if err := id.Listen(3); err != nil {
		r.errw.Printf("rdma_listen: %s\n", cmcommon.Strerror(err))
		return -1
	}
	return 0
}

// getRequest waits for a connection request on the listening ID, as the
// C tool's main thread waits for the CONNECT_REQUEST state.
func (r *rping) getRequest(id *cm.ID, state int) (*rpingConn, cm.Event, int) {
	child, ev, err := id.GetRequest(context.Background())
	if err != nil {
		if ee, ok := cmcommon.EventError(err); ok {
			r.errw.Printf("cma event %s, error %d\n", ee.Event, ee.Status)
		} else {
			r.errw.Printf("rdma_get_cm_event: %s\n", cmcommon.Strerror(err))
		}
		r.errw.Printf("wait for CONNECT_REQUEST state %d\n", state)
		return nil, ev, -1
	}
	c := r.newConn(child)
	c.debugf("cma_event type %s cma_id %p (child)\n", ev.Type, child)
	c.debugf("child cma %p\n", child)
	c.setState(rpingConnectRequest)
	return c, ev, 0
}

// accept is rping_accept.
func (c *rpingConn) accept(req cm.Event) int {
	c.debugf("accepting client connection request\n")
	if err := c.id.Accept(context.Background(), cmcommon.AcceptParam(c.id, req)); err != nil {
		if cmIsEvent(err) {
			c.eventFailed(err, "rdma_accept")
			c.errw.Printf("wait for CONNECTED state %d\n", rpingError)
		} else {
			c.errw.Printf("rdma_accept: %s\n", cmcommon.Strerror(err))
		}
		return -1
	}
	c.debugf("cma_event type %s cma_id %p (child)\n", cm.EventEstablished, c.id)
	c.debugf("ESTABLISHED\n")
	c.startCM()
	return 0
}

// prepare sets up the QP and the buffers and posts the first receive, as
// both sides of rping do before connecting, printing the C tool's message
// for the step that fails; on failure nothing is left to release.
func (c *rpingConn) prepare() bool {
	if err := c.setupQP(); err != nil {
		c.errw.Printf("setup_qp failed: %d\n", -1)
		c.freeQP()
		return false
	}
	if err := c.setupBuffers(); err != nil {
		c.errw.Printf("rping_setup_buffers failed: %d\n", -1)
		c.freeBuffers()
		c.freeQP()
		return false
	}
	if err := c.postRecv(); err != nil {
		c.errw.Printf("ibv_post_recv failed: %d\n", -1)
		c.release()
		return false
	}
	return true
}

// release frees what prepare set up.
func (c *rpingConn) release() {
	c.freeBuffers()
	c.freeQP()
}

// serve runs a server's connection from its request to the end (the body
// of rping_run_server and of rping_persistent_server_thread). In
// persistent mode the test's result is not reported, as in the C tool.
func (c *rpingConn) serve(req cm.Event, persistent bool) int {
	defer c.id.Close()
	if !c.prepare() {
		return -1
	}
	defer c.release()
	c.startCQ()
	if ret := c.accept(req); ret != 0 {
		c.errw.Printf("connect error %d\n", ret)
		c.stop(false)
		return ret
	}
	ret := c.testServer()
	if ret != 0 && !persistent {
		c.errw.Printf("rping server failed: %d\n", ret)
	}
	c.id.Disconnect()
	c.stop(true)
	return ret
}

// runServer is rping_run_server: one connection.
func (r *rping) runServer(id *cm.ID) int {
	if ret := r.bindServer(id); ret != 0 {
		return ret
	}
	c, req, ret := r.getRequest(id, rpingIdle)
	if ret != 0 {
		return ret
	}
	return c.serve(req, false)
}

// runPersistentServer is rping_run_persistent_server: each connection in
// a goroutine of its own, until the listener fails.
func (r *rping) runPersistentServer(id *cm.ID) int {
	if ret := r.bindServer(id); ret != 0 {
		return ret
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, req, ret := r.getRequest(id, rpingIdle)
		if ret != 0 {
			return ret
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.serve(req, true)
		}()
	}
}
