// Command 12scch-receive-completion-queue is librpma's example 12scch-receive-completion-queue in Go.
//
// 12-receive-completion-queue with both CQs on one shared completion
// channel: the ping-pong of 08 with receives completing on a receive CQ
// of their own (10 entries) at both ends.
//
//	12scch-receive-completion-queue server <server_address> <port>
//	12scch-receive-completion-queue client <server_address> <port> <start_value> <rounds> [<sleep>]
package main

import (
	"encoding/binary"

	"github.com/goverbs/goverbs/examples/rpma/internal/common"
	"github.com/goverbs/goverbs/rpma"
	"github.com/goverbs/goverbs/verbs"
)

// example is this program for common.Main.
var example = common.Example{Name: "12scch-receive-completion-queue", Server: server, Client: client, ClientArgs: "<start_value> <rounds> [<sleep>]", ClientNeeds: 2}

func main() { common.Main(example) }

const rcqSize = 10

// connCfg is the connection's configuration: a receive CQ, and one
// completion channel for both CQs.
func connCfg() *rpma.ConnCfg {
	cfg := rpma.NewConnCfg()
	cfg.RCQSize = rcqSize
	cfg.SharedChannel = true
	return cfg
}

// waitAndValidate waits on the shared channel for the next completion,
// which must be of opcode want (wait_and_validate_completion).
func waitAndValidate(e *common.Env, conn *rpma.Conn, want verbs.WCOpcode) error {
	_, err := e.WaitAndValidate(conn, want)
	return err
}

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
	req, err := e.NextConnReq(ep, connCfg())
	if err != nil {
		return err
	}
	if err := req.Recv(b.RecvMR, 0, common.MsgSize, common.RecvCtx); err != nil {
		req.Close()
		return e.Fail("rpma_conn_req_recv", err)
	}
	conn, err := e.Connect(req, nil)
	if err != nil {
		return err
	}
	ret := func() error {
		sent := true // the last answer's send completed
		for {
			if err := waitAndValidate(e, conn, verbs.WCRecv); err != nil {
				return err
			}
			v := binary.NativeEndian.Uint64(b.Recv)
			if v == common.IMDone {
				// The last answer's send may never complete
				// (common.WaitRecv), so it is not waited for.
				return nil
			}
			if !sent {
				if err := waitAndValidate(e, conn, verbs.WCSend); err != nil {
					return err
				}
			}
			e.Printf("SERVER: Value received: %d\n", v)
			binary.NativeEndian.PutUint64(b.Send, v+1)
			if err := conn.Recv(b.RecvMR, 0, common.MsgSize, common.RecvCtx); err != nil {
				return e.Fail("rpma_recv", err)
			}
			e.Printf("SERVER: Value sent: %d\n", v+1)
			if err := conn.Send(b.SendMR, 0, common.MsgSize, rpma.Always, 0); err != nil {
				return e.Fail("rpma_send", err)
			}
			sent = false
		}
	}()
	return common.Join(ret, e.DisconnectAndWaitClose(conn))
}

func client(e *common.Env) error {
	a, err := e.PingPongArgs()
	if err != nil {
		return err
	}
	peer, err := e.ClientPeer()
	if err != nil {
		return err
	}
	b, err := e.MsgBufs(peer, 1)
	if err != nil {
		return err
	}
	conn, err := e.ClientConnect(peer, connCfg(), nil)
	if err != nil {
		return err
	}
	ret := func() error {
		for a.Rounds--; a.Rounds != 0; a.Rounds-- {
			if err := conn.Recv(b.RecvMR, 0, common.MsgSize, common.RecvCtx); err != nil {
				return e.Fail("rpma_recv", err)
			}
			e.Printf("CLIENT: Value sent: %d\n", a.Counter)
			binary.NativeEndian.PutUint64(b.Send, a.Counter)
			if err := conn.Send(b.SendMR, 0, common.MsgSize, rpma.Always, 0); err != nil {
				return e.Fail("rpma_send", err)
			}
			if err := waitAndValidate(e, conn, verbs.WCSend); err != nil {
				return err
			}
			if err := waitAndValidate(e, conn, verbs.WCRecv); err != nil {
				return err
			}
			a.Counter = binary.NativeEndian.Uint64(b.Recv)
			e.Printf("CLIENT: Value received: %d\n", a.Counter)
			e.SleepUsec(a.SleepUsec)
		}
		return nil
	}()
	binary.NativeEndian.PutUint64(b.Send, common.IMDone)
	if err := conn.Send(b.SendMR, 0, common.MsgSize, rpma.OnError, 0); err != nil {
		ret = common.Join(ret, e.Fail("rpma_send", err))
	}
	return common.Join(ret, e.DisconnectAndWaitClose(conn))
}
