// Package udaddy is goverbs udaddy: rdma-core's udaddy (librdmacm/examples/udaddy.c,
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
package udaddy

import (
	"context"
	"io"

	"github.com/goverbs/goverbs/cm"
	"github.com/goverbs/goverbs/internal/tools/cmcommon"
	"github.com/goverbs/goverbs/verbs"
)

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

// Summary is goverbs udaddy's line in goverbs' command list.
const Summary = "UD datagrams over the RDMA CM (SIDR), like udaddy"

// test is one run of udaddy: cmcommon's test, and udaddy's server and client.
type test struct{ *cmcommon.Test }

// Main is goverbs udaddy: args are its arguments after the subcommand; it
// returns the exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	t := test{&cmcommon.Test{Prog: "udaddy", Out: &cmcommon.Out{W: stdout}, Errw: &cmcommon.Out{W: stderr}, UD: true,
		Connections: 1, Count: 10, Size: 100, Port: "7174"}}
	if st := cmcommon.ParseTestArgs(t.Test, args, "s:b:c:C:S:t:p:P:f:", "udaddy", udaddyUsage); st >= 0 {
		return st
	}
	return t.Run(t.udServer, t.udClient)
}

// verifyParams checks that a message fits the path MTU
// (verify_test_params).
func (t test) verifyParams(n *cmcommon.Node) int {
	port, err := n.ID.Context().QueryPort(int(n.ID.Port()))
	if err != nil {
		return -1
	}
	if mtu := port.ActiveMTU.Bytes(); t.Count != 0 && t.Size > mtu {
		t.Out.Printf("udaddy: message_size %d is larger than active mtu %d\n", t.Size, mtu)
		return -22 // -EINVAL
	}
	return 0
}

// udServer is udaddy's run_server.
func (t test) udServer() int {
	t.Out.Printf("udaddy: starting server\n")
	listen, err := t.Ch.CreateID(cm.UDP)
	if err != nil {
		t.Errw.Printf("udaddy: listen request failed: %s\n", cmcommon.Strerror(err))
		return -1
	}
	defer listen.Close()
	src, _, code, msg := t.Addrs(true)
	if code != 0 {
		t.Out.Printf("udaddy: getrdmaaddr error: %s\n", msg)
		return code
	}
	if err := listen.Bind(src); err != nil {
		t.Errw.Printf("udaddy: bind address failed: %s\n", cmcommon.Strerror(err))
		return -1
	}
	if err := listen.Listen(0); err != nil {
		t.Errw.Printf("udaddy: failure trying to listen: %s\n", cmcommon.Strerror(err))
		return -1
	}

	// connect_events; the server goes on whatever it returns.
	for ret := 0; t.ConnectsLeft > 0 && ret == 0; {
		var id *cm.ID
		if id, _, ret = t.Request(listen); ret != 0 {
			break
		}
		ret = t.udConnectHandler(id)
	}

	if t.Count == 0 {
		return 0
	}
	t.Out.Printf("receiving data transfers\n")
	if ret := t.PollCQs(cmcommon.RecvCQ); ret != 0 {
		return ret
	}
	t.Out.Printf("sending replies\n")
	for _, n := range t.Nodes {
		if ret := t.PostSends(n, verbs.SendSignaled); ret != 0 {
			return ret
		}
	}
	if ret := t.PollCQs(cmcommon.SendCQ); ret != 0 {
		return ret
	}
	t.Out.Printf("data transfers complete\n")
	return 0
}

// udConnectHandler answers a SIDR request (connect_handler).
func (t test) udConnectHandler(id *cm.ID) int {
	n := t.TakeNode(id)
	if n == nil {
		return -12 // -ENOMEM
	}
	ret := t.verifyParams(n)
	if ret == 0 {
		ret = t.InitNode(n)
	}
	if ret == 0 {
		ret = t.PostRecvs(n)
	}
	if ret == 0 {
		if err := n.ID.Accept(context.Background(), cm.ConnParam{QPNum: n.QP.QPN()}); err != nil {
			t.Errw.Printf("udaddy: failure accepting: %s\n", cmcommon.Strerror(err))
			ret = -1
		}
	}
	if ret != 0 {
		t.FailNode(n)
		return ret
	}
	n.Connected = true
	t.ConnectsLeft--
	return 0
}

// udClient is udaddy's run_client.
func (t test) udClient() int {
	t.Out.Printf("udaddy: starting client\n")
	src, dst, code, msg := t.Addrs(false)
	if code != 0 {
		t.Out.Printf("udaddy: getaddrinfo error: %s\n", msg)
		return code
	}
	t.Out.Printf("udaddy: connecting\n")
	for _, n := range t.Nodes {
		ret, stop := t.ConnectNode(n, src, dst, t.udRouteHandler)
		if stop || ret != 0 {
			return ret
		}
	}
	if t.Count == 0 {
		return 0
	}
	t.Out.Printf("initiating data transfers\n")
	for _, n := range t.Nodes {
		if ret := t.PostSends(n, 0); ret != 0 {
			return ret
		}
	}
	t.Out.Printf("receiving data transfers\n")
	if ret := t.PollCQs(cmcommon.RecvCQ); ret != 0 {
		return ret
	}
	t.Out.Printf("data transfers complete\n")
	return 0
}

// udRouteHandler readies a client node and sends its SIDR request
// (route_handler), then takes the reply (resolved_handler).
func (t test) udRouteHandler(n *cmcommon.Node) int {
	if ret := t.verifyParams(n); ret != 0 {
		return ret
	}
	if ret := t.InitNode(n); ret != 0 {
		return ret
	}
	if ret := t.PostRecvs(n); ret != 0 {
		return ret
	}
	ev, ret := t.Connect(n, cm.ConnParam{})
	if ret != 0 {
		return ret
	}
	// resolved_handler
	n.RemoteQPN, n.RemoteQKey = ev.UD.QPNum, ev.UD.QKey
	ah := ev.UD.AH
	var err error
	if n.AH, err = n.PD.CreateAH(&ah); err != nil {
		t.Out.Printf("udaddy: failure creating address handle\n")
		return -1
	}
	n.Connected = true
	t.ConnectsLeft--
	return 0
}
