package main

// goverbs ucmatose: rdma-core's ucmatose (librdmacm/examples/cmatose.c,
// rdma-core 44): RC connections through the RDMA connection manager and
// SENDs over them. Either end may be the C tool.
//
// The client connects -c times (its receives already posted); the server
// accepts, SENDs -C messages on each connection and waits for their
// completions, then for -C messages from the client, which sends them
// once it has received the server's; then the server disconnects and both
// wait for each connection's DISCONNECTED event.

import (
	"context"
	"io"

	"github.com/goverbs/goverbs/cm"
)

func init() {
	commands["ucmatose"] = command{"RC connections and SENDs over the RDMA CM, like ucmatose", runUcmatose}
}

const ucmatoseUsage = `usage: %s
	[-s server_address]
	[-b bind_address]
	[-f address_format]
	    name, ip, ipv6, or gid
	[-P port_space]
	    tcp or ib
	[-c connections]
	[-C message_count]
	[-S message_size]
	[-t type_of_service]
	[-p port_number]
	[-m(igrate)]
	[-a ack_timeout]
`

func runUcmatose(args []string, stdout, stderr io.Writer) int {
	t := &cmTest{prog: "cmatose", out: &cmOut{w: stdout}, errw: &cmOut{w: stderr},
		connections: 1, count: 10, size: 100, port: "7471"}
	if st := cmParseTestArgs(t, args, "s:b:f:P:c:C:S:t:p:a:m", "ucmatose", ucmatoseUsage); st >= 0 {
		return st
	}
	return t.run(t.rcServer, t.rcClient)
}

// established counts a node's connection (the ESTABLISHED event).
func (t *cmTest) established(n *cmNode) {
	n.connected, n.established = true, true
	t.connectsLeft--
	t.disconnectsLeft++
}

// disconnectEvents waits for each connection's DISCONNECTED event and
// answers it with a disconnect (disconnect_events).
func (t *cmTest) disconnectEvents() int {
	for _, n := range t.nodes {
		for n.established {
			ev, err := n.id.Event(context.Background())
			if err != nil {
				t.errw.printf("cmatose: failure in rdma_get_cm_event in disconnect events: %s\n", cmStrerror(err))
				return -1
			}
			switch ev.Type {
			case cm.EventDisconnected:
				n.id.Disconnect()
				n.established = false
				t.disconnectsLeft--
			case cm.EventAddrError, cm.EventRouteError, cm.EventConnectError, cm.EventUnreachable, cm.EventRejected:
				t.out.printf("cmatose: event: %s, error: %d\n", ev.Type, ev.Status)
				t.connectsLeft--
				return ev.Status
			}
		}
	}
	return 0
}

// rcServer is cmatose's run_server.
func (t *cmTest) rcServer() int {
	t.out.printf("cmatose: starting server\n")
	listen, err := t.ch.CreateID(cm.TCP)
	if err != nil {
		t.errw.printf("cmatose: listen request failed: %s\n", cmStrerror(err))
		return -1
	}
	defer listen.Close()
	src, _, code, msg := t.addrs(true)
	if code != 0 {
		t.out.printf("cmatose: getrdmaaddr error: %s\n", msg)
		return code
	}
	if err := listen.Bind(src); err != nil {
		t.errw.printf("cmatose: bind address failed: %s\n", cmStrerror(err))
		return -1
	}
	if err := listen.Listen(0); err != nil {
		t.errw.printf("cmatose: failure trying to listen: %s\n", cmStrerror(err))
		return -1
	}

	// connect_events
	ret := 0
	for t.connectsLeft > 0 && ret == 0 {
		var id *cm.ID
		var req cm.Event
		if id, req, ret = t.request(listen); ret != 0 {
			break
		}
		ret = t.rcConnectHandler(id, req)
	}
	if ret != 0 {
		return ret
	}

	if t.count != 0 {
		t.out.printf("initiating data transfers\n")
		for _, n := range t.nodes {
			if ret := t.postSends(n, 0); ret != 0 {
				return ret
			}
		}
		t.out.printf("completing sends\n")
		if ret := t.pollCQs(cmSendCQ); ret != 0 {
			return ret
		}
		t.out.printf("receiving data transfers\n")
		if ret := t.pollCQs(cmRecvCQ); ret != 0 {
			return ret
		}
		t.out.printf("data transfers complete\n")
	}
	if t.migrate {
		if ret := t.migrateChannel(listen); ret != 0 {
			return ret
		}
	}
	t.out.printf("cmatose: disconnecting\n")
	for _, n := range t.nodes {
		if !n.connected {
			continue
		}
		n.connected = false
		n.id.Disconnect()
	}
	ret = t.disconnectEvents()
	t.out.printf("disconnected\n")
	return ret
}

