// Command 08-messages-ping-pong is librpma's example 08-messages-ping-pong in Go.
//
// The client sends a counter (an 8-byte uint64 in host byte order), the
// server answers with the counter plus one, for a number of rounds; then
// the client sends UINT64_MAX ("I'm done").
//
//	08-messages-ping-pong server <server_address> <port>
//	08-messages-ping-pong client <server_address> <port> <seed> <rounds> [<sleep>]
package main

import (
	"encoding/binary"

	"github.com/goverbs/goverbs/examples/rpma/internal/common"
	"github.com/goverbs/goverbs/rpma"
)

// example is this program for common.Main.
var example = common.Example{Name: "08-messages-ping-pong", Server: server, Client: client, ClientArgs: "<seed> <rounds> [<sleep>]", ClientNeeds: 2}

func main() { common.Main(example) }

func server(e *common.Env) error {
	peer, err := e.ServerPeer()
	if err != nil {
		return err
	}
	ep, err := e.Listen(peer)
	if err != nil {
		return err
	}
	b, err := e.MsgBufs(peer, 1)
	if err != nil {
		return err
	}
	req, err := e.NextConnReq(ep, nil)
	if err != nil {
		return err
	}
	// The first message of the client may come as soon as it connects.
	if err := req.Recv(b.RecvMR, 0, common.MsgSize, common.RecvCtx); err != nil {
		req.Close()
		return e.Fail("rpma_conn_req_recv", err)
	}
	conn, err := e.Connect(req, nil)
	if err != nil {
		return err
	}
	cq := conn.CQ()
	sendDone, recvDone := true, false
	var ret error
	for {
		// The receive first: after "I'm done" the last answer's send
		// may never complete (common.WaitRecv). Its completion is taken
		// before the send buffer is written again.
		if ret = e.WaitRecv(cq, common.RecvCtx, &sendDone, &recvDone); ret != nil {
			break
		}
		v := binary.NativeEndian.Uint64(b.Recv)
		if v == common.IMDone {
			break
		}
		if ret = e.WaitSendRecv(cq, common.RecvCtx, &sendDone, &recvDone); ret != nil {
			break
		}
		e.Printf("Value received: %d\n", v)
		binary.NativeEndian.PutUint64(b.Send, v+1)
		if err := conn.Recv(b.RecvMR, 0, common.MsgSize, common.RecvCtx); err != nil {
			ret = e.Fail("rpma_recv", err)
			break
		}
		e.Printf("Value sent: %d\n", v+1)
		if err := conn.Send(b.SendMR, 0, common.MsgSize, rpma.Always, 0); err != nil {
			ret = e.Fail("rpma_send", err)
			break
		}
		sendDone, recvDone = false, false
	}
	return common.Join(ret, e.DisconnectAndWaitClose(conn))
}

func client(e *common.Env) error {
	return e.PingPongClient(false, "Value sent: %d\n", "Value received: %d\n")
}
