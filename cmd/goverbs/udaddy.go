package main

// goverbs udaddy: rdma-core's udaddy (librdmacm/examples/udaddy.c,
// rdma-core 44): UD datagrams between QPs that found each other through
// the RDMA connection manager's UDP port space (SIDR). Either end may be
// the C tool.
//
// The client resolves the server's address and route, sends a SIDR
// request (its receives already posted), learns the server's QP, Q_Key
// and path from the reply, and sends -C messages as SEND_WITH_IMM whose
// immediate data is its QP number; then it waits for as many replies.
// The server accepts -c requests, waits for -C messages on each
// connection, addresses the sender from the first one's GRH and immediate
// data, and sends -C replies. Like the C tool it uses port 7174: -p is the
// port space.

import (
	"context"
	"io"
	"strconv"
	"strings"

	"github.com/goverbs/goverbs/cm"
	"github.com/goverbs/goverbs/verbs"
)

func init() {
	commands["udaddy"] = command{"UD datagrams over the RDMA CM (SIDR), like udaddy", runUdaddy}
}

const udaddyUsage = `usage: %s
	[-s server_address]
	[-b bind_address]
	[-f address_format]
	    name, ip, ipv6, or gid
	[-P port_space]
	    udp or ipoib
	[-c connections]
	[-C message_count]
	[-S message_size]
	[-t type_of_service]
	[-p port_space - %#x for UDP (default), %#x for IPOIB]
`

// Port spaces (enum rdma_port_space) that udaddy's usage names.
const (
	cmPSIPoIB = 0x0002
	cmPSUDP   = 0x0111
)

// cmParseTestArgs parses the command line of udaddy or cmatose; a status
// >= 0 means stop with it.
func cmParseTestArgs(t *cmTest, args []string, optstring, cmd, usage string) int {
	usageOut := func() int {
		if t.ud {
			t.out.printf(usage, "goverbs "+cmd, cmPSUDP, cmPSIPoIB)
		} else {
			t.out.printf(usage, "goverbs "+cmd)
		}
		return 1
	}
	atoi := func(what, s string, min int) (int, bool) {
		n, err := cmAtoi(s)
		if err != nil || n < min {
			t.errw.printf("goverbs %s: invalid %s %q\n", cmd, what, s)
			return 0, false
		}
		return n, true
	}
	opts, _ := cmGetopt(args, optstring)
	for _, op := range opts {
		var ok = true
		switch op.opt {
		case 's':
			t.dst = op.arg
		case 'b':
			t.src = op.arg
		case 'c':
			t.connections, ok = atoi("connection count", op.arg, 0)
		case 'C':
			t.count, ok = atoi("message count", op.arg, 0)
		case 'S':
			t.size, ok = atoi("message size", op.arg, 0)
		case 't':
			v, err := strconv.ParseUint(op.arg, 0, 8)
			if err != nil {
				t.errw.printf("goverbs %s: invalid type of service %q\n", cmd, op.arg)
				return 1
			}
			t.setTOS, t.tos = true, uint8(v)
		case 'f':
			switch a := strings.ToLower(op.arg); {
			case strings.HasPrefix(a, "ip"), strings.HasPrefix(a, "name"):
			case strings.HasPrefix(a, "gid"):
				t.errw.printf("goverbs %s: -f gid: AF_IB addresses are not supported\n", cmd)
				return 1
			default:
				t.errw.printf("Warning: unknown address format\n")
			}
		case 'P':
			a := strings.ToLower(op.arg)
			switch {
			case t.ud && strings.HasPrefix(a, "udp"), !t.ud && strings.HasPrefix(a, "tcp"):
			case t.ud && strings.HasPrefix(a, "ipoib"), !t.ud && strings.HasPrefix(a, "ib"):
				t.errw.printf("goverbs %s: -P %s: port space not supported\n", cmd, op.arg)
				return 1
			default:
				t.errw.printf("Warning: unknown port space format\n")
			}
		case 'p':
			if !t.ud {
				t.port = op.arg
				break
			}
			// udaddy: the port space, for backwards compatibility.
			v, err := strconv.ParseInt(op.arg, 0, 32)
			if err != nil || v != cmPSUDP {
				t.errw.printf("goverbs %s: -p %s: port space not supported (only %#x, UDP)\n", cmd, op.arg, cmPSUDP)
				return 1
			}
		case 'm':
			t.migrate = true
		case 'a':
			v, err := strconv.ParseUint(op.arg, 0, 8)
			if err != nil {
				t.errw.printf("goverbs %s: invalid ACK timeout %q\n", cmd, op.arg)
				return 1
			}
			t.setTimeout, t.timeout = true, uint8(v)
		default:
			cmGetoptError(t.errw, "goverbs "+cmd, op)
			return usageOut()
		}
		if !ok {
			return 1
		}
	}
	if t.size == 0 {
		t.count = 0 // create_message: nothing to send
	}
	return -1
}

func runUdaddy(args []string, stdout, stderr io.Writer) int {
	t := &cmTest{prog: "udaddy", out: &cmOut{w: stdout}, errw: &cmOut{w: stderr}, ud: true,
		connections: 1, count: 10, size: 100, port: "7174"}
	if st := cmParseTestArgs(t, args, "s:b:c:C:S:t:p:P:f:", "udaddy", udaddyUsage); st >= 0 {
		return st
	}
	return t.run(t.udServer, t.udClient)
}

