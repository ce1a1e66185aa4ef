// Package cmtime is goverbs cmtime: rdma-core's cmtime
// (librdmacm/examples/cmtime.c, rdma-core 44), which times the steps of
// setting up and tearing down many RDMA CM connections. Either end may be
// the C tool.
//
// The client (-s) creates -c IDs (100), binds them when -b is given,
// resolves every address, then every route, creates every QP, connects
// every ID, disconnects every ID and destroys them, one step at a time
// for all connections, and prints each step's total time, the slowest and
// the fastest connection and the time per connection, in the C tool's
// format. Address resolution, route resolution, connection and
// disconnection are asynchronous in the C tool (all requests issued, then
// the events awaited on one event channel); here each connection's step
// is a goroutine waiting on its ID, and every ID's events come through one
// rdma_cm descriptor on Go's netpoller. A connection's step ends when its
// goroutine has the event, where the C tool's ends in its event thread.
// Resolution retries -r times (2) after an error event, each attempt
// waiting -t ms (2000).
//
// The server (no -s) binds -b (or the wildcard) at port -p (7471) and
// listens; for each request it creates a QP and accepts, and when a
// connection is disconnected it disconnects and destroys its ID. Like the
// C tool it runs until it is killed, and prints nothing.
//
// The QPs are made as the C tool's rdma_create_qp calls make them. The
// tool passes one static ibv_qp_init_attr with no CQs to every call, and
// rdma_create_qp copies the attributes it used back into it, CQs
// included. So the first call creates a send and a receive CQ, each with
// a completion channel, and every later QP of either end completes on
// those two (rdma-core 44, cmtime.c and cma.c). Here the first QP on a
// device is made as a cm.Queues, which creates the pair, and every later
// QP uses the endpoint's CQs; the endpoint lives until the tool ends. All
// QPs share one PD (librdmacm's per-device default PD; allocated before
// the step is timed). Every device is opened before the first step, as
// librdmacm does when the event channel is created. The destroy step
// closes each ID; the QPs and CQs are closed just before it, untimed, as
// the C tool destroys the IDs and leaves its QPs to process exit.
package cmtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"time"

	"github.com/goverbs/goverbs/cm"
	"github.com/goverbs/goverbs/internal/tools/cmcommon"
	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/verbs"
)

// Summary is goverbs cmtime's line in goverbs' command list.
const Summary = "time RDMA CM connection set-up and tear-down per step, like cmtime"

const usage = "\t[-s server_address]\n\t[-b bind_address]\n\t[-c connections]\n\t[-p port_number]\n\t[-r retries]\n\t[-t timeout_ms]\n"

// The steps, in the C tool's order and words.
const (
	stepCreateID = iota
	stepBind
	stepResolveAddr
	stepResolveRoute
	stepCreateQP
	stepConnect
	stepDisconnect
	stepDestroy
	stepCount
)

var stepName = [stepCount]string{"create id", "bind addr", "resolve addr", "resolve route", "create qp", "connect", "disconnect", "destroy"}

// caps are the C tool's QP: one work request and one SGE each way.
var caps = qp.Caps{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}

// qpMaker creates the QPs, one CQ pair per device (see the package
// comment): a device's first QP is made as a cm.Queues, which creates
// the send and the receive CQ with their completion channels, and every
// later QP on the device completes on that endpoint's CQs.
type qpMaker struct {
	mu  sync.Mutex
	eps map[*verbs.Context]*cm.Queues
}

// create gives id its QP on pd. The ID owns the QP.
func (m *qpMaker) create(id *cm.ID, pd *verbs.PD) (*qp.QP, error) {
	dev := id.Context()
	if dev == nil {
		return nil, errors.New("cmtime: the ID is not bound to a device")
	}
	m.mu.Lock()
	if ep := m.eps[dev]; ep != nil {
		m.mu.Unlock()
		return id.CreateQP(pd, qp.Options{SendCQ: ep.SendCQ(), RecvCQ: ep.RecvCQ(), Caps: caps})
	}
	defer m.mu.Unlock()
	ep, err := id.NewQueues(pd, caps)
	if err != nil {
		return nil, err
	}
	if m.eps == nil {
		m.eps = make(map[*verbs.Context]*cm.Queues)
	}
	m.eps[dev] = ep
	return ep.QP(), nil
}

