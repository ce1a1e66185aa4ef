package main

// What goverbs udaddy and ucmatose share: librdmacm's cmatose.c and
// udaddy.c (rdma-core 44) are one program twice, a "test" of N
// connections ("nodes"), each with a PD, CQs, a QP and one message buffer
// that every send and receive uses.
//
// The C programs drive all connections from one event loop; here each
// connection goes through the connection manager's steps in turn (the
// cm package's ResolveAddr, Connect and Accept wait for their events).
// The peer cannot tell: the messages on the wire are the same, and so is
// what is printed.

import (
	"context"
	"net/netip"

	"github.com/goverbs/goverbs/cm"
	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/verbs"
)

// cmTest is one run of udaddy or ucmatose.
type cmTest struct {
	prog      string // message prefix: "udaddy", "cmatose"
	out, errw *cmOut
	ud        bool // udaddy: PS_UDP, UD QPs, a GRH before each receive

	connections int
	count       int // messages per connection
	size        int // bytes per message
	port        string
	dst, src    string // -s, -b
	setTOS      bool
	tos         uint8
	setTimeout  bool
	timeout     uint8 // ACK timeout
	migrate     bool

	ch       *cm.Channel
	channels []*cm.Channel // every channel opened; closed at the end
	nodes    []*cmNode

	connIndex       int
	connectsLeft    int
	disconnectsLeft int
}

// cmNode is one connection (struct cmatest_node).
type cmNode struct {
	id          *cm.ID
	connected   bool
	established bool // an ESTABLISHED event came: a DISCONNECTED is due
	pd          *verbs.PD
	cch         [2]*verbs.CompChannel
	cq          [2]*cq.CQ // send, receive; udaddy: one CQ for both
	qp          *qp.QP
	mr          *mr.MR
	ah          *verbs.AH
	remoteQPN   uint32
	remoteQKey  uint32
}

const (
	cmSendCQ = 0
	cmRecvCQ = 1
)

func (t *cmTest) portSpace() cm.PortSpace {
	if t.ud {
		return cm.UDP
	}
	return cm.TCP
}

// bufSize is the size of a node's message buffer: a UD receive also
// takes the 40-byte GRH.
func (t *cmTest) bufSize() int {
	if t.ud {
		return t.size + cmGRHSize
	}
	return t.size
}

// addrs resolves the addresses as get_rdma_addr does: the server's bind
// address (the wildcard without -b), or the client's destination and
// source. On failure it returns getaddrinfo's error code and message.
func (t *cmTest) addrs(passive bool) (src, dst netip.AddrPort, code int, msg string) {
	port, err := cmParsePort(t.port)
	if err != nil {
		return src, dst, -8, "Servname not supported for ai_socktype" // EAI_SERVICE
	}
	if t.src != "" {
		a, err := cmLookup(t.src)
		if err != nil {
			return src, dst, -2, err.Error() // EAI_NONAME
		}
		src = netip.AddrPortFrom(a, 0)
	}
	if passive {
		if !src.IsValid() {
			src = netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
		}
		return netip.AddrPortFrom(src.Addr(), port), dst, 0, ""
	}
	a, err := cmLookup(t.dst)
	if err != nil {
		return src, dst, -2, err.Error()
	}
	if src.IsValid() && src.Addr().Is4() != a.Is4() {
		return src, dst, -9, "Address family for hostname not supported" // EAI_ADDRFAMILY
	}
	return src, netip.AddrPortFrom(a, port), 0, ""
}

// eventError prints a failure event as the C programs' cma_handler does
// and returns its status.
func (t *cmTest) eventError(ee *cm.EventError) int {
	t.out.printf("%s: event: %s, error: %d\n", t.prog, ee.Event, ee.Status)
	t.connectsLeft--
	return ee.Status
}

// initNode creates a node's PD, CQs, QP and message buffer (init_node).
func (t *cmTest) initNode(n *cmNode) int {
	dev := n.id.Context()
	var err error
	if n.pd, err = dev.AllocPD(); err != nil {
		t.out.printf("%s: unable to allocate PD\n", t.prog)
		return -12 // -ENOMEM
	}
	cqe := max(t.count, 1)
	ncq := 2
	if t.ud {
		cqe = max(t.count*2, 2)
		ncq = 1
	}
	for i := range ncq {
		if n.cch[i], err = dev.NewCompChannel(); err == nil {
			n.cq[i], err = cq.New(dev, cq.Options{CQE: cqe, Channel: n.cch[i]})
		}
		if err != nil {
			t.out.printf("%s: unable to create CQ\n", t.prog)
			return -12
		}
	}
	if t.ud {
		n.cq[cmRecvCQ] = n.cq[cmSendCQ]
	}
	wrs := max(t.count, 1)
	n.qp, err = n.id.CreateQP(n.pd, qp.Options{SendCQ: n.cq[cmSendCQ], RecvCQ: n.cq[cmRecvCQ],
		Caps: qp.Caps{MaxSendWR: wrs, MaxRecvWR: wrs, MaxSendSGE: 1, MaxRecvSGE: 1}, SigAll: !t.ud})
	if err != nil {
		t.errw.printf("%s: unable to create QP: %s\n", t.prog, cmStrerror(err))
		return -1
	}
	// create_message
	if t.count == 0 {
		return 0
	}
	if n.mr, err = mr.New(n.pd, t.bufSize(), mr.LocalWrite); err != nil {
		t.out.printf("failed to reg MR\n")
		t.out.printf("%s: failed to create messages: %d\n", t.prog, -1)
		return -1
	}
	return 0
}

