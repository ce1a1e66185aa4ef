// Command 08srq-simple-messages-ping-pong-with-srq is librpma's example 08srq-simple-messages-ping-pong-with-srq in Go.
//
// The ping-pong of 08-messages-ping-pong with a server that receives
// through a shared receive queue, with its completions on the SRQ's
// receive CQ (default), the connection's main CQ ("m") or the
// connection's receive CQ ("r"): the client sends a counter (an 8-byte
// uint64 in host byte order), the server answers with the counter plus
// one, for a number of rounds; then the client sends UINT64_MAX ("I'm
// done").
//
//	08srq-simple-messages-ping-pong-with-srq server <server_address> <port> [m|r]
//	08srq-simple-messages-ping-pong-with-srq client <server_address> <port> <seed> <rounds> [<sleep>]
package main

import (
	"encoding/binary"
	"errors"

	"github.com/goverbs/goverbs/examples/rpma/internal/common"
	"github.com/goverbs/goverbs/rpma"
	"github.com/goverbs/goverbs/verbs"
)

// example is this program for common.Main.
var example = common.Example{Name: "08srq-simple-messages-ping-pong-with-srq", Server: server, Client: client, ServerArgs: "[m|r]", ClientArgs: "<seed> <rounds> [<sleep>]", ClientNeeds: 2}

func main() { common.Main(example) }

func client(e *common.Env) error {
	return e.PingPongClient(true, "Value sent: %d\n", "Value received: %d\n")
}

func server(e *common.Env) error {
	mode := byte('s') // the SRQ's receive CQ
	if a, ok := e.Arg(0); ok {
		switch a {
		case "m", "r":
			mode = a[0]
		default:
			e.Eprintf("The third parameter should be one of m or r (%s given)\n", a)
			return common.Exit(-1)
		}
	}
	peer, err := e.ServerPeer()
	if err != nil {
		return err
	}
	srqCfg := rpma.NewSRQCfg()
	if mode != 's' {
		srqCfg.RCQSize = 0
	}
	srq, err := peer.NewSRQ(srqCfg)
	if err != nil {
		return e.Fail("rpma_srq_new", err)
	}
	e.AtExit(func() { srq.Close() })
	cfg := rpma.NewConnCfg()
	if mode == 'r' {
		cfg.RCQSize = 10
	}
	cfg.SRQ = srq
	ep, err := e.Listen(peer)
	if err != nil {
		return err
	}
	b, err := e.MsgBufs(peer, 1)
	if err != nil {
		return err
	}
	if err := srq.Recv(b.RecvMR, 0, common.MsgSize, common.RecvCtx); err != nil {
		return e.Fail("rpma_srq_recv", err)
	}
	conn, err := e.ServerAccept(ep, cfg, nil)
	if err != nil {
		return err
	}
	qpNum := conn.QPNum()
	var rcq *rpma.CQ
	switch mode {
	case 's':
		rcq = srq.RCQ()
	case 'm':
		rcq = conn.CQ()
	case 'r':
		rcq = conn.RCQ()
	}
	ret := func() error {
		var wc [1]verbs.WorkCompletion
		for {
			recvDone, sendDone := false, false
			for !recvDone {
				if err := e.CQWait(rcq); err != nil {
					return err
				}
				n, err := rcq.GetWC(wc[:])
				if err != nil && !errors.Is(err, rpma.ErrNoCompletion) {
					return e.Fail("rpma_cq_get_wc", err)
				}
				if n > 0 {
					if err := e.ValidateWC(&wc[0], common.RecvCtx, &sendDone, &recvDone); err != nil {
						return err
					}
				}
			}
			v := binary.NativeEndian.Uint64(b.Recv)
			if v == common.IMDone {
				return nil
			}
			if wc[0].QPNum != qpNum {
				e.Eprintf("Error: number of QP (qp_num) in the received completion (%d) differs from the one of the connection (%d)\n",
					wc[0].QPNum, qpNum)
				return common.Exit(-1)
			}
			e.Printf("Value received: %d\n", v)
			binary.NativeEndian.PutUint64(b.Send, v+1)
			if err := srq.Recv(b.RecvMR, 0, common.MsgSize, common.RecvCtx); err != nil {
				return e.Fail("rpma_srq_recv", err)
			}
			e.Printf("Value sent: %d\n", v+1)
			if err := conn.Send(b.SendMR, 0, common.MsgSize, rpma.OnError, 0); err != nil {
				return e.Fail("rpma_send", err)
			}
		}
	}()
	conn.Disconnect()
	e.DeleteConn(conn)
	return ret
}