// rcConnectHandler accepts a connection request (connect_handler) and
// waits for the connection (the ESTABLISHED event).
func (t *cmTest) rcConnectHandler(id *cm.ID, req cm.Event) int {
	n := t.takeNode(id)
	if n == nil {
		return -12 // -ENOMEM
	}
	ret := t.initNode(n)
	if ret == 0 && t.setTimeout {
		if err := n.id.SetOption(cm.OptionACKTimeout, []byte{t.timeout}); err != nil {
			t.errw.printf("cmatose: set ack timeout option failed: %s\n", cmStrerror(err))
		}
	}
	if ret == 0 {
		ret = t.postRecvs(n)
	}
	if ret != 0 {
		t.failNode(n)
		return ret
	}
	if err := n.id.Accept(context.Background(), cmAcceptParam(n.id, req)); err != nil {
		if ee, ok := cmEventError(err); ok {
			return t.eventError(ee)
		}
		t.errw.printf("cmatose: failure accepting: %s\n", cmStrerror(err))
		t.failNode(n)
		return -1
	}
	t.established(n)
	return 0
}

// rcClient is cmatose's run_client.
func (t *cmTest) rcClient() int {
	t.out.printf("cmatose: starting client\n")
	src, dst, code, msg := t.addrs(false)
	if code != 0 {
		t.out.printf("cmatose: getaddrinfo error: %s\n", msg)
		return code
	}
	t.out.printf("cmatose: connecting\n")
	ret := 0
	for _, n := range t.nodes {
		var stop bool
		ret, stop = t.connectNode(n, src, dst, t.rcRouteHandler)
		if stop {
			return ret
		}
		if ret != 0 {
			break
		}
	}
	if ret == 0 {
		if t.count != 0 {
			t.out.printf("receiving data transfers\n")
			ret = t.pollCQs(cmRecvCQ)
			if ret == 0 {
				t.out.printf("sending replies\n")
				for _, n := range t.nodes {
					if ret = t.postSends(n, 0); ret != 0 {
						break
					}
				}
			}
			if ret == 0 {
				t.out.printf("data transfers complete\n")
			}
		}
		if ret == 0 && t.migrate {
			if ret = t.migrateChannel(nil); ret != 0 {
				return ret
			}
		}
	}
	if ret2 := t.disconnectEvents(); ret2 != 0 {
		ret = ret2
	}
	return ret
}

// rcRouteHandler readies a client node and connects it (route_handler,
// then the ESTABLISHED event).
func (t *cmTest) rcRouteHandler(n *cmNode) int {
	if ret := t.initNode(n); ret != 0 {
		return ret
	}
	if ret := t.postRecvs(n); ret != 0 {
		return ret
	}
	// cmatose asks for no RNR retries; the cm package takes 0 for its
	// default of 7 (infinite), which only matters if the server is late
	// to post its receives, and it posts them before accepting.
	if _, ret := t.connect(n, cm.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 5}); ret != 0 {
		return ret
	}
	t.established(n)
	return 0
}
