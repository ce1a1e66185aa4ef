// Package ucmatose is goverbs ucmatose: rdma-core's ucmatose (librdmacm/examples/cmatose.c,
// rdma-core 44): RC connections through the RDMA connection manager and
// SENDs over them. Either end may be the C tool.
//
// The client connects -c times (its receives already posted); the server
// accepts, SENDs -C messages on each connection and waits for their
// completions, then for -C messages from the client, which sends them
// once it has received the server's; then the server disconnects and both
// wait for each connection's DISCONNECTED event.
package ucmatose

import (
	"context"
	"io"

	"github.com/goverbs/goverbs/cm"
	"github.com/goverbs/goverbs/internal/tools/cmcommon"
)

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

// Summary is goverbs ucmatose's line in goverbs' command list.
const Summary = "RC connections and SENDs over the RDMA CM, like ucmatose"

// test is one run of ucmatose: cmcommon's test, and ucmatose's server and client.
type test struct{ *cmcommon.Test }

// Main is goverbs ucmatose: args are its arguments after the subcommand; it
// returns the exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	t := test{&cmcommon.Test{Prog: "cmatose", Out: &cmcommon.Out{W: stdout}, Errw: &cmcommon.Out{W: stderr},
		Connections: 1, Count: 10, Size: 100, Port: "7471"}}
	if st := cmcommon.ParseTestArgs(t.Test, args, "s:b:f:P:c:C:S:t:p:a:m", "ucmatose", ucmatoseUsage); st >= 0 {
		return st
	}
	return t.Run(t.rcServer, t.rcClient)
}

// onEstablished counts a node's connection (the ESTABLISHED event).
func (t test) onEstablished(n *cmcommon.Node) {
	n.Connected, n.Established = true, true
	t.ConnectsLeft--
	t.DisconnectsLeft++
}

// disconnectEvents waits for each connection's DISCONNECTED event and
// answers it with a disconnect (disconnect_events).
func (t test) disconnectEvents() int {
	for _, n := range t.Nodes {
		for n.Established {
			ev, err := n.ID.Event(context.Background())
			if err != nil {
				t.Errw.Printf("cmatose: failure in rdma_get_cm_event in disconnect events: %s\n", cmcommon.Strerror(err))
				return -1
			}
			switch ev.Type {
			case cm.EventDisconnected:
				n.ID.Disconnect()
				n.Established = false
				t.DisconnectsLeft--
			case cm.EventAddrError, cm.EventRouteError, cm.EventConnectError, cm.EventUnreachable, cm.EventRejected:
				t.Out.Printf("cmatose: event: %s, error: %d\n", ev.Type, ev.Status)
				t.ConnectsLeft--
				return ev.Status
			}
		}
	}
	return 0
}

// rcServer is cmatose's run_server.
func (t test) rcServer() int {
	t.Out.Printf("cmatose: starting server\n")
	listen, err := t.Ch.CreateID(cm.TCP)
	if err != nil {
		t.Errw.Printf("cmatose: listen request failed: %s\n", cmcommon.Strerror(err))
		return -1
	}
	defer listen.Close()
	src, _, code, msg := t.Addrs(true)
	if code != 0 {
		t.Out.Printf("cmatose: getrdmaaddr error: %s\n", msg)
		return code
	}
	if err := listen.Bind(src); err != nil {
		t.Errw.Printf("cmatose: bind address failed: %s\n", cmcommon.Strerror(err))
		return -1
	}
	if err := listen.Listen(0); err != nil {
		t.Errw.Printf("cmatose: failure trying to listen: %s\n", cmcommon.Strerror(err))
		return -1
	}

	// connect_events
	ret := 0
	for t.ConnectsLeft > 0 && ret == 0 {
		var id *cm.ID
		var req cm.Event
		if id, req, ret = t.Request(listen); ret != 0 {
			break
		}
		ret = t.rcConnectHandler(id, req)
	}
	if ret != 0 {
		return ret
	}

	if t.Count != 0 {
		t.Out.Printf("initiating data transfers\n")
		for _, n := range t.Nodes {
			if ret := t.PostSends(n, 0); ret != 0 {
				return ret
			}
		}
		t.Out.Printf("completing sends\n")
		if ret := t.PollCQs(cmcommon.SendCQ); ret != 0 {
			return ret
		}
		t.Out.Printf("receiving data transfers\n")
		if ret := t.PollCQs(cmcommon.RecvCQ); ret != 0 {
			return ret
		}
		t.Out.Printf("data transfers complete\n")
	}
	if t.Migrate {
		if ret := t.MigrateChannel(listen); ret != 0 {
			return ret
		}
	}
	t.Out.Printf("cmatose: disconnecting\n")
	for _, n := range t.Nodes {
		if !n.Connected {
			continue
		}
		n.Connected = false
		n.ID.Disconnect()
	}
	ret = t.disconnectEvents()
	t.Out.Printf("disconnected\n")
	return ret
}