// run is the main of udaddy and cmatose.
func (t *cmTest) run(server, client func() int) int {
	t.connectsLeft = t.connections
	ch, _ := cmNewChannel(t.errw)
	if ch == nil {
		return 1
	}
	t.ch = ch
	t.channels = append(t.channels, ch)
	if err := t.allocNodes(t.dst != ""); err != nil {
		t.errw.printf("goverbs %s: %v\n", t.prog, err)
		t.closeChannels()
		return 1
	}
	var ret int
	if t.dst != "" {
		ret = client()
	} else {
		ret = server()
	}
	t.out.printf("test complete\n")
	t.destroyNodes()
	t.closeChannels()
	t.out.printf("return status %d\n", ret)
	return cmExit(ret)
}

// verifyParams checks that a message fits the path MTU
// (verify_test_params).
func (t *cmTest) verifyParams(n *cmNode) int {
	port, err := n.id.Context().QueryPort(int(n.id.Port()))
	if err != nil {
		return -1
	}
	if mtu := port.ActiveMTU.Bytes(); t.count != 0 && t.size > mtu {
		t.out.printf("udaddy: message_size %d is larger than active mtu %d\n", t.size, mtu)
		return -22 // -EINVAL
	}
	return 0
}

// udServer is udaddy's run_server.
func (t *cmTest) udServer() int {
	t.out.printf("udaddy: starting server\n")
	listen, err := t.ch.CreateID(cm.UDP)
	if err != nil {
		t.errw.printf("udaddy: listen request failed: %s\n", cmStrerror(err))
		return -1
	}
	defer listen.Close()
	src, _, code, msg := t.addrs(true)
	if code != 0 {
		t.out.printf("udaddy: getrdmaaddr error: %s\n", msg)
		return code
	}
	if err := listen.Bind(src); err != nil {
		t.errw.printf("udaddy: bind address failed: %s\n", cmStrerror(err))
		return -1
	}
	if err := listen.Listen(0); err != nil {
		t.errw.printf("udaddy: failure trying to listen: %s\n", cmStrerror(err))
		return -1
	}

	// connect_events; the server goes on whatever it returns.
	for ret := 0; t.connectsLeft > 0 && ret == 0; {
		var id *cm.ID
		if id, _, ret = t.request(listen); ret != 0 {
			break
		}
		ret = t.udConnectHandler(id)
	}

	if t.count == 0 {
		return 0
	}
	t.out.printf("receiving data transfers\n")
	if ret := t.pollCQs(cmRecvCQ); ret != 0 {
		return ret
	}
	t.out.printf("sending replies\n")
	for _, n := range t.nodes {
		if ret := t.postSends(n, verbs.SendSignaled); ret != 0 {
			return ret
		}
	}
	if ret := t.pollCQs(cmSendCQ); ret != 0 {
		return ret
	}
	t.out.printf("data transfers complete\n")
	return 0
}

// udConnectHandler answers a SIDR request (connect_handler).
func (t *cmTest) udConnectHandler(id *cm.ID) int {
	n := t.takeNode(id)
	if n == nil {
		return -12 // -ENOMEM
	}
	ret := t.verifyParams(n)
	if ret == 0 {
		ret = t.initNode(n)
	}
	if ret == 0 {
		ret = t.postRecvs(n)
	}
	if ret == 0 {
		if err := n.id.Accept(context.Background(), cm.ConnParam{QPNum: n.qp.QPN()}); err != nil {
			t.errw.printf("udaddy: failure accepting: %s\n", cmStrerror(err))
			ret = -1
		}
	}
	if ret != 0 {
		t.failNode(n)
		return ret
	}
	n.connected = true
	t.connectsLeft--
	return 0
}

// udClient is udaddy's run_client.
func (t *cmTest) udClient() int {
	t.out.printf("udaddy: starting client\n")
	src, dst, code, msg := t.addrs(false)
	if code != 0 {
		t.out.printf("udaddy: getaddrinfo error: %s\n", msg)
		return code
	}
	t.out.printf("udaddy: connecting\n")
	for _, n := range t.nodes {
		ret, stop := t.connectNode(n, src, dst, t.udRouteHandler)
		if stop || ret != 0 {
			return ret
		}
	}
	if t.count == 0 {
		return 0
	}
	t.out.printf("initiating data transfers\n")
	for _, n := range t.nodes {
		if ret := t.postSends(n, 0); ret != 0 {
			return ret
		}
	}
	t.out.printf("receiving data transfers\n")
	if ret := t.pollCQs(cmRecvCQ); ret != 0 {
		return ret
	}
	t.out.printf("data transfers complete\n")
	return 0
}

// udRouteHandler readies a client node and sends its SIDR request
// (route_handler), then takes the reply (resolved_handler).
func (t *cmTest) udRouteHandler(n *cmNode) int {
	if ret := t.verifyParams(n); ret != 0 {
		return ret
	}
	if ret := t.initNode(n); ret != 0 {
		return ret
	}
	if ret := t.postRecvs(n); ret != 0 {
		return ret
	}
	ev, ret := t.connect(n, cm.ConnParam{})
	if ret != 0 {
		return ret
	}
	// resolved_handler
	n.remoteQPN, n.remoteQKey = ev.UD.QPNum, ev.UD.QKey
	ah := ev.UD.AH
	var err error
	if n.ah, err = n.pd.CreateAH(&ah); err != nil {
		t.out.printf("udaddy: failure creating address handle\n")
		return -1
	}
	n.connected = true
	t.connectsLeft--
	return 0
}
