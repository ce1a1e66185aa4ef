package perf

// The verbs side of goverbs perf: the resources perftest creates, the
// order of its exchange steps (each tool's main), and its measurement
// loops (run_iter_bw, run_iter_lat_write, run_iter_lat), with the same
// buffer layout and addresses so that a C peer finds what it expects.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cm"
	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/tools/cli"
	"github.com/goverbs/goverbs/internal/tools/perf/perftest"
	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/verbs"
)

const (
	perfDefCacheLine = 64   // DEF_CACHE_LINE_SIZE
	perfMinRNRTimer  = 12   // MIN_RNR_TIMER
	perfPollBatch    = 16   // CTX_POLL_BATCH
	perfSpinCheck    = 4096 // spins between looks at the context
)

// perf is one run: its options, resources and measurement arrays, all made
// before the measured loops, which allocate nothing.
type perf struct {
	o      *perfOptions
	stdout io.Writer

	ctx  *verbs.Context
	pd   *verbs.PD
	mr   *mr.MR
	cq   *cq.CQ // the send CQ; the receive CQ too but for SEND tests
	rcq  *cq.CQ // SEND tests' receive CQ
	qp   *qp.QP
	conn *perftest.Conn

	// -R: the channel of both rdma_cm connections (the exchange's and
	// the test QP's, whose ID owns qp), and the test connection's ID.
	ch *cm.Channel
	id *cm.ID

	// ib_send_bw on iWARP, which has no RNR retry: the receiver grants
	// credits by RDMA WRITE and the sender keeps within them
	// (ctx_alloc_credit, send_rcredit).
	credit    *mr.MR // [0:4] the count we write, [4:8] the count the peer wrote
	creditSGE []verbs.SGE
	creditWR  []verbs.SendWR
	creditWC  []verbs.WorkCompletion // the send CQ's, apart from wc, which the receive loop is walking

	linkLayer verbs.LinkLayer
	qpAccess  mr.Access // the test QP's remote access (INIT)
	mtu       verbs.MTU // after the exchange
	outReads  int
	cycle     int // cycle buffer, the larger of the two ends'
	cacheLine int
	withGID   bool
	allocSize uint64 // ctx->size: the largest message of the run
	half      uint64 // where the peer-visible half of the buffer starts
	my, rem   perftest.Dest

	sge       []verbs.SGE
	wr        []verbs.SendWR
	rsge      []verbs.SGE
	rwr       []verbs.RecvWR
	rxBase    uint64 // where the receives land (SEND tests)
	wc        []verbs.WorkCompletion
	posted    []int64
	completed []int64
	deltas    []int64
	epoch     time.Time
}

func (p *perf) now() int64 { return int64(time.Since(p.epoch)) }

