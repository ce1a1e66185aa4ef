package pingpong

// The verbs side of goverbs pingpong: the resources each C tool creates and
// its ping-pong loop, work request for work request.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/tools/cli"
	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/srq"
	"github.com/goverbs/goverbs/verbs"
)

// The work request ids of the C tools; the loop also uses them as the bits
// of a QP's pending set.
const (
	ppRecvWRID = 1
	ppSendWRID = 2
)

const (
	ppUDQKey = 0x11111111
	ppGRH    = 40 // a UD receive starts with the 40-byte GRH
)

// pingpong is what pp_init_ctx builds (struct pingpong_context) plus the
// prepared work requests.
type pingpong struct {
	o      *ppOptions
	stdout io.Writer

	buf  *mr.Buffer
	ctx  *verbs.Context
	ch   *verbs.CompChannel
	pd   *verbs.PD
	mr   *mr.MR
	cq   *cq.CQ
	srq  *srq.SRQ
	qps  []*qp.QP
	ah   *verbs.AH
	data []byte // the message: the buffer, past the GRH room for UD

	inline  bool
	recvSGE []verbs.SGE
	recvs   []verbs.RecvWR // rx_depth identical receives
	sendSGE []verbs.SGE
	send    []verbs.SendWR
	pending []int
}

// runPP runs one end of a ping-pong and returns the exit status.
func runPP(o *ppOptions, stdout, stderr io.Writer) int {
	// Pinned to one CPU (taskset -c N, as ping-pongs are run) Go starts
	// with GOMAXPROCS=1. Each post send is then a write(2) in which rxe
	// does the whole transfer, longer than sysmon's 20µs tick, so sysmon
	// retakes the P (no idle P exists to make it wait) and, having retaken
	// one, keeps waking every 20µs, on the CPU the loop spins on: in the
	// test VM that doubled the round trip. With a second, idle P, sysmon
	// leaves the syscall alone and backs off.
	if prev := runtime.GOMAXPROCS(0); prev < 2 {
		runtime.GOMAXPROCS(2)
		defer runtime.GOMAXPROCS(prev)
	}
	pp := &pingpong{o: o, stdout: stdout}
	err := pp.run()
	if cerr := pp.close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

func (pp *pingpong) run() error {
	o := pp.o
	if o.typ == ppSRQ {
		if o.numQP > o.rxDepth {
			return ppFail(nil, "rx_depth %d is too small for %d QPs -- must have at least one receive per QP.", o.rxDepth, o.numQP)
		}
		if o.numQP >= ppMaxQP {
			// The C tool's message says MAX_QP - 1.
			return ppFail(nil, "num_qp %d must be less than %d", o.numQP, ppMaxQP-1)
		}
	}
	devs, err := verbs.Devices()
	if err != nil {
		return ppFail(err, "Failed to get IB devices list")
	}
	dev := cli.PickDevice(devs, o.devName)
	if dev == nil {
		if o.devName == "" {
			return ppFail(nil, "No IB devices found")
		}
		return ppFail(nil, "IB device %s not found", o.devName)
	}
	if err := pp.init(*dev); err != nil {
		return err
	}
	if routs := pp.postRecv(o.rxDepth); routs < o.rxDepth {
		return ppFail(nil, "Couldn't post receive (%d)", routs)
	}
	if o.events {
		if err := pp.cq.ReqNotify(false); err != nil {
			return ppFail(err, "Couldn't request CQ notification")
		}
	}
	port, err := pp.ctx.QueryPort(o.ibPort)
	if err != nil {
		return ppFail(err, "Couldn't get port info")
	}
	if o.typ != ppUD && port.LinkLayer != verbs.LinkLayerEthernet && port.LID == 0 {
		return ppFail(nil, "Couldn't get local LID")
	}
	var gid verbs.GID
	if o.gidIndex >= 0 {
		e, err := pp.ctx.QueryGID(o.ibPort, o.gidIndex)
		switch {
		case errors.Is(err, unix.ENODATA):
			// libibverbs' ibv_query_gid reports an unused entry as
			// the zero GID, and the tools go on without a GRH.
		case err != nil && (o.typ == ppRC || o.typ == ppUC):
			return ppFail(err, "can't read sgid of index %d", o.gidIndex)
		case err != nil:
			return ppFail(err, "Could not get local gid for gid index %d", o.gidIndex)
		default:
			gid = e.GID
		}
	}
	my := make([]ppDest, len(pp.qps))
	for i, q := range pp.qps {
		my[i] = ppDest{LID: port.LID, QPN: q.QPN(), PSN: rand.Uint32() & 0xffffff, GID: gid}
		sep := ","
		if o.typ == ppUD {
			sep = ":" // sic, ibv_ud_pingpong
		}
		fmt.Fprintf(pp.stdout, "  local address:  LID 0x%04x, QPN 0x%06x, PSN 0x%06x%s GID %s\n",
			my[i].LID, my[i].QPN, my[i].PSN, sep, my[i].GID)
	}

	var rem []ppDest
	if o.server != "" {
		rem, err = ppClientExchange(o.typ, o.server, o.port, my)
	} else {
		ln, lerr := ppListen(o.port)
		if lerr != nil {
			return lerr
		}
		defer ln.Close()
		rem, err = ppServerExchange(o.typ, ln, my, func(rem []ppDest) error { return pp.connect(my, rem) })
	}
	if err != nil {
		return err
	}
	for i := range pp.qps {
		fmt.Fprintf(pp.stdout, "  remote address: LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %s\n",
			rem[i].LID, rem[i].QPN, rem[i].PSN, rem[i].GID)
	}
	if o.server != "" {
		if err := pp.connect(my, rem); err != nil {
			return err
		}
	}
	if o.typ == ppUD {
		pp.send[0].RemoteQPN = rem[0].QPN
	}

	pageSize := os.Getpagesize()
	if o.server != "" {
		if o.validate {
			// i / page_size % sizeof(char) in the C tools: always 0.
			for i := 0; i < o.size; i += pageSize {
				pp.data[i] = 0
			}
		}
		for i := range pp.qps {
			if err := pp.postSend(i); err != nil {
				return err
			}
			pp.pending[i] = ppRecvWRID | ppSendWRID
		}
	} else {
		for i := range pp.pending {
			pp.pending[i] = ppRecvWRID
		}
	}

	start := time.Now()
	if err := pp.loop(); err != nil {
		return err
	}
	elapsed := time.Since(start)

	// The C tools keep the microseconds in a float and divide in it.
	usec := float32(elapsed.Microseconds())
	bytes := int64(o.size) * int64(o.iters) * 2
	fmt.Fprintf(pp.stdout, "%d bytes in %s seconds = %s Mbit/sec\n",
		bytes, cfmt2(float64(usec)/1000000), cfmt2(float64(bytes)*8/float64(usec)))
	fmt.Fprintf(pp.stdout, "%d iters in %s seconds = %s usec/iter\n",
		int32(o.iters), cfmt2(float64(usec)/1000000), cfmt2(float64(usec/float32(uint32(o.iters)))))
	if o.server == "" && o.validate {
		for i := 0; i < o.size; i += pageSize {
			if pp.data[i] != 0 {
				fmt.Fprintf(pp.stdout, "invalid data in page %d\n", i/pageSize)
			}
		}
	}
	return nil
}

// cfmt2 formats like C's printf("%.2f"), infinities and NaNs included.
func cfmt2(v float64) string {
	sign := ""
	if math.Signbit(v) {
		sign = "-"
	}
	switch {
	case math.IsNaN(v):
		return sign + "nan"
	case math.IsInf(v, 0):
		return sign + "inf"
	}
	return fmt.Sprintf("%.2f", v)
}

// init is pp_init_ctx.
func (pp *pingpong) init(dev verbs.Device) error {
	o := pp.o
	bufSize := o.size
	if o.typ == ppUD {
		bufSize += ppGRH
	}
	var err error
	// At least a byte: -s 0 is for the registration to refuse, as in C.
	if pp.buf, err = mr.Alloc(max(bufSize, 1)); err != nil {
		return ppFail(err, "Couldn't allocate work buf.")
	}
	mem := pp.buf.Bytes()[:bufSize]
	if o.typ != ppSRQ {
		// The C tools fill with 0x7b ("FIXME memset(ctx->buf, 0, size)");
		// ibv_srq_pingpong zeroes. -c relies on it.
		for i := range mem {
			mem[i] = 0x7b
		}
	}
	pp.data = mem
	if o.typ == ppUD {
		pp.data = mem[ppGRH:]
	}

	if pp.ctx, err = verbs.OpenDevice(dev); err != nil {
		return ppFail(err, "Couldn't get context for %s", dev.Name)
	}
	if o.typ == ppUD {
		port, err := pp.ctx.QueryPort(o.ibPort)
		if err != nil {
			return ppFail(err, "Unable to query port info for port %d", o.ibPort)
		}
		if mtu := port.ActiveMTU.Bytes(); o.size > mtu {
			return ppFail(nil, "Requested size larger than port MTU (%d)", mtu)
		}
	}
	if o.events {
		if pp.ch, err = pp.ctx.NewCompChannel(); err != nil {
			return ppFail(err, "Couldn't create completion channel")
		}
	}
	if pp.pd, err = pp.ctx.AllocPD(); err != nil {
		return ppFail(err, "Couldn't allocate PD")
	}
	if pp.mr, err = mr.Register(pp.pd, mem, mr.LocalWrite); err != nil {
		return ppFail(err, "Couldn't register MR")
	}
	numQP := 1
	cqe := o.rxDepth + 1
	if o.typ == ppSRQ {
		numQP = o.numQP
		cqe = o.rxDepth + o.numQP
	}
	if pp.cq, err = cq.New(pp.ctx, cq.Options{CQE: cqe, Channel: pp.ch}); err != nil {
		return ppFail(err, "Couldn't create CQ")
	}
	caps := qp.Caps{MaxSendWR: 1, MaxRecvWR: o.rxDepth, MaxSendSGE: 1, MaxRecvSGE: 1}
	if o.typ == ppSRQ {
		if pp.srq, err = srq.New(pp.pd, srq.Attr{MaxWR: o.rxDepth, MaxSGE: 1}); err != nil {
			return ppFail(err, "Couldn't create SRQ")
		}
		caps.MaxRecvWR, caps.MaxRecvSGE = 0, 0
	}
	qpType := map[ppType]qp.Type{ppRC: qp.RC, ppUC: qp.UC, ppUD: qp.UD, ppSRQ: qp.RC}[o.typ]
	for i := 0; i < numQP; i++ {
		q, err := qp.New(pp.pd, qp.Options{Type: qpType, SendCQ: pp.cq, RecvCQ: pp.cq, SRQ: pp.srq, Caps: caps})
		if err != nil {
			if o.typ == ppSRQ {
				return ppFail(err, "Couldn't create QP[%d]", i)
			}
			return ppFail(err, "Couldn't create QP")
		}
		pp.qps = append(pp.qps, q)
		if q.Caps().MaxInlineData >= o.size {
			pp.inline = true
		}
	}
	for i, q := range pp.qps {
		a := qp.InitAttr{Port: uint8(o.ibPort)}
		if o.typ == ppUD {
			a.QKey = ppUDQKey
		}
		if err := q.ToInit(a); err != nil {
			if o.typ == ppSRQ {
				return ppFail(err, "Failed to modify QP[%d] to INIT", i)
			}
			return ppFail(err, "Failed to modify QP to INIT")
		}
	}

	// The work requests, built once: posting them allocates nothing.
	recvLen := o.size
	if o.typ == ppUD {
		recvLen += ppGRH
	}
	pp.recvSGE = []verbs.SGE{{Addr: pp.mr.IOVA(), Length: uint32(recvLen), LKey: pp.mr.LKey()}}
	pp.recvs = make([]verbs.RecvWR, o.rxDepth)
	for i := range pp.recvs {
		pp.recvs[i] = verbs.RecvWR{WRID: ppRecvWRID, SGList: pp.recvSGE}
	}
	off := uint64(len(mem) - len(pp.data))
	pp.sendSGE = []verbs.SGE{{Addr: pp.mr.IOVA() + off, Length: uint32(o.size), LKey: pp.mr.LKey()}}
	pp.send = []verbs.SendWR{{WRID: ppSendWRID, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGList: pp.sendSGE}}
	if pp.inline {
		pp.send[0].Flags |= verbs.SendInline
		pp.send[0].InlineData = pp.data[:o.size]
	}
	if o.typ == ppUD {
		pp.send[0].RemoteQKey = ppUDQKey
	}
	pp.pending = make([]int, numQP)
	return nil
}

// connect is pp_connect_ctx: RTR and RTS for the connected types, RTR,
// RTS and the address handle for UD.
func (pp *pingpong) connect(my, rem []ppDest) error {
	o := pp.o
	path := func(d ppDest, gid verbs.GID) verbs.AHAttr {
		a := verbs.AHAttr{DLID: d.LID, SL: uint8(o.sl), Port: uint8(o.ibPort)}
		if !gid.IsZero() { // dest->gid.global.interface_id
			a.IsGlobal = true
			a.GRH = verbs.GlobalRoute{DGID: gid, SGIDIndex: uint8(o.gidIndex), HopLimit: 1}
		}
		return a
	}
	if o.typ == ppUD {
		q := pp.qps[0]
		if err := q.ToRTR(qp.RTRAttr{}); err != nil {
			return ppFail(err, "Failed to modify QP to RTR")
		}
		if err := q.ToRTS(qp.RTSAttr{SQPSN: my[0].PSN}); err != nil {
			return ppFail(err, "Failed to modify QP to RTS")
		}
		a := path(rem[0], rem[0].GID)
		ah, err := pp.pd.CreateAH(&a)
		if err != nil {
			return ppFail(err, "Failed to create AH")
		}
		pp.ah = ah
		pp.send[0].AH = ah
		return nil
	}
	qpName := func(i int) string {
		if o.typ == ppSRQ {
			return fmt.Sprintf("QP[%d]", i)
		}
		return "QP"
	}
	for i, q := range pp.qps {
		// ibv_srq_pingpong takes the GID of the first line for all QPs.
		err := q.ToRTR(qp.RTRAttr{Path: path(rem[i], rem[0].GID), MTU: o.mtu, DestQPN: rem[i].QPN,
			RQPSN: rem[i].PSN, MaxDestRDAtomic: 1, MinRNRTimer: 12})
		if err != nil {
			return ppFail(err, "Failed to modify %s to RTR", qpName(i))
		}
		err = q.ToRTS(qp.RTSAttr{SQPSN: my[i].PSN, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRDAtomic: 1})
		if err != nil {
			return ppFail(err, "Failed to modify %s to RTS", qpName(i))
		}
	}
	return nil
}

// postRecv posts n receives and returns how many were posted.
func (pp *pingpong) postRecv(n int) int {
	if n <= 0 {
		return 0
	}
	var err error
	if pp.srq != nil {
		err = pp.srq.PostRecv(pp.recvs[:n])
	} else {
		err = pp.qps[0].PostRecv(pp.recvs[:n])
	}
	if err != nil {
		if pe, ok := verbs.IsPostError(err); ok {
			return pe.Index
		}
		return 0
	}
	return n
}

func (pp *pingpong) postSend(i int) error {
	if err := pp.qps[i].PostSend(pp.send); err != nil {
		return ppFail(err, "Couldn't post send")
	}
	return nil
}

// loop is the tools' main loop: wait (-e) or spin for completions, count
// sends and receives, refill the receive queue when it runs low, and send
// the next message on a QP once both its send and its receive completed.
func (pp *pingpong) loop() error {
	o := pp.o
	nwc, refillAt := 2, 1
	if o.typ == ppSRQ {
		nwc, refillAt = o.numQP+o.rxDepth, o.numQP
	}
	wc := make([]verbs.WorkCompletion, nwc)
	routs := o.rxDepth
	rcnt, scnt := 0, 0
	for rcnt < o.iters || scnt < o.iters {
		if o.events {
			got, err := cq.WaitChannel(context.Background(), pp.ch)
			if err != nil {
				return ppFail(err, "Failed to get cq_event")
			}
			if got != pp.cq {
				return ppFail(nil, "CQ event for unknown CQ %p", got)
			}
			if err := pp.cq.ReqNotify(false); err != nil {
				return ppFail(err, "Couldn't request CQ notification")
			}
		}
		var ne int
		for {
			var err error
			if ne, err = pp.cq.Poll(wc); err != nil {
				return ppFail(err, "poll CQ failed")
			}
			if o.events || ne > 0 {
				break
			}
		}
		for i := range wc[:ne] {
			w := &wc[i]
			err := pp.completion(w, &routs, &rcnt, &scnt, refillAt)
			if err != nil {
				if o.typ == ppRC {
					return fmt.Errorf("%w\nparse WC failed %d", err, ne)
				}
				return err
			}
		}
	}
	return nil
}

// completion handles one work completion (parse_single_wc).
func (pp *pingpong) completion(w *verbs.WorkCompletion, routs, rcnt, scnt *int, refillAt int) error {
	o := pp.o
	if w.Status != verbs.WCSuccess {
		return ppFail(nil, "Failed status %s (%d) for wr_id %d", w.Status, int(w.Status), int32(w.WRID))
	}
	qi := 0
	if o.typ == ppSRQ {
		qi = -1
		for i, q := range pp.qps {
			if q.QPN() == w.QPNum {
				qi = i
				break
			}
		}
		if qi < 0 {
			return ppFail(nil, "Couldn't find QPN %06x", w.QPNum)
		}
	}
	switch w.WRID {
	case ppSendWRID:
		*scnt++
	case ppRecvWRID:
		if *routs--; *routs <= refillAt {
			*routs += pp.postRecv(o.rxDepth - *routs)
			if *routs < o.rxDepth {
				return ppFail(nil, "Couldn't post receive (%d)", *routs)
			}
		}
		*rcnt++
	default:
		return ppFail(nil, "Completion for unknown wr_id %d", int32(w.WRID))
	}
	pp.pending[qi] &^= int(w.WRID)
	if *scnt < o.iters && pp.pending[qi] == 0 {
		if err := pp.postSend(qi); err != nil {
			return err
		}
		pp.pending[qi] = ppRecvWRID | ppSendWRID
	}
	return nil
}

// close is pp_close_ctx: destroy in the C tools' order, report the first
// failure. It also cleans up after a failed run.
func (pp *pingpong) close() error {
	var first error
	step := func(ok bool, closeFn func() error, msg string) {
		if !ok {
			return
		}
		if err := closeFn(); err != nil && first == nil {
			first = ppFail(err, "%s", msg)
		}
	}
	for i, q := range pp.qps {
		msg := "Couldn't destroy QP"
		if pp.o.typ == ppSRQ {
			msg = fmt.Sprintf("Couldn't destroy QP[%d]", i)
		}
		step(true, q.Close, msg)
	}
	step(pp.srq != nil, func() error { return pp.srq.Close() }, "Couldn't destroy SRQ")
	step(pp.cq != nil, func() error { return pp.cq.Close() }, "Couldn't destroy CQ")
	step(pp.mr != nil, func() error { return pp.mr.Close() }, "Couldn't deregister MR")
	step(pp.ah != nil, func() error { return pp.ah.Close() }, "Couldn't destroy AH")
	step(pp.pd != nil, func() error { return pp.pd.Close() }, "Couldn't deallocate PD")
	step(pp.ch != nil, func() error { return pp.ch.Close() }, "Couldn't destroy completion channel")
	ctxClosed := pp.ctx == nil
	step(pp.ctx != nil, func() error {
		err := pp.ctx.Close()
		ctxClosed = err == nil
		return err
	}, "Couldn't release context")
	if pp.buf != nil && ctxClosed {
		// Only once nothing has it registered: closing the context
		// deregisters whatever MR is left.
		pp.buf.Close()
	}
	return first
}