// Close closes every device's endpoint, its CQs with them. The QPs on
// those CQs must be closed first; the endpoint's own QP may already be,
// with its ID.
func (m *qpMaker) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	for dev, ep := range m.eps {
		errs = append(errs, ep.Close())
		delete(m.eps, dev)
	}
	return errors.Join(errs...)
}

type options struct {
	dst, src    string
	port        string
	connections int
	retries     int
	timeout     time.Duration
}

// node is one connection of the client.
type node struct {
	id    *cm.ID
	qp    *qp.QP
	times [stepCount][2]time.Time
	err   bool
	// ran and refused: the node's request of the step was issued, and
	// was refused at once (not by a later event). The C tool's exit
	// status is its last request's return value.
	ran, refused [stepCount]bool
}

// lastStatus is what the C tool's ret holds after step s: the return value
// (0 or -1) of the last connection's request, or ret unchanged when no
// connection issued one.
func lastStatus(nodes []node, s, ret int) int {
	for i := len(nodes) - 1; i >= 0; i-- {
		if nodes[i].ran[s] {
			if nodes[i].refused[s] {
				return -1
			}
			return 0
		}
	}
	return ret
}

// Main is goverbs cmtime: args are its arguments after the subcommand; it
// returns the exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	o := options{port: "7471", connections: 100, retries: 2, timeout: 2000 * time.Millisecond}
	if !parse(&o, args, stdout, stderr) {
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	out := &cmcommon.Out{W: stdout}
	// The event channel, and every device opened with it (see
	// openDevices), as the C tool's rdma_create_event_channel.
	ch, err := cm.NewChannel()
	if err != nil {
		out.Printf("failed to create event channel\n")
		return 1
	}
	defer ch.Close()
	closeDevs, err := openDevices(ch)
	if err != nil {
		out.Printf("failed to create event channel\n")
		return 1
	}
	defer closeDevs()
	if o.dst != "" {
		return client(ctx, ch, o, out, stderr) & 0xff
	}
	return server(ctx, ch, o, out, stderr) & 0xff
}

// parse reads the C tool's options (getopt "s:b:c:p:r:t:", numbers with
// atoi); on a bad option it prints the usage and reports false.
func parse(o *options, args []string, stdout, stderr io.Writer) bool {
	atoi := func(s string) int {
		// atoi: leading digits, 0 when none.
		n := 0
		i := 0
		neg := false
		if i < len(s) && (s[i] == '-' || s[i] == '+') {
			neg = s[i] == '-'
			i++
		}
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			n = n*10 + int(s[i]-'0')
		}
		if neg {
			return -n
		}
		return n
	}
	opts, _ := cmcommon.Getopt(args, "s:b:c:p:r:t:")
	for _, op := range opts {
		switch v := op.Arg; op.Opt {
		case 's':
			o.dst = v
		case 'b':
			o.src = v
		case 'c':
			o.connections = atoi(v)
		case 'p':
			o.port = v
		case 'r':
			o.retries = atoi(v)
		case 't':
			o.timeout = time.Duration(atoi(v)) * time.Millisecond
		default:
			cmcommon.GetoptError(&cmcommon.Out{W: stderr}, "goverbs cmtime", op)
			fmt.Fprintf(stdout, "usage: goverbs cmtime\n%s", usage)
			return false
		}
	}
	return true
}