// postRecvs posts count receives of the node's buffer.
func (t *cmTest) postRecvs(n *cmNode) int {
	if t.count == 0 {
		return 0
	}
	wr := []verbs.RecvWR{{SGList: []verbs.SGE{{Addr: n.mr.IOVA(), Length: uint32(t.bufSize()), LKey: n.mr.LKey()}}}}
	for range t.count {
		if err := n.qp.PostRecv(wr); err != nil {
			t.out.printf("failed to post receives: %d\n", -1)
			return -1
		}
	}
	return 0
}

// postSends sends count messages from the node's buffer: SEND_WITH_IMM
// of the QP number to the peer's QP (UD), or SEND (RC).
func (t *cmTest) postSends(n *cmNode, flags verbs.SendFlags) int {
	if !n.connected || t.count == 0 {
		return 0
	}
	wr := []verbs.SendWR{{Opcode: verbs.WRSend, Flags: flags,
		SGList: []verbs.SGE{{Addr: n.mr.IOVA(), Length: uint32(t.size), LKey: n.mr.LKey()}}}}
	if t.ud {
		wr[0].Opcode = verbs.WRSendWithImm
		wr[0].Imm = n.qp.QPN()
		wr[0].AH, wr[0].RemoteQPN, wr[0].RemoteQKey = n.ah, n.remoteQPN, n.remoteQKey
	}
	for range t.count {
		if err := n.qp.PostSend(wr); err != nil {
			t.out.printf("failed to post sends: %d\n", -1)
			return -1
		}
	}
	return 0
}

// pollCQs waits until each connected node's CQ (send or receive) has
// given count completions, of any status, as poll_cqs does (sleeping on
// the completion channel instead of spinning). A udaddy server answers
// the sender of its first receive.
func (t *cmTest) pollCQs(index int) int {
	var wc [8]verbs.WorkCompletion
	for _, n := range t.nodes {
		if !n.connected {
			continue
		}
		c := n.cq[index]
		for done := 0; done < t.count; {
			got, err := c.Poll(wc[:])
			if err != nil {
				t.out.printf("%s: failed polling CQ: %d\n", t.prog, -1)
				return -1
			}
			if got == 0 {
				if err := c.Wait(context.Background()); err != nil {
					t.out.printf("%s: failed polling CQ: %d\n", t.prog, -1)
					return -1
				}
				continue
			}
			done += got
			if t.ud && n.ah == nil {
				if err := t.createReplyAH(n, &wc[0]); err != nil {
					t.out.printf("%s: failed to create reply AH\n", t.prog)
					return -1
				}
			}
		}
	}
	return 0
}

// createReplyAH addresses the sender of a UD receive: the address from the
// GRH, the QP from the immediate data, and our own Q_Key.
func (t *cmTest) createReplyAH(n *cmNode, wc *verbs.WorkCompletion) error {
	attr, err := cmAHFromWC(n.id.Context(), n.id.Port(), wc, n.mr.Bytes()[:cmGRHSize])
	if err != nil {
		return err
	}
	if n.ah, err = n.pd.CreateAH(&attr); err != nil {
		return err
	}
	n.remoteQPN = wc.Imm()
	a, err := n.qp.Query()
	if err != nil {
		return err
	}
	n.remoteQKey = a.QKey
	return nil
}

// allocNodes creates the nodes, with their IDs on the client.
func (t *cmTest) allocNodes(client bool) error {
	t.nodes = make([]*cmNode, t.connections)
	for i := range t.nodes {
		t.nodes[i] = &cmNode{}
		if client {
			id, err := t.ch.CreateID(t.portSpace())
			if err != nil {
				return err
			}
			t.nodes[i].id = id
		}
	}
	return nil
}

// destroyNodes frees what each node holds, the ID last.
func (t *cmTest) destroyNodes() {
	for _, n := range t.nodes {
		if n.id == nil {
			continue
		}
		if n.ah != nil {
			n.ah.Close()
		}
		if n.qp != nil {
			n.qp.Close()
		}
		for i := range n.cq {
			if n.cq[i] != nil && (i == cmSendCQ || n.cq[i] != n.cq[cmSendCQ]) {
				n.cq[i].Close()
			}
			if n.cch[i] != nil {
				n.cch[i].Close()
			}
		}
		if n.mr != nil {
			n.mr.Close()
		}
		if n.pd != nil {
			n.pd.Close()
		}
		n.id.Close()
	}
}

