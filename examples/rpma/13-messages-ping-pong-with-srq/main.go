// Command 13-messages-ping-pong-with-srq is librpma's example 13-messages-ping-pong-with-srq in Go.
//
// The server takes clients (up to 10) until none came for <timeout>
// seconds (5 by default), posting one receive of a slot of its buffers
// for each to a shared receive queue (whose receive CQ they all share);
// then it plays the ping-pong of 08 with all of them at once, telling
// them apart by the completions' QP numbers and answering from the slot
// the message arrived in.
//
//	13-messages-ping-pong-with-srq server <server_address> <port> [<timeout>]
//	13-messages-ping-pong-with-srq client <server_address> <port> <seed> <rounds> [<sleep>]
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/goverbs/goverbs/examples/rpma/internal/common"
	"github.com/goverbs/goverbs/rpma"
	"github.com/goverbs/goverbs/verbs"
)

// example is this program for common.Main.
var example = common.Example{Name: "13-messages-ping-pong-with-srq", Server: server, Client: client, ServerArgs: "[<timeout>]", ClientArgs: "<seed> <rounds> [<sleep>]", ClientNeeds: 2}

func main() { common.Main(example) }

const (
	clientMax      = 10
	defaultTimeout = 5 // seconds
)

func client(e *common.Env) error {
	pid := os.Getpid()
	return e.PingPongClient(true, fmt.Sprintf("[client #%d] value sent: %%d\n", pid),
		fmt.Sprintf("[client #%d] value received: %%d\n", pid))
}

// srvConn is a connection of the server and its QP number.
type srvConn struct {
	conn  *rpma.Conn
	qpNum uint32
}

func server(e *common.Env) error {
	timeout := defaultTimeout * 1000
	if a, ok := e.Arg(0); ok {
		timeout = common.Atoi(a) * 1000
	}
	if timeout <= 0 {
		a, _ := e.Arg(0)
		e.Eprintf("<timeout> should be a positive number of seconds (%s given)\n", a)
		return common.Exit(-1)
	}
	peer, err := e.ServerPeer()
	if err != nil {
		return err
	}
	srq, err := peer.NewSRQ(nil)
	if err != nil {
		return e.Fail("rpma_srq_new", err)
	}
	e.AtExit(func() { srq.Close() })
	cfg := rpma.NewConnCfg()
	cfg.SRQ = srq
	ep, err := e.Listen(peer)
	if err != nil {
		return err
	}
	b, err := e.MsgBufs(peer, clientMax)
	if err != nil {
		return err
	}
	var conns []srvConn
	defer func() {
		for _, c := range conns {
			c.conn.Disconnect()
			e.DeleteConn(c.conn)
		}
	}()
	for {
		ctx, cancel := context.WithTimeout(e.Ctx, time.Duration(timeout)*time.Millisecond)
		req, err := ep.NextConnReq(ctx, cfg)
		timedOut := errors.Is(ctx.Err(), context.DeadlineExceeded)
		cancel()
		if err != nil {
			if timedOut && e.Ctx.Err() == nil {
				break
			}
			return e.Fail("rpma_ep_next_conn_req", err)
		}
		slot := len(conns)
		if slot == clientMax {
			e.Eprintf("No free slot for a new connection request.\n")
			req.Close()
			return common.Exit(-1)
		}
		// The first message of the client may come as soon as it
		// connects.
		if err := srq.Recv(b.RecvMR, uint64(slot*common.MsgSize), common.MsgSize, uint64(slot)); err != nil {
			req.Close()
			return e.Fail("rpma_srq_recv", err)
		}
		conn, err := e.Connect(req, nil)
		if err != nil {
			return err
		}
		conns = append(conns, srvConn{conn, conn.QPNum()})
		e.Printf("The client #%d has been connected.\n", len(conns))
	}
	e.Printf("Server ended listening.\n")

	rcq := srq.RCQ()
	findQP := func(qpNum uint32) int {
		if len(conns) == 1 {
			return 0
		}
		for i, c := range conns {
			if c.qpNum == qpNum {
				return i
			}
		}
		e.Eprintf("Unable to find the connection [qp#%d]\n", int32(qpNum))
		return -1
	}
	var wc [clientMax]verbs.WorkCompletion
	done := 0
	err = func() error {
		for done < len(conns) {
			if err := e.CQWait(rcq); err != nil {
				return err
			}
			n, err := rcq.GetWC(wc[:len(conns)])
			if errors.Is(err, rpma.ErrNoCompletion) {
				continue
			}
			if err != nil {
				return e.Fail("rpma_cq_get_wc", err)
			}
			for i := range n {
				w := &wc[i]
				if w.Status != verbs.WCSuccess {
					e.Eprintf("rpma_srq_recv() failed: %s\n", w.Status)
					return common.Exit(-1)
				}
				if w.Opcode != verbs.WCRecv {
					e.Eprintf("received unexpected wc.opcode value (%d != %d)\n", w.Opcode, verbs.WCRecv)
					return common.Exit(-1)
				}
				idx := findQP(w.QPNum)
				if idx < 0 {
					return common.Exit(-1)
				}
				slot := w.WRID
				if slot >= clientMax {
					return common.Exit(-1)
				}
				off := slot * common.MsgSize
				v := binary.NativeEndian.Uint64(b.Recv[off:])
				if v == common.IMDone {
					done++
					continue
				}
				qp := int32(conns[idx].qpNum)
				e.Printf("[server] value received: %d from the connection [qp#%d]\n", v, qp)
				if err := srq.Recv(b.RecvMR, off, common.MsgSize, slot); err != nil {
					return e.Fail("rpma_srq_recv", err)
				}
				// The reply goes out from the connection's own send slot, not
				// from the receive slot the message landed in (librpma's C
				// server uses that one): the send is unsignaled, so nothing
				// says when it has left, and another client's message can
				// land in the same receive slot meanwhile and overwrite the
				// reply before it goes (seen on a loaded test bed). A client
				// sends its next message only after it has the reply, so
				// its previous reply has left by the time its slot is
				// written again.
				soff := uint64(idx) * common.MsgSize
				binary.NativeEndian.PutUint64(b.Send[soff:], v+1)
				e.Printf("[server] value sent: %d from the connection [qp#%d]\n", v+1, qp)
				if err := conns[idx].conn.Send(b.SendMR, soff, common.MsgSize, rpma.OnError, 0); err != nil {
					return e.Fail("rpma_send", err)
				}
			}
		}
		return nil
	}()
	if done != len(conns) {
		e.Eprintf("Unable to receive data from all connections\n")
		return common.Join(err, common.Exit(-1))
	}
	return err
}