// openDevices opens every RDMA device and attaches it to ch, before any
// step is timed, as librdmacm opens every device when the program creates
// its event channel (ucma_init): otherwise the first connection's address
// resolution would pay for opening its device, which the C tool's never
// does. The returned function closes them.
func openDevices(ch *cm.Channel) (func(), error) {
	devs, err := verbs.Devices()
	if err != nil {
		return nil, err
	}
	var open []*verbs.Context
	closeAll := func() {
		for _, c := range open {
			c.Close()
		}
	}
	for _, d := range devs {
		c, err := verbs.Open(d.Name)
		if err != nil {
			closeAll()
			return nil, err
		}
		open = append(open, c)
		if err := ch.AttachContext(c); err != nil {
			closeAll()
			return nil, err
		}
	}
	return closeAll, nil
}

// addrInfo is the C tool's get_rdma_addr: rdma_getaddrinfo of the
// destination (or, passive, of the bind address), with the bind address as
// the source.
func addrInfo(ctx context.Context, o options, passive bool) (*cm.EPInfo, error) {
	h := &cm.Hints{PortSpace: cm.TCP, QPType: qp.RC}
	if passive {
		h.Flags = cm.AIPassive
		return cm.GetAddrInfo(ctx, o.src, o.port, h)
	}
	if o.src != "" {
		src, err := cm.GetAddrInfo(ctx, o.src, "", &cm.Hints{Flags: cm.AIPassive})
		if err != nil {
			return nil, err
		}
		h.Src = netip.AddrPortFrom(src.Src.Addr(), 0)
	}
	return cm.GetAddrInfo(ctx, o.dst, o.port, h)
}

func server(ctx context.Context, ch *cm.Channel, o options, out *cmcommon.Out, stderr io.Writer) int {
	listen, err := ch.CreateID(cm.TCP)
	if err != nil {
		fmt.Fprintf(stderr, "listen request failed: %s\n", cmcommon.Strerror(err))
		return -1
	}
	defer listen.Close()
	info, err := addrInfo(ctx, o, true)
	if err != nil {
		out.Printf("getrdmaaddr error: %v\n", err)
		return -1
	}
	if err := listen.Bind(info.Src); err != nil {
		fmt.Fprintf(stderr, "bind address failed: %s\n", cmcommon.Strerror(err))
		return -1
	}
	if err := listen.Listen(0); err != nil {
		fmt.Fprintf(stderr, "failure trying to listen: %s\n", cmcommon.Strerror(err))
		return -1
	}
	var pds sync.Map // *verbs.Context -> *verbs.PD, librdmacm's default PD
	pdFor := func(id *cm.ID) (*verbs.PD, error) {
		dev := id.Context()
		if pd, ok := pds.Load(dev); ok {
			return pd.(*verbs.PD), nil
		}
		pd, err := dev.AllocPD()
		if err != nil {
			return nil, err
		}
		if prev, loaded := pds.LoadOrStore(dev, pd); loaded {
			pd.Close()
			return prev.(*verbs.PD), nil
		}
		return pd, nil
	}
	var qps qpMaker
	defer qps.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		id, _, err := listen.GetRequest(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return 0
			}
			fmt.Fprintf(stderr, "failure in rdma_get_cm_event in process_server_events: %s\n", cmcommon.Strerror(err))
			return -1
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			serve(ctx, id, pdFor, &qps, out, stderr)
		}()
	}
}

// serve is the C tool's request handler and, once the client disconnects,
// its disconnect handler.
func serve(ctx context.Context, id *cm.ID, pdFor func(*cm.ID) (*verbs.PD, error), qps *qpMaker, out *cmcommon.Out, stderr io.Writer) {
	defer id.Close() // and its QP
	pd, err := pdFor(id)
	if err == nil {
		_, err = qps.create(id, pd)
	}
	if err != nil {
		fmt.Fprintf(stderr, "failure creating qp: %s\n", cmcommon.Strerror(err))
		out.Printf("failing connection request\n")
		id.Reject(nil)
		return
	}
	if err := id.Accept(ctx, cm.ConnParam{}); err != nil {
		fmt.Fprintf(stderr, "failure accepting: %s\n", cmcommon.Strerror(err))
		out.Printf("failing connection request\n")
		id.Reject(nil)
		return
	}
	select {
	case <-id.Done():
		id.Disconnect()
	case <-ctx.Done():
	}
}