// closeChannels closes every channel the run opened. Migrated IDs keep
// using the verbs contexts of the channel they were bound on, which
// closes them, so the old channels stay open until the end.
func (t *cmTest) closeChannels() {
	for i := len(t.channels) - 1; i >= 0; i-- {
		t.channels[i].Close()
	}
}

// migrateChannel moves the listener (if any) and every node's ID to a new
// event channel (cmatose -m).
func (t *cmTest) migrateChannel(listen *cm.ID) int {
	t.out.printf("migrating to new event channel\n")
	ch, err := cm.NewChannel()
	if err != nil {
		t.errw.printf("%s: failed to create event channel: %s\n", t.prog, cmStrerror(err))
		return -1
	}
	t.channels = append(t.channels, ch)
	if listen != nil {
		err = listen.Migrate(ch)
	}
	for _, n := range t.nodes {
		if err != nil {
			break
		}
		if n.id != nil {
			err = n.id.Migrate(ch)
		}
	}
	if err != nil {
		t.errw.printf("%s: failure migrating to channel: %s\n", t.prog, cmStrerror(err))
		return -1
	}
	t.ch = ch
	return 0
}

// connectNode takes one client node through address and route resolution
// to the connection (addr_handler, route_handler, and the ESTABLISHED
// event). It returns non-zero to stop the event loop, and stop when the C
// program would return at once.
func (t *cmTest) connectNode(n *cmNode, src, dst netip.AddrPort, route func(*cmNode) int) (ret int, stop bool) {
	ctx := context.Background()
	if err := n.id.ResolveAddr(ctx, src, dst); err != nil {
		if ee, ok := cmEventError(err); ok {
			return t.eventError(ee), false
		}
		t.errw.printf("%s: failure getting addr: %s\n", t.prog, cmStrerror(err))
		t.connectsLeft--
		return -1, true
	}
	// addr_handler
	if t.setTOS {
		if err := n.id.SetTOS(t.tos); err != nil {
			t.errw.printf("%s: set TOS option failed: %s\n", t.prog, cmStrerror(err))
		}
	}
	if t.setTimeout {
		if err := n.id.SetOption(cm.OptionACKTimeout, []byte{t.timeout}); err != nil {
			t.errw.printf("%s: set ack timeout option failed: %s\n", t.prog, cmStrerror(err))
		}
	}
	if err := n.id.ResolveRoute(ctx); err != nil {
		if ee, ok := cmEventError(err); ok {
			return t.eventError(ee), false
		}
		t.errw.printf("%s: resolve route failed: %s\n", t.prog, cmStrerror(err))
		t.connectsLeft--
		return -1, false
	}
	// route_handler
	if ret := route(n); ret != 0 {
		t.connectsLeft--
		return ret, false
	}
	return 0, false
}

// connect sends the connection request of a node whose QP is ready and
// waits for the connection: the ESTABLISHED event.
func (t *cmTest) connect(n *cmNode, p cm.ConnParam) (cm.Event, int) {
	ev, err := n.id.Connect(context.Background(), p)
	if err != nil {
		if ee, ok := cmEventError(err); ok {
			t.out.printf("%s: event: %s, error: %d\n", t.prog, ee.Event, ee.Status)
			return ev, ee.Status
		}
		t.errw.printf("%s: failure connecting: %s\n", t.prog, cmStrerror(err))
		return ev, -1
	}
	return ev, 0
}

// request waits for the next connection request on the listener. It
// returns the new ID, or the status of a failure event.
func (t *cmTest) request(listen *cm.ID) (*cm.ID, cm.Event, int) {
	id, ev, err := listen.GetRequest(context.Background())
	if err != nil {
		if ee, ok := cmEventError(err); ok {
			return nil, ev, t.eventError(ee)
		}
		t.errw.printf("%s: failure in rdma_get_cm_event in connect events: %s\n", t.prog, cmStrerror(err))
		return nil, ev, -1
	}
	return id, ev, 0
}

// takeNode gives a connection request a node (connect_handler's start),
// or rejects it when all are taken.
func (t *cmTest) takeNode(id *cm.ID) *cmNode {
	if t.connIndex == len(t.nodes) {
		t.out.printf("%s: failing connection request\n", t.prog)
		id.Reject(nil)
		id.Close()
		return nil
	}
	n := t.nodes[t.connIndex]
	t.connIndex++
	n.id = id
	return n
}

// failNode undoes takeNode after a failure: the request is rejected.
func (t *cmTest) failNode(n *cmNode) {
	id := n.id
	t.connectsLeft--
	t.out.printf("%s: failing connection request\n", t.prog)
	id.Reject(nil)
	t.destroyNode(n)
}

func (t *cmTest) destroyNode(n *cmNode) {
	saved := t.nodes
	t.nodes = []*cmNode{n}
	t.destroyNodes()
	t.nodes = saved
	*n = cmNode{}
}