// rcConnectHandler accepts a connection request (connect_handler) and
// waits for the connection (the ESTABLISHED event).
func (t test) rcConnectHandler(id *cm.ID, req cm.Event) int {
	n := t.TakeNode(id)
	if n == nil {
		return -12 // -ENOMEM
	}
	ret := t.InitNode(n)
	if ret == 0 && t.SetTimeout {
		if err := n.ID.SetOption(cm.OptionACKTimeout, []byte{t.Timeout}); err != nil {
			t.Errw.Printf("cmatose: set ack timeout option failed: %s\n", cmcommon.Strerror(err))
		}
	}
	if ret == 0 {
		ret = t.PostRecvs(n)
	}
	if ret != 0 {
		t.FailNode(n)
		return ret
	}
	if err := n.ID.Accept(context.Background(), cmcommon.AcceptParam(n.ID, req)); err != nil {
		if ee, ok := cmcommon.EventError(err); ok {
			return t.EventError(ee)
		}
		t.Errw.Printf("cmatose: failure accepting: %s\n", cmcommon.Strerror(err))
		t.FailNode(n)
		return -1
	}
	t.onEstablished(n)
	return 0
}

// rcClient is cmatose's run_client.
func (t test) rcClient() int {
	t.Out.Printf("cmatose: starting client\n")
	src, dst, code, msg := t.Addrs(false)
	if code != 0 {
		t.Out.Printf("cmatose: getaddrinfo error: %s\n", msg)
		return code
	}
	t.Out.Printf("cmatose: connecting\n")
	ret := 0
	for _, n := range t.Nodes {
		var stop bool
		ret, stop = t.ConnectNode(n, src, dst, t.rcRouteHandler)
		if stop {
			return ret
		}
		if ret != 0 {
			break
		}
	}
	if ret == 0 {
		if t.Count != 0 {
			t.Out.Printf("receiving data transfers\n")
			ret = t.PollCQs(cmcommon.RecvCQ)
			if ret == 0 {
				t.Out.Printf("sending replies\n")
				for _, n := range t.Nodes {
					if ret = t.PostSends(n, 0); ret != 0 {
						break
					}
				}
			}
			if ret == 0 {
				t.Out.Printf("data transfers complete\n")
			}
		}
		if ret == 0 && t.Migrate {
			if ret = t.MigrateChannel(nil); ret != 0 {
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
func (t test) rcRouteHandler(n *cmcommon.Node) int {
	if ret := t.InitNode(n); ret != 0 {
		return ret
	}
	if ret := t.PostRecvs(n); ret != 0 {
		return ret
	}
	// cmatose asks for no RNR retries; the cm package takes 0 for its
	// default of 7 (infinite), which only matters if the server is late
	// to post its receives, and it posts them before accepting.
	if _, ret := t.Connect(n, cm.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 5}); ret != 0 {
		return ret
	}
	t.onEstablished(n)
	return 0
}