func client(ctx context.Context, ch *cm.Channel, o options, out *cmcommon.Out, stderr io.Writer) int {
	perror := func(what string, err error) {
		fmt.Fprintf(stderr, "%s: %s\n", what, cmcommon.Strerror(err))
	}
	var err error
	n := max(o.connections, 0)
	nodes := make([]node, n)
	var times [stepCount][2]time.Time
	var qps qpMaker
	ret := 0

	out.Printf("creating id\n")
	times[stepCreateID][0] = time.Now()
	for i := range nodes {
		nodes[i].times[stepCreateID][0] = time.Now()
		if nodes[i].id, err = ch.CreateID(cm.TCP); err != nil {
			perror("rdma_create_id", err)
			for j := range i {
				nodes[j].id.Close()
			}
			return -1
		}
		nodes[i].times[stepCreateID][1] = time.Now()
	}
	times[stepCreateID][1] = time.Now()

	defer func() {
		// The QPs and CQs go first, untimed: the C tool destroys the
		// IDs and leaves its QPs to process exit, and closing an ID
		// here would destroy its QP too.
		for i := range nodes {
			if nodes[i].qp != nil {
				nodes[i].qp.Close()
			}
		}
		qps.Close()
		out.Printf("destroying id\n")
		times[stepDestroy][0] = time.Now()
		for i := range nodes {
			nodes[i].times[stepDestroy][0] = time.Now()
			nodes[i].id.Close()
			nodes[i].times[stepDestroy][1] = time.Now()
		}
		times[stepDestroy][1] = time.Now()
		showPerf(out, nodes, &times, o)
	}()

	info, err := addrInfo(ctx, o, false)
	if err != nil {
		out.Printf("getaddrinfo error: %v\n", err)
		return -1
	}
	if o.src != "" {
		out.Printf("binding source address\n")
		times[stepBind][0] = time.Now()
		for i := range nodes {
			nodes[i].times[stepBind][0] = time.Now()
			nodes[i].ran[stepBind] = true
			if err := nodes[i].id.Bind(info.Src); err != nil {
				perror("failure bind addr", err)
				nodes[i].err, nodes[i].refused[stepBind] = true, true
				continue
			}
			nodes[i].times[stepBind][1] = time.Now()
		}
		times[stepBind][1] = time.Now()
		ret = lastStatus(nodes, stepBind, ret)
	}

	// all runs step for every connection not failed yet, each in its own
	// goroutine, and waits for them all.
	all := func(s int, step func(nd *node) bool) {
		times[s][0] = time.Now()
		var wg sync.WaitGroup
		for i := range nodes {
			nd := &nodes[i]
			if nd.err {
				continue
			}
			wg.Add(1)
			nd.ran[s] = true
			go func() {
				defer wg.Done()
				nd.times[s][0] = time.Now()
				if !step(nd) {
					nd.err = true
				}
				nd.times[s][1] = time.Now()
			}()
		}
		wg.Wait()
		times[s][1] = time.Now()
		ret = lastStatus(nodes, s, ret)
	}
	var mu sync.Mutex // the output and the error events' lines
	retry := func(nd *node, s int, what string, do func(ctx context.Context) error) bool {
		for try := 0; ; try++ {
			rctx, cancel := context.WithTimeout(ctx, o.timeout)
			err := do(rctx)
			cancel()
			if err == nil {
				return true
			}
			if _, ok := cmcommon.EventError(err); ok && try < o.retries {
				continue
			}
			mu.Lock()
			if ev, ok := cmcommon.EventError(err); ok {
				out.Printf("%s, error: %d\n", what, ev.Status)
			} else {
				perror(stepFailure[s], err)
				nd.refused[s] = true
			}
			mu.Unlock()
			return false
		}
	}

	out.Printf("resolving address\n")
	all(stepResolveAddr, func(nd *node) bool {
		return retry(nd, stepResolveAddr, "RDMA_CM_EVENT_ADDR_ERROR", func(ctx context.Context) error {
			return nd.id.ResolveAddr(ctx, info.Src, info.Dst)
		})
	})
	out.Printf("resolving route\n")
	all(stepResolveRoute, func(nd *node) bool {
		return retry(nd, stepResolveRoute, "RDMA_CM_EVENT_ROUTE_ERROR", func(ctx context.Context) error {
			return nd.id.ResolveRoute(ctx)
		})
	})

	out.Printf("creating qp\n")
	var pd *verbs.PD
	for i := range nodes {
		if !nodes[i].err {
			if pd, err = nodes[i].id.Context().AllocPD(); err != nil {
				perror("failure creating qp", err)
				return -1
			}
			defer pd.Close()
			break
		}
	}
	times[stepCreateQP][0] = time.Now()
	for i := range nodes {
		nd := &nodes[i]
		if nd.err {
			continue
		}
		nd.times[stepCreateQP][0] = time.Now()
		nd.ran[stepCreateQP] = true
		if nd.qp, err = qps.create(nd.id, pd); err != nil {
			perror("failure creating qp", err)
			nd.err, nd.refused[stepCreateQP] = true, true
			continue
		}
		nd.times[stepCreateQP][1] = time.Now()
	}
	times[stepCreateQP][1] = time.Now()
	ret = lastStatus(nodes, stepCreateQP, ret)

	out.Printf("connecting\n")
	p := cm.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: uint8(min(max(o.retries, 0), 7)), Exact: true}
	all(stepConnect, func(nd *node) bool {
		_, err := nd.id.Connect(ctx, p)
		if err != nil {
			mu.Lock()
			if ev, ok := cmcommon.EventError(err); ok {
				out.Printf("event: %s, error: %d\n", ev.Event, ev.Status)
			} else {
				perror("failure rconnecting", err)
				nd.refused[stepConnect] = true
			}
			mu.Unlock()
			return false
		}
		return true
	})

	out.Printf("disconnecting\n")
	before := ret
	all(stepDisconnect, func(nd *node) bool {
		return nd.id.DisconnectContext(ctx) == nil
	})
	return before // the C tool ignores rdma_disconnect's return value
}