// runPerfTest runs one end of a test and returns the exit status.
func runPerfTest(o *perfOptions, stdout, stderr io.Writer) int {
	// As for pingpong: a second P keeps sysmon off the spinning loop's CPU
	// while a doorbell write(2) runs.
	if prev := runtime.GOMAXPROCS(0); prev < 2 {
		runtime.GOMAXPROCS(2)
		defer runtime.GOMAXPROCS(prev)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	p := &perf{o: o, stdout: stdout, epoch: time.Now()}
	err := p.run(ctx)
	if cerr := p.close(); err == nil {
		err = cerr
	}
	if err != nil {
		cli.Errorf(stderr, "perf", "%v", err)
		return 1
	}
	return 0
}

func (p *perf) run(ctx context.Context) error {
	if err := p.setup(ctx); err != nil {
		return err
	}
	return p.measure(ctx)
}

// setup is the tools' mains up to the measurement: the device, the
// exchange up to the peer's address, the QP connected.
func (p *perf) setup(ctx context.Context) error {
	o := p.o
	if err := p.open(); err != nil {
		return err
	}
	if o.rdmaCM {
		if err := p.connectExchangeCM(ctx); err != nil {
			return err
		}
	} else if o.server == "" {
		fmt.Fprint(p.stdout, "\n************************************\n* Waiting for client to connect... *\n************************************\n")
		l, err := perftest.Listen(ctx, o.port)
		if err != nil {
			return err
		}
		p.conn, err = perftest.Accept(ctx, l)
		l.Close()
		if err != nil {
			return err
		}
	} else {
		var err error
		if p.conn, err = perftest.Dial(ctx, o.server, o.port); err != nil {
			return err
		}
	}
	if err := p.conn.Versions(ctx); err != nil {
		return err
	}
	var err error
	p.cycle, p.cacheLine, err = p.conn.SysData(ctx, os.Getpagesize(), cacheLineSize())
	if err != nil {
		return err
	}
	m, err := p.conn.MTU(ctx, int(p.mtu))
	if err != nil {
		return err
	}
	p.mtu = verbs.MTU(m)
	if err := p.resources(); err != nil {
		return err
	}
	if o.rdmaCM {
		err = p.connectCM(ctx)
	} else {
		err = p.createQP()
	}
	if err != nil {
		return err
	}
	p.printInfo()
	if o.test.Verb == Send && !o.test.Lat && p.iWARP() {
		if err := p.allocCredit(); err != nil {
			return err
		}
	}

	// The steps of the tools' mains: handshakes before the connection
	// (ib_write_lat and ib_read_lat do one more), the QP brought up, the
	// addresses printed with a handshake between, and one more handshake
	// (ib_send_* do it before printing).
	pre := 1
	if o.test.Lat && o.test.Verb != Send {
		pre = 2
	}
	for range pre {
		if p.rem, err = p.conn.HandShake(ctx, p.my, p.withGID); err != nil {
			return err
		}
	}
	// With -R rdma_cm connected the QP already.
	if !o.rdmaCM {
		if perftest.IsIPv4Mapped(p.my.GID) != perftest.IsIPv4Mapped(p.rem.GID) {
			return errors.New("found incompatibility issue with GID types: please try to use a different IP version")
		}
		if err := p.connect(); err != nil {
			return err
		}
	}
	if o.test.Verb == Send {
		if _, err = p.conn.HandShake(ctx, p.my, p.withGID); err != nil {
			return err
		}
	}
	p.printDest("local", p.my)
	if p.rem, err = p.conn.HandShake(ctx, p.my, p.withGID); err != nil {
		return err
	}
	p.printDest("remote", p.rem)
	return nil
}

// measure is the rest: the measured loops, the reports, the closing
// steps of the exchange.
func (p *perf) measure(ctx context.Context) error {
	o := p.o
	if o.test.Verb == Send {
		return p.runSend(ctx)
	}
	if _, err := p.conn.HandShake(ctx, p.my, p.withGID); err != nil {
		return err
	}
	if o.test.Lat {
		return p.runLat(ctx)
	}
	return p.runBW(ctx)
}

// open finds the device and learns what the exchange needs from it:
// link layer, GID, MTU, outstanding reads (check_link, set_mtu).
func (p *perf) open() error {
	o := p.o
	devs, err := verbs.Devices()
	if err != nil {
		return fmt.Errorf("unable to find the Infiniband/RoCE device: %w", err)
	}
	dev := cli.PickDevice(devs, o.devName)
	if dev == nil {
		if o.devName == "" {
			return errors.New("no RDMA devices found")
		}
		return fmt.Errorf("IB device %s not found", o.devName)
	}
	o.devName = dev.Name
	if p.ctx, err = verbs.OpenDevice(*dev); err != nil {
		return fmt.Errorf("couldn't get context for the device: %w", err)
	}
	port, err := p.ctx.QueryPort(o.ibPort)
	if err != nil {
		return fmt.Errorf("unable to query port %d attributes: %w", o.ibPort, err)
	}
	if port.State != verbs.PortActive {
		return fmt.Errorf("port number %d state is %s", o.ibPort, port.State)
	}
	p.linkLayer = port.LinkLayer
	gid := o.gidIndex
	if gid < 0 && port.LinkLayer == verbs.LinkLayerEthernet {
		if gid, err = p.bestGIDIndex(port.GIDTblLen); err != nil {
			return err
		}
	}
	p.withGID = gid >= 0
	o.gidIndex = gid
	p.my = perftest.Dest{LID: uint32(port.LID), PSN: rand.Uint32() & 0xffffff, OutReads: 1}
	if p.withGID {
		e, err := p.ctx.QueryGID(o.ibPort, gid)
		if err != nil && !errors.Is(err, unix.ENODATA) {
			return fmt.Errorf("couldn't query GID %d: %w", gid, err)
		}
		p.my.GID = e.GID
	}
	p.mtu = port.ActiveMTU
	if o.mtu != 0 {
		if m := cli.MTUFromBytes(int64(o.mtu)); m <= port.ActiveMTU {
			p.mtu = m
		} else {
			fmt.Fprintf(p.stdout, "Requested mtu is higher than active mtu \nChanging to active mtu - %d\n", port.ActiveMTU)
		}
	}
	if o.test.Verb == Read || o.test.Verb == Atomic {
		attr, err := p.ctx.QueryDevice()
		if err != nil {
			return fmt.Errorf("couldn't query device: %w", err)
		}
		if o.test.Verb == Atomic && attr.AtomicCap == verbs.AtomicNone {
			return fmt.Errorf("device %s does not support atomic operations (atomic_cap %s)", o.devName, attr.AtomicCap)
		}
		p.outReads = attr.MaxQPRDAtomic
		if o.outReads > 0 && o.outReads < p.outReads {
			p.outReads = o.outReads
		}
		if p.outReads < 1 {
			return errors.New("the device allows no outstanding RDMA reads or atomics")
		}
		p.my.OutReads = uint32(p.outReads)
	}
	return nil
}

// bestGIDIndex is get_best_gid_index: prefer IPv4-mapped GIDs, then
// RoCE v2 over v1.
func (p *perf) bestGIDIndex(n int) (int, error) {
	type ent struct {
		gid  [16]byte
		typ  verbs.GIDType
		have bool
	}
	get := func(i int) (ent, error) {
		e, err := p.ctx.QueryGID(p.o.ibPort, i)
		if errors.Is(err, unix.ENODATA) {
			return ent{}, nil // an unused entry: zero, of no type
		}
		if err != nil {
			return ent{}, fmt.Errorf("couldn't query GID %d: %w", i, err)
		}
		return ent{e.GID, e.Type, true}, nil
	}
	rate := func(t verbs.GIDType) int {
		switch t {
		case verbs.GIDTypeRoCEv1:
			return 1
		case verbs.GIDTypeRoCEv2:
			return 2
		}
		return -1
	}
	best := 0
	for i := 1; i < n; i++ {
		cur, err := get(best)
		if err != nil {
			return 0, err
		}
		riv, err := get(i)
		if err != nil {
			return 0, err
		}
		c4, r4 := perftest.IsIPv4Mapped(cur.gid), perftest.IsIPv4Mapped(riv.gid)
		switch {
		case r4 && !c4:
			best = i
		case cur.have && riv.have && rate(cur.typ) < rate(riv.typ):
			best = i
		}
	}
	return best, nil
}

// resources is ctx_init for one QP: the buffer (two halves: ours to send
// from, the peer's to write to or read from), MR, CQ and QP in INIT.
func (p *perf) resources() error {
	o := p.o
	p.allocSize = o.size
	buf := max(p.allocSize, uint64(p.cycle))
	p.half = buf
	if buf > uint64(p.cacheLine) {
		buf = (buf + uint64(p.cacheLine) - 1) / uint64(p.cacheLine) * uint64(p.cacheLine)
	} else {
		buf = uint64(p.cacheLine)
	}
	size := int(buf * 2)
	var err error
	if p.pd, err = p.ctx.AllocPD(); err != nil {
		return fmt.Errorf("couldn't allocate PD: %w", err)
	}
	access := mr.LocalWrite
	qpAccess := mr.Access(0)
	switch o.test.Verb {
	case Write:
		access |= mr.RemoteWrite
		qpAccess = mr.RemoteWrite
	case Read:
		access |= mr.RemoteRead
		qpAccess = mr.RemoteRead
		if p.iWARP() {
			// iWARP places READ responses as tagged writes into
			// the reader's buffer: the sink needs remote write.
			access |= mr.RemoteWrite
		}
	case Send:
		qpAccess = mr.RemoteWrite | mr.LocalWrite
	case Atomic:
		access |= mr.RemoteAtomic
		qpAccess = mr.RemoteAtomic
	}
	if p.mr, err = mr.New(p.pd, size, access); err != nil {
		return fmt.Errorf("couldn't allocate MR: %w", err)
	}
	mem := p.mr.Bytes()
	if o.test.Verb == Write && o.test.Lat {
		clear(mem) // write_lat polls on zeroed memory
	} else {
		for i := range mem {
			mem[i] = byte(rand.Uint32())
		}
	}
	if p.cq, err = cq.New(p.ctx, cq.Options{CQE: o.txDepth}); err != nil {
		return fmt.Errorf("couldn't create CQ: %w", err)
	}
	p.qpAccess = qpAccess
	if o.test.Verb == Send {
		if p.rcq, err = cq.New(p.ctx, cq.Options{CQE: o.rxDepth}); err != nil {
			return fmt.Errorf("couldn't create CQ: %w", err)
		}
	}
	p.my.RKey = p.mr.RKey()
	p.my.VAddr = p.mr.IOVA() + p.half
	iters := o.iters
	p.posted = make([]int64, iters)
	p.completed = make([]int64, iters)
	p.deltas = make([]int64, iters)
	p.sge = []verbs.SGE{{Addr: p.mr.IOVA(), Length: uint32(o.size), LKey: p.mr.LKey()}}
	p.wr = []verbs.SendWR{{SGList: p.sge}}
	// Receives land in the second half (send_qp_buff_size on).
	p.rxBase = p.mr.IOVA() + uint64(size/2)
	p.rsge = []verbs.SGE{{Addr: p.rxBase, Length: uint32(o.size), LKey: p.mr.LKey()}}
	p.rwr = []verbs.RecvWR{{SGList: p.rsge}}
	p.wc = make([]verbs.WorkCompletion, perfPollBatch)
	return nil
}

// qpOptions are the test QP's: RC, tx_depth sends, rx_depth receives for
// the SEND tests (one otherwise), one SGE.
func (p *perf) qpOptions() qp.Options {
	o := p.o
	caps := qp.Caps{MaxSendWR: o.txDepth, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}
	rcq := p.cq
	if o.test.Verb == Send {
		caps.MaxRecvWR = o.rxDepth
		rcq = p.rcq
	}
	return qp.Options{Type: qp.RC, SendCQ: p.cq, RecvCQ: rcq, Caps: caps}
}

// createQP creates the QP and moves it to INIT (the exchange over TCP;
// ctx_connect takes it on once the peer's address is known).
func (p *perf) createQP() error {
	var err error
	if p.qp, err = qp.New(p.pd, p.qpOptions()); err != nil {
		return fmt.Errorf("couldn't create QP: %w", err)
	}
	if err := p.qp.ToInit(qp.InitAttr{Port: uint8(p.o.ibPort), Access: p.qpAccess}); err != nil {
		return fmt.Errorf("failed to modify QP to INIT: %w", err)
	}
	p.my.QPN = p.qp.QPN()
	return nil
}

// connect is ctx_connect: RTR, and RTS for whoever sends (the latency
// tools' both ends, the bandwidth tools' client).
func (p *perf) connect() error {
	o := p.o
	path := verbs.AHAttr{DLID: uint16(p.rem.LID), SL: uint8(o.sl), Port: uint8(o.ibPort)}
	if p.withGID {
		path.IsGlobal = true
		path.GRH = verbs.GlobalRoute{DGID: verbs.GID(p.rem.GID), SGIDIndex: uint8(o.gidIndex), HopLimit: 0xff}
	}
	err := p.qp.ToRTR(qp.RTRAttr{Path: path, MTU: p.mtu, DestQPN: p.rem.QPN, RQPSN: p.rem.PSN,
		MaxDestRDAtomic: uint8(p.my.OutReads), MinRNRTimer: perfMinRNRTimer})
	if err != nil {
		return fmt.Errorf("failed to modify QP %d to RTR: %w", p.qp.QPN(), err)
	}
	if o.test.Lat || o.server != "" {
		err = p.qp.ToRTS(qp.RTSAttr{SQPSN: p.my.PSN, Timeout: uint8(o.qpTimeout), RetryCnt: 7, RNRRetry: 7,
			MaxRDAtomic: uint8(min(p.rem.OutReads, 255))})
		if err != nil {
			return fmt.Errorf("failed to modify QP to RTS: %w", err)
		}
	}
	return nil
}

// printInfo is ctx_print_test_info, the lines that apply.
func (p *perf) printInfo() {
	o := p.o
	w := p.stdout
	kind := "BW"
	if o.test.Lat {
		kind = "Latency"
	}
	fmt.Fprint(w, perftest.ResultLine)
	verb := [...]string{"Send", "RDMA_Write", "RDMA_Read", "Atomic"}[o.test.Verb]
	if o.test.Verb == Atomic {
		verb += map[bool]string{true: " CMP_AND_SWAP", false: " FETCH_AND_ADD"}[o.cmpSwap]
	}
	fmt.Fprintf(w, "                    %s %s Test\n", verb, kind)
	fmt.Fprintf(w, " Dual-port       : OFF\t\tDevice         : %s\n", o.devName)
	transport := "IB"
	if p.iWARP() {
		transport = "IW"
	}
	fmt.Fprintf(w, " Number of qps   : 1\t\tTransport type : %s\n", transport)
	fmt.Fprintf(w, " Connection type : RC\t\tUsing SRQ      : OFF\n")
	if o.server != "" || o.test.Lat {
		fmt.Fprintf(w, " TX depth        : %d\n", o.txDepth)
	}
	if o.test.Verb == Send && (o.server == "" || o.test.Lat) {
		fmt.Fprintf(w, " RX depth        : %d\n", o.rxDepth)
	}
	if !o.test.Lat {
		fmt.Fprintf(w, " CQ Moderation   : %d\n", o.cqMod)
	}
	fmt.Fprintf(w, " Mtu             : %d[B]\n", p.mtu.Bytes())
	fmt.Fprintf(w, " Link type       : %s\n", map[bool]string{true: "Ethernet", false: "IB"}[p.linkLayer == verbs.LinkLayerEthernet])
	if p.withGID {
		fmt.Fprintf(w, " GID index       : %d\n", o.gidIndex)
	}
	switch {
	case o.test.Verb == Read || o.test.Verb == Atomic:
		// In place of the inline size, which they do not use.
		fmt.Fprintf(w, " Outstand reads  : %d\n", p.outReads)
	case o.server != "" || o.test.Lat:
		fmt.Fprintf(w, " Max inline data : 0[B]\n")
	}
	if o.rdmaCM {
		fmt.Fprintf(w, " rdma_cm QPs\t : ON\n")
		fmt.Fprintf(w, " Data ex. method : rdma_cm")
		if o.server == "" {
			fmt.Fprintf(w, "\n%s Waiting for client rdma_cm QP to connect\n Please run the same command with the IB/RoCE interface IP", perftest.ResultLine)
		}
		fmt.Fprintln(w)
	} else {
		fmt.Fprintf(w, " rdma_cm QPs\t : OFF\n")
		fmt.Fprintf(w, " Data ex. method : Ethernet\n")
	}
	fmt.Fprint(w, perftest.ResultLine)
}

// printDest is ctx_print_pingpong_data.
func (p *perf) printDest(side string, d perftest.Dest) {
	w := p.stdout
	fmt.Fprintf(w, " %s address: LID %s QPN %s PSN %s", side, cAltHex(uint64(d.LID), 4), cAltHex(uint64(d.QPN), 6), cAltHex(uint64(d.PSN), 6))
	// The C tools print by the verb of the exchange's parameters, which
	// with -R are the rdma_cm exchange's own: SEND (create_comm_struct).
	verb := p.o.test.Verb
	if p.o.rdmaCM {
		verb = Send
	}
	if verb == Read {
		fmt.Fprintf(w, " OUT %s", cAltHex(uint64(d.OutReads), 4))
	}
	if verb == Read || verb == Write {
		fmt.Fprintf(w, " RKey %s VAddr %s", cAltHex(uint64(d.RKey), 8), cAltHex(d.VAddr, 16))
	}
	fmt.Fprintln(w)
	if p.withGID {
		parts := make([]string, len(d.GID))
		for i, g := range d.GID {
			parts[i] = fmt.Sprintf("%02d", g)
		}
		fmt.Fprintf(w, " GID: %s\n", strings.Join(parts, ":"))
	}
}

// cAltHex formats like C's "%#0<width>x": 0 is all zeros, anything else
// "0x" and the digits, zero-padded to width characters in all.
func cAltHex(v uint64, width int) string {
	if v == 0 {
		return fmt.Sprintf("%0*d", width, 0)
	}
	s := strconv.FormatUint(v, 16)
	if pad := width - 2 - len(s); pad > 0 {
		s = strings.Repeat("0", pad) + s
	}
	return "0x" + s
}

// sizes are the message sizes of the run: the one asked for, or 2 to 2^23
// with -a.
func (p *perf) sizes() []uint64 {
	if !p.o.all {
		return []uint64{p.o.size}
	}
	var s []uint64
	for i := 1; i < 24; i++ {
		s = append(s, 1<<i)
	}
	return s
}

func (p *perf) opcode() verbs.WROpcode {
	switch p.o.test.Verb {
	case Read:
		return verbs.WRRDMARead
	case Send:
		return verbs.WRSend
	case Atomic:
		if p.o.cmpSwap {
			return verbs.WRAtomicCmpAndSwp
		}
		return verbs.WRAtomicFetchAndAdd
	}
	return verbs.WRRDMAWrite
}

// runBW is the bandwidth tools after the connection: the client measures,
// the server waits; then both exchange reports and close.
func (p *perf) runBW(ctx context.Context) error {
	o := p.o
	w := p.stdout
	fmt.Fprint(w, perftest.ResultLine)
	if o.gbits {
		fmt.Fprint(w, perftest.BWHeaderG)
	} else {
		fmt.Fprint(w, perftest.BWHeader)
	}
	var my perftest.BWReport
	if o.server == "" {
		if _, err := p.conn.HandShake(ctx, p.my, p.withGID); err != nil {
			return err
		}
		rem, err := p.conn.ExchangeBWReports(ctx, my)
		if err != nil {
			return err
		}
		perftest.WriteBW(w, rem, o.gbits)
		if err := p.conn.Finish(ctx, p.my, p.withGID); err != nil {
			return err
		}
		fmt.Fprint(w, perftest.ResultLine)
		return nil
	}
	for _, size := range p.sizes() {
		if err := p.iterBW(ctx, size); err != nil {
			return err
		}
		my = perftest.BW(p.posted, p.completed, size, o.iters, o.cqMod, o.noPeak, o.gbits)
		perftest.WriteBW(w, my, o.gbits)
	}
	fmt.Fprint(w, perftest.ResultLine)
	if _, err := p.conn.HandShake(ctx, p.my, p.withGID); err != nil {
		return err
	}
	if _, err := p.conn.ExchangeBWReports(ctx, my); err != nil {
		return err
	}
	return p.conn.Finish(ctx, p.my, p.withGID)
}

// incr is INC: the address step, at least a cache line.
func (p *perf) incr(size uint64) uint64 {
	cl := uint64(p.cacheLine)
	if size > cl {
		return (size + cl - 1) / cl * cl
	}
	return cl
}

// iterBW is run_iter_bw for one QP and no post list: keep tx_depth
// messages in flight, signal one in cq_mod (and the last), cycle the
// addresses through the cycle buffer for small messages (every atomic's
// 8 bytes). For READ and atomics the loop too bounds only by tx_depth:
// how many of them the device has outstanding is the QP's max_rd_atomic,
// the peer's out_reads. It allocates nothing.
func (p *perf) iterBW(ctx context.Context, size uint64) error {
	o := p.o
	iters := uint64(o.iters)
	cqMod := uint64(o.cqMod)
	wr := &p.wr[0]
	sge := &p.sge[0]
	localBase, remBase := p.mr.IOVA(), p.rem.VAddr
	*wr = verbs.SendWR{Opcode: p.opcode(), SGList: p.sge, RemoteAddr: remBase, RKey: p.rem.RKey}
	switch wr.Opcode {
	case verbs.WRAtomicCmpAndSwp:
		wr.Swap = 0 // ATOMIC_SWAP_VALUE; the compare value stays 0
	case verbs.WRAtomicFetchAndAdd:
		wr.CompareAdd = 1 // ATOMIC_ADD_VALUE
	}
	sge.Addr, sge.Length = localBase, uint32(size)
	if cqMod == 1 {
		wr.Flags = verbs.SendSignaled
	}
	cycles := size <= uint64(p.cycle)/2
	inc := p.incr(size)
	wrap := uint64(p.cycle) / inc
	noPeak := o.noPeak
	var scnt, ccnt uint64
	if noPeak {
		p.posted[0] = p.now()
	}
	spins := 0
	for scnt < iters || ccnt < iters {
		for scnt < iters && scnt-ccnt+1 <= uint64(o.txDepth) {
			if p.credit != nil && uint32(scnt+1)-atomic.LoadUint32(p.creditWord(1)) >= uint32(o.rxDepth) {
				break // wait for the receiver's credit
			}
			if scnt%cqMod == 0 && cqMod > 1 && scnt != iters-1 {
				wr.Flags &^= verbs.SendSignaled
			}
			if !noPeak {
				p.posted[scnt] = p.now()
			}
			if err := p.qp.PostSend(p.wr); err != nil {
				return fmt.Errorf("couldn't post send: scnt=%d: %w", scnt, err)
			}
			if cycles {
				sge.Addr += inc
				wr.RemoteAddr += inc // ignored by SEND
				if (scnt+1)%wrap == 0 {
					sge.Addr, wr.RemoteAddr = localBase, remBase
				}
			}
			scnt++
			if scnt%cqMod == cqMod-1 || scnt == iters-1 {
				wr.Flags |= verbs.SendSignaled
			}
		}
		if ccnt >= iters {
			continue
		}
		n, err := p.cq.Poll(p.wc)
		if err != nil {
			return fmt.Errorf("poll CQ failed: %w", err)
		}
		if n == 0 {
			if spins++; spins%perfSpinCheck == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			continue
		}
		for i := range p.wc[:n] {
			c := &p.wc[i]
			if c.Status != verbs.WCSuccess {
				return fmt.Errorf("completion with error: status %s (%d), scnt=%d, ccnt=%d", c.Status, int(c.Status), scnt, ccnt)
			}
			ccnt += cqMod
			if !noPeak {
				p.completed[min(ccnt, iters)-1] = p.now()
			}
		}
	}
	if noPeak {
		p.completed[0] = p.now()
	}
	return nil
}

// runLat is the latency tools after the connection.
func (p *perf) runLat(ctx context.Context) error {
	o := p.o
	w := p.stdout
	passive := o.test.Verb == Read || o.test.Verb == Atomic
	if passive && o.server == "" {
		// ib_read_lat's and ib_atomic_lat's server has nothing to do
		// but wait for the end.
		return p.conn.Finish(ctx, p.my, p.withGID)
	}
	fmt.Fprint(w, perftest.ResultLine)
	fmt.Fprint(w, perftest.LatHeader)
	rtt := 2
	if passive {
		rtt = 1
	}
	for _, size := range p.sizes() {
		var err error
		if o.test.Verb == Write {
			err = p.iterLatWrite(ctx, size)
		} else {
			err = p.iterLatRead(ctx, size)
		}
		if err != nil {
			return err
		}
		s, err := perftest.Lat(p.posted, rtt, p.deltas)
		if err != nil {
			return err
		}
		perftest.WriteLat(w, size, o.iters, s)
	}
	fmt.Fprint(w, perftest.ResultLine)
	if passive {
		return p.conn.Finish(ctx, p.my, p.withGID)
	}
	// ib_write_lat closes nothing: each end leaves once its last write
	// completed and the peer's last arrived.
	return nil
}

// pollByte reads the byte at mem[off] the way a C volatile read does:
// the peer's RDMA write changes it behind the compiler's back.
func pollByte(mem []byte, off uint64) byte {
	// The buffer is page-aligned and a whole number of cache lines
	// long: the aligned word around the byte is inside it.
	shift := uint64(uintptr(unsafe.Pointer(&mem[off])) & 3)
	w := (*uint32)(unsafe.Pointer(&mem[off-shift]))
	return byte(atomic.LoadUint32(w) >> (shift * 8))
}

// iterLatWrite is run_iter_lat_write: each end writes its count into the
// last byte of the message and waits for the peer's count to arrive in
// its own; the client starts.
func (p *perf) iterLatWrite(ctx context.Context, size uint64) error {
	o := p.o
	iters := uint64(o.iters)
	mem := p.mr.Bytes()
	postOff := size - 1
	pollOff := p.half + size - 1
	wr := &p.wr[0]
	*wr = verbs.SendWR{Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, SGList: p.sge,
		RemoteAddr: p.rem.VAddr, RKey: p.rem.RKey}
	p.sge[0].Addr, p.sge[0].Length = p.mr.IOVA(), uint32(size)
	server := o.server == ""
	wc := p.wc[:1]
	var scnt, ccnt, rcnt uint64
	for scnt < iters || ccnt < iters || rcnt < iters {
		if rcnt < iters && !(scnt < 1 && server) {
			rcnt++
			for spins := 1; pollByte(mem, pollOff) != byte(rcnt); spins++ {
				if spins%perfSpinCheck == 0 && ctx.Err() != nil {
					return ctx.Err()
				}
			}
		}
		if scnt < iters {
			p.posted[scnt] = p.now()
			scnt++
			mem[postOff] = byte(scnt)
			if err := p.qp.PostSend(p.wr); err != nil {
				return fmt.Errorf("couldn't post send: scnt=%d: %w", scnt, err)
			}
		}
		if ccnt < iters {
			if err := p.pollOne(ctx, wc, scnt, ccnt); err != nil {
				return err
			}
			ccnt++
		}
	}
	return nil
}

// iterLatRead is run_iter_lat for READ and atomics: one signaled
// operation at a time.
func (p *perf) iterLatRead(ctx context.Context, size uint64) error {
	iters := uint64(p.o.iters)
	wr := &p.wr[0]
	*wr = verbs.SendWR{Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, SGList: p.sge,
		RemoteAddr: p.rem.VAddr, RKey: p.rem.RKey}
	switch {
	case p.o.test.Verb != Atomic:
	case p.o.cmpSwap:
		wr.Opcode, wr.Swap = verbs.WRAtomicCmpAndSwp, 0 // ATOMIC_SWAP_VALUE
	default:
		wr.Opcode, wr.CompareAdd = verbs.WRAtomicFetchAndAdd, 1 // ATOMIC_ADD_VALUE
	}
	p.sge[0].Addr, p.sge[0].Length = p.mr.IOVA(), uint32(size)
	wc := p.wc[:1]
	for scnt := uint64(0); scnt < iters; scnt++ {
		p.posted[scnt] = p.now()
		if err := p.qp.PostSend(p.wr); err != nil {
			return fmt.Errorf("couldn't post send: scnt=%d: %w", scnt, err)
		}
		if err := p.pollOne(ctx, wc, scnt, scnt); err != nil {
			return err
		}
	}
	return nil
}

// pollOne spins for one successful completion.
func (p *perf) pollOne(ctx context.Context, wc []verbs.WorkCompletion, scnt, ccnt uint64) error {
	for spins := 1; ; spins++ {
		n, err := p.cq.Poll(wc)
		if err != nil {
			return fmt.Errorf("poll CQ failed: %w", err)
		}
		if n > 0 {
			if wc[0].Status != verbs.WCSuccess {
				return fmt.Errorf("completion with error: status %s (%d), scnt=%d, ccnt=%d", wc[0].Status, int(wc[0].Status), scnt, ccnt)
			}
			return nil
		}
		if spins%perfSpinCheck == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// runSend is ib_send_bw and ib_send_lat after the addresses: per size,
// the receivers post their receives, a handshake tells the sender it may
// start, both measure and print their own report (the bandwidth tools'
// sweep has one more handshake after each size); then both close.
func (p *perf) runSend(ctx context.Context) error {
	o := p.o
	w := p.stdout
	fmt.Fprint(w, perftest.ResultLine)
	switch {
	case o.test.Lat:
		fmt.Fprint(w, perftest.LatHeader)
	case o.gbits:
		fmt.Fprint(w, perftest.BWHeaderG)
	default:
		fmt.Fprint(w, perftest.BWHeader)
	}
	server := o.server == ""
	for _, size := range p.sizes() {
		if o.test.Lat || server {
			if err := p.postRecvs(size); err != nil {
				return err
			}
		}
		if _, err := p.conn.HandShake(ctx, p.my, p.withGID); err != nil {
			return err
		}
		if p.credit != nil {
			// ib_send_bw zeroes the credit it was granted before
			// each size; the receiver counts again from 0.
			atomic.StoreUint32(p.creditWord(1), 0)
		}
		var err error
		switch {
		case o.test.Lat:
			err = p.iterLatSend(ctx, size)
		case server:
			err = p.iterBWServer(ctx, size)
		default:
			err = p.iterBW(ctx, size)
		}
		if err != nil {
			return err
		}
		if o.test.Lat {
			s, err := perftest.Lat(p.posted, 2, p.deltas)
			if err != nil {
				return err
			}
			perftest.WriteLat(w, size, o.iters, s)
			continue
		}
		// ib_send_bw's server has no peak (force_dependecies).
		noPeak := o.noPeak || server
		perftest.WriteBW(w, perftest.BW(p.posted, p.completed, size, o.iters, o.cqMod, noPeak, o.gbits), o.gbits)
		if o.all {
			if _, err := p.conn.HandShake(ctx, p.my, p.withGID); err != nil {
				return err
			}
		}
	}
	fmt.Fprint(w, perftest.ResultLine)
	return p.conn.Finish(ctx, p.my, p.withGID)
}

// postRecvs is ctx_set_recv_wqes: rx_depth receives of size bytes, the
// bandwidth test's cycling through the cycle buffer.
func (p *perf) postRecvs(size uint64) error {
	o := p.o
	sge := &p.rsge[0]
	sge.Addr, sge.Length = p.rxBase, uint32(size)
	cycles := !o.test.Lat && size <= uint64(p.cycle)/2
	inc := p.incr(size)
	wrap := uint64(p.cycle) / inc
	for j := 0; j < o.rxDepth; j++ {
		if err := p.qp.PostRecv(p.rwr); err != nil {
			return fmt.Errorf("couldn't post recv: counter=%d: %w", j, err)
		}
		if cycles {
			sge.Addr += inc
			if (uint64(j)+1)%wrap == 0 {
				sge.Addr = p.rxBase
			}
		}
	}
	sge.Addr = p.rxBase
	return nil
}

// iterBWServer is run_iter_bw_server for one QP: count the receives,
// repost while more are due, time from the first arrival to the last.
func (p *perf) iterBWServer(ctx context.Context, size uint64) error {
	o := p.o
	iters := uint64(o.iters)
	sge := &p.rsge[0]
	cycles := size <= uint64(p.cycle)/2
	inc := p.incr(size)
	wrap := uint64(p.cycle) / inc
	posted := uint64(o.rxDepth)
	var rcnt uint64
	first := true
	var scredit int // credit writes not completed yet
	creditCnt := uint64(max(o.rxDepth/3, 1))
	if p.credit != nil {
		p.creditWR[0].RemoteAddr, p.creditWR[0].RKey = p.rem.VAddr, p.rem.RKey
	}
	for spins := 1; rcnt < iters; spins++ {
		n, err := p.rcq.Poll(p.wc)
		if err != nil {
			return fmt.Errorf("poll receive CQ failed: %w", err)
		}
		if n == 0 {
			if spins%perfSpinCheck == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			continue
		}
		if first {
			p.posted[0] = p.now()
			first = false
		}
		for i := range p.wc[:n] {
			c := &p.wc[i]
			if c.Status != verbs.WCSuccess {
				return fmt.Errorf("completion with error at server: status %s (%d), rcnt=%d", c.Status, int(c.Status), rcnt)
			}
			rcnt++
			if posted+1 <= iters {
				if err := p.qp.PostRecv(p.rwr); err != nil {
					return fmt.Errorf("couldn't post recv: rcnt=%d: %w", rcnt, err)
				}
				posted++
				if cycles {
					sge.Addr += inc
					if (posted+1)%wrap == 0 {
						sge.Addr = p.rxBase
					}
				}
			}
			if p.credit != nil && rcnt%uint64(o.rxDepth)%creditCnt == 0 {
				if err := p.grantCredit(ctx, rcnt, &scredit); err != nil {
					return err
				}
			}
		}
	}
	p.completed[0] = p.now()
	for scredit > 0 {
		if err := p.reapCredits(ctx, &scredit); err != nil {
			return err
		}
	}
	return nil
}

// allocCredit is ctx_alloc_credit: the credit words, which the
// handshakes then advertise in place of the test buffer.
func (p *perf) allocCredit() error {
	var err error
	if p.credit, err = mr.New(p.pd, 8, mr.LocalWrite|mr.RemoteWrite); err != nil {
		return fmt.Errorf("couldn't allocate MR: %w", err)
	}
	p.my.RKey = p.credit.RKey()
	p.my.VAddr = p.credit.IOVA() + 4
	p.creditSGE = []verbs.SGE{{Addr: p.credit.IOVA(), Length: 4, LKey: p.credit.LKey()}}
	p.creditWR = []verbs.SendWR{{Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, SGList: p.creditSGE}}
	p.creditWC = make([]verbs.WorkCompletion, perfPollBatch)
	return nil
}

// creditWord is the credit buffer's i-th 32-bit word, written in host
// order as C does.
func (p *perf) creditWord(i int) *uint32 {
	return (*uint32)(unsafe.Pointer(&p.credit.Bytes()[4*i]))
}

// grantCredit writes the count of receives so far into the sender's
// credit word, at most tx_depth writes outstanding (run_iter_bw_server).
func (p *perf) grantCredit(ctx context.Context, rcnt uint64, scredit *int) error {
	atomic.StoreUint32(p.creditWord(0), uint32(rcnt))
	for *scredit >= p.o.txDepth {
		if err := p.reapCredits(ctx, scredit); err != nil {
			return err
		}
	}
	if err := p.qp.PostSend(p.creditWR); err != nil {
		return fmt.Errorf("couldn't post send: credit = %d: %w", rcnt, err)
	}
	*scredit++
	return nil
}

// reapCredits polls the send CQ for completed credit writes.
func (p *perf) reapCredits(ctx context.Context, scredit *int) error {
	for spins := 1; ; spins++ {
		n, err := p.cq.Poll(p.creditWC)
		if err != nil {
			return fmt.Errorf("poll send CQ failed: %w", err)
		}
		for i := range p.creditWC[:n] {
			if c := &p.creditWC[i]; c.Status != verbs.WCSuccess {
				return fmt.Errorf("poll send CQ error: status %s (%d) credit scredit=%d", c.Status, int(c.Status), *scredit)
			}
			*scredit--
		}
		if n > 0 {
			return nil
		}
		if spins%perfSpinCheck == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// iterLatSend is run_iter_lat_send: a SEND ping-pong, the server
// receiving first; each end reposts while receives are still due.
func (p *perf) iterLatSend(ctx context.Context, size uint64) error {
	o := p.o
	iters := uint64(o.iters)
	cqMod := uint64(o.cqMod)
	wr := &p.wr[0]
	*wr = verbs.SendWR{Opcode: verbs.WRSend, SGList: p.sge}
	p.sge[0].Addr, p.sge[0].Length = p.mr.IOVA(), uint32(size)
	client := o.server != ""
	wc := p.wc[:1]
	var scnt, rcnt uint64
	for scnt < iters || rcnt < iters {
		if rcnt < iters && !(scnt < 1 && client) {
			for spins := 1; ; spins++ {
				n, err := p.rcq.Poll(wc)
				if err != nil {
					return fmt.Errorf("poll CQ failed: %w", err)
				}
				if n > 0 {
					break
				}
				if spins%perfSpinCheck == 0 && ctx.Err() != nil {
					return ctx.Err()
				}
			}
			if wc[0].Status != verbs.WCSuccess {
				return fmt.Errorf("completion with error at receive: status %s (%d), rcnt=%d", wc[0].Status, int(wc[0].Status), rcnt)
			}
			rcnt++
			if rcnt+uint64(o.rxDepth) <= iters {
				if err := p.qp.PostRecv(p.rwr); err != nil {
					return fmt.Errorf("couldn't post recv: rcnt=%d: %w", rcnt, err)
				}
			}
		}
		if scnt < iters {
			p.posted[scnt] = p.now()
			scnt++
			signaled := scnt%cqMod == 0 || scnt == iters
			if signaled {
				wr.Flags |= verbs.SendSignaled
			}
			if err := p.qp.PostSend(p.wr); err != nil {
				return fmt.Errorf("couldn't post send: scnt=%d: %w", scnt, err)
			}
			if signaled {
				if err := p.pollOne(ctx, wc, scnt, scnt); err != nil {
					return err
				}
				wr.Flags &^= verbs.SendSignaled
			}
		}
	}
	return nil
}

// cacheLineSize is get_cache_line_size: sysfs's coherency line size, 64
// when unknown.
func cacheLineSize() int {
	b, err := os.ReadFile("/sys/devices/system/cpu/cpu0/cache/index0/coherency_line_size")
	if err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n > 0 && n <= 4096 {
			return n
		}
	}
	return perfDefCacheLine
}

// close destroys what run made, in perftest's order, and reports the
// first failure.
func (p *perf) close() error {
	var errs []error
	if p.id != nil {
		// The ID owns the QP: closing it destroys the QP.
		p.id.Disconnect()
		errs = append(errs, p.id.Close())
		p.qp = nil
	}
	if p.conn != nil {
		p.conn.Close()
	}
	if p.ch != nil {
		errs = append(errs, p.ch.Close())
	}
	if p.qp != nil {
		errs = append(errs, p.qp.Close())
	}
	if p.cq != nil {
		errs = append(errs, p.cq.Close())
	}
	if p.rcq != nil {
		errs = append(errs, p.rcq.Close())
	}
	if p.credit != nil {
		errs = append(errs, p.credit.Close())
	}
	if p.mr != nil {
		errs = append(errs, p.mr.Close())
	}
	if p.pd != nil {
		errs = append(errs, p.pd.Close())
	}
	if p.ctx != nil {
		errs = append(errs, p.ctx.Close())
	}
	for _, err := range errs {
		if err != nil {
			return fmt.Errorf("failed to destroy resources: %w", err)
		}
	}
	return nil
}

// iWARP reports whether the device is an iWARP one (node type RNIC): its
// QPs connect only through rdma_cm (-R), and RDMA READ sinks need remote
// write access.
func (p *perf) iWARP() bool {
	return p.ctx != nil && p.ctx.Device().NodeType.Transport() == verbs.TransportIWARP
}

// perfCMTries and perfCMRetryDelay are rdma_cm_client_connection's: a
// client whose test connection fails (the server may not listen yet)
// tries again, 10 times in all, 100 ms apart.
const (
	perfCMTries      = 10
	perfCMRetryDelay = 100 * time.Millisecond
)

// connectExchangeCM is establish_connection with -R: the exchange's own
// rdma_cm connection on the test's port, on a channel that uses this
// run's device context for the test connection that follows.
func (p *perf) connectExchangeCM(ctx context.Context) error {
	o := p.o
	var err error
	if p.ch, err = cm.NewChannel(); err != nil {
		return fmt.Errorf("unable to create the RDMA_CM event channel: %w", err)
	}
	if err := p.ch.AttachContext(p.ctx); err != nil {
		return err
	}
	if o.server == "" {
		fmt.Fprint(p.stdout, "\n************************************\n* Waiting for client to connect... *\n************************************\n")
		l, err := perftest.ListenCM(p.ch, o.port)
		if err != nil {
			return err
		}
		p.conn, err = perftest.AcceptCM(ctx, l)
		l.Close()
		return err
	}
	if p.conn, err = perftest.DialCM(ctx, p.ch, o.server, o.port); err != nil {
		return err
	}
	// perftest's main sleeps a second after establish_connection. It
	// also keeps the client's first message clear of siw's window
	// after accepting (docs/providers.md, "siw: who sends first").
	select {
	case <-time.After(time.Second):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// connectCM is create_rdma_cm_connection: a handshake, the test QP
// created on an rdma_cm ID and connected through it on the test's port
// (the server listening again there, the client retrying until it
// does), and a handshake once connected. The addresses exchanged after
// it carry only what the measurement needs (rkey, vaddr, out_reads).
func (p *perf) connectCM(ctx context.Context) error {
	o := p.o
	var l *cm.ID
	if o.server == "" {
		// Listening before the handshake tells the client to go on:
		// its first try then finds us.
		var err error
		if l, err = perftest.ListenCM(p.ch, o.port); err != nil {
			return err
		}
		defer l.Close()
	}
	if _, err := p.conn.HandShake(ctx, perftest.Dest{}, p.withGID); err != nil {
		return err
	}
	param := cm.ConnParam{RetryCount: perftest.RetryCount, RNRRetryCount: perftest.RetryCount, Exact: true}
	if o.test.Verb == Read || o.test.Verb == Atomic {
		param.ResponderResources = uint8(p.outReads)
		param.InitiatorDepth = uint8(p.outReads)
	}
	var err error
	if o.server == "" {
		err = p.acceptCM(ctx, l, param)
	} else {
		for try := 1; ; try++ {
			if err = p.dialCM(ctx, param); err == nil || try == perfCMTries || ctx.Err() != nil {
				break
			}
			select {
			case <-time.After(perfCMRetryDelay):
			case <-ctx.Done():
			}
		}
		if err != nil {
			err = fmt.Errorf("failed to connect RDMA CM client, tried %d times: %w", perfCMTries, err)
		}
	}
	if err != nil {
		return err
	}
	p.my.QPN = p.qp.QPN()
	if _, err := p.conn.HandShake(ctx, perftest.Dest{}, p.withGID); err != nil {
		return err
	}
	return nil
}

// adoptCM makes id the test connection's and creates its QP, which must
// be on this run's device.
func (p *perf) adoptCM(id *cm.ID) error {
	p.id = id
	if c := id.Context(); c != p.ctx {
		name := "none"
		if c != nil {
			name = c.Device().Name
		}
		return fmt.Errorf("rdma_cm bound the test connection to device %s, not %s (-d)", name, p.o.devName)
	}
	var err error
	if p.qp, err = id.CreateQP(p.pd, p.qpOptions()); err != nil {
		return fmt.Errorf("failed to create QP: %w", err)
	}
	return nil
}

// acceptCM is the server's rdma_cm_connection_request_handler.
func (p *perf) acceptCM(ctx context.Context, l *cm.ID, param cm.ConnParam) error {
	id, _, err := l.GetRequest(ctx)
	if err != nil {
		return fmt.Errorf("failed to get RDMA CM event: %w", err)
	}
	if err := p.adoptCM(id); err != nil {
		id.Reject(nil)
		return err
	}
	if err := id.Accept(ctx, param); err != nil {
		return fmt.Errorf("failed to accept RDMA CM connection: %w", err)
	}
	return nil
}

// dialCM is one try of the client's test connection (resolve address,
// route, QP, connect); a failed try leaves nothing behind.
func (p *perf) dialCM(ctx context.Context, param cm.ConnParam) (err error) {
	a, err := perftest.ResolveIPv4(ctx, p.o.server)
	if err != nil {
		return err
	}
	id, err := p.ch.CreateID(cm.TCP)
	if err != nil {
		return fmt.Errorf("failed to create RDMA CM ID: %w", err)
	}
	defer func() {
		if err != nil {
			id.Close()
			p.id, p.qp = nil, nil
		}
	}()
	dst := netip.AddrPortFrom(a, uint16(p.o.port))
	if err := id.ResolveAddr(ctx, netip.AddrPort{}, dst); err != nil {
		return fmt.Errorf("failed to resolve RDMA CM address: %w", err)
	}
	if err := id.ResolveRoute(ctx); err != nil {
		return fmt.Errorf("failed to resolve RDMA CM route: %w", err)
	}
	if err := p.adoptCM(id); err != nil {
		return err
	}
	if _, err := id.Connect(ctx, param); err != nil {
		return fmt.Errorf("failed to connect through RDMA CM: %w", err)
	}
	return nil
}