// stepFailure is the C tool's perror text for a step whose request fails.
var stepFailure = [stepCount]string{stepResolveAddr: "failure getting addr", stepResolveRoute: "failure resolving route"}

// showPerf prints the table as the C tool's show_perf does.
func showPerf(out *cmcommon.Out, nodes []node, times *[stepCount][2]time.Time, o options) {
	us := func(t [2]time.Time) float64 { return float64(t[1].Sub(t[0]).Nanoseconds()) / 1000 }
	out.Printf("step              total ms     max ms     min us  us / conn\n")
	for s := range stepCount {
		if s == stepBind && o.src == "" {
			continue
		}
		mx, mn := 0.0, 999999999.0
		for i := range nodes {
			t := nodes[i].times[s]
			if t[0].IsZero() || t[1].IsZero() {
				continue
			}
			d := us(t)
			mx, mn = max(mx, d), min(mn, d)
		}
		total := 0.0
		if !times[s][0].IsZero() && !times[s][1].IsZero() {
			total = us(times[s])
		}
		perConn := total / float64(o.connections)
		out.Printf("%-13s: %11s%11s%11s%11s\n", stepName[s], f2(total/1000), f2(mx/1000), f2(mn), f2(perConn))
	}
}

// f2 formats like C's %.2f (glibc's inf and -nan for -c 0).
func f2(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "inf"
	case math.IsNaN(v):
		return "-nan"
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}
