package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/goverbs/goverbs/rpma"
	"github.com/goverbs/goverbs/verbs"
)

// 13-messages-ping-pong-with-srq: the server takes clients (up to 10)
// until none came for <timeout> seconds (5 by default), posting one
// receive of a slot of its buffers for each to a shared receive queue
// (whose receive CQ they all share); then it plays the ping-pong of 08
// with all of them at once, telling them apart by the completions' QP
// numbers and answering from the slot the message arrived in.

const (
	rpx13ClientMax = 10
	rpx13Timeout   = 5 // seconds
)

func rpx13Client(e *rpxEnv) error {
	pid := os.Getpid()
	return e.pingPongClient(true, fmt.Sprintf("[client #%d] value sent: %%d\n", pid),
		fmt.Sprintf("[client #%d] value received: %%d\n", pid))
}

// rpx13Conn is a connection of the server and its QP number.
type rpx13Conn struct {
	conn  *rpma.Conn
	qpNum uint32
}

func rpx13Server(e *rpxEnv) error {
	timeout := rpx13Timeout * 1000
	if a, ok := e.arg(0); ok {
		timeout = rpxAtoi(a) * 1000
	}
	if timeout <= 0 {
		a, _ := e.arg(0)
		e.eprintf("<timeout> should be a positive number of seconds (%s given)\n", a)
		return rpxExit(-1)
	}
	peer, err := e.serverPeer()
	if err != nil {
		return err
	}
	srq, err := peer.NewSRQ(nil)
	if err != nil {
		return e.fail("rpma_srq_new", err)
	}
	e.atExit(func() { srq.Close() })
	cfg := rpma.NewConnCfg()
	cfg.SRQ = srq
	ep, err := e.listen(peer)
	if err != nil {
		return err
	}
	b, err := e.msgBufs(peer, rpx13ClientMax)
	if err != nil {
		return err
	}
	var conns []rpx13Conn
	defer func() {
		for _, c := range conns {
			c.conn.Disconnect()
			e.deleteConn(c.conn)
		}
	}()
	for {
		ctx, cancel := context.WithTimeout(e.ctx, time.Duration(timeout)*time.Millisecond)
		req, err := ep.NextConnReq(ctx, cfg)
		timedOut := errors.Is(ctx.Err(), context.DeadlineExceeded)
		cancel()
		if err != nil {
			if timedOut && e.ctx.Err() == nil {
				break
			}
			return e.fail("rpma_ep_next_conn_req", err)
		}
		slot := len(conns)
		if slot == rpx13ClientMax {
			e.eprintf("No free slot for a new connection request.\n")
			req.Close()
			return rpxExit(-1)
		}
		// The first message of the client may come as soon as it
		// connects.
		if err := srq.Recv(b.recvMR, uint64(slot*rpxMsgSize), rpxMsgSize, uint64(slot)); err != nil {
			req.Close()
			return e.fail("rpma_srq_recv", err)
		}
		conn, err := e.connect(req, nil)
		if err != nil {
			return err
		}
		conns = append(conns, rpx13Conn{conn, conn.QPNum()})
		e.printf("The client #%d has been connected.\n", len(conns))
	}
	e.printf("Server ended listening.\n")

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
		e.eprintf("Unable to find the connection [qp#%d]\n", int32(qpNum))
		return -1
	}
	var wc [rpx13ClientMax]verbs.WorkCompletion
	done := 0
	err = func() error {
		for done < len(conns) {
			if err := e.cqWait(rcq); err != nil {
				return err
			}
			n, err := rcq.GetWC(wc[:len(conns)])
			if errors.Is(err, rpma.ErrNoCompletion) {
				continue
			}
			if err != nil {
				return e.fail("rpma_cq_get_wc", err)
			}
			for i := range n {
				w := &wc[i]
				if w.Status != verbs.WCSuccess {
					e.eprintf("rpma_srq_recv() failed: %s\n", w.Status)
					return rpxExit(-1)
				}
				if w.Opcode != verbs.WCRecv {
					e.eprintf("received unexpected wc.opcode value (%d != %d)\n", w.Opcode, verbs.WCRecv)
					return rpxExit(-1)
				}
				idx := findQP(w.QPNum)
				if idx < 0 {
					return rpxExit(-1)
				}
				slot := w.WRID
				if slot >= rpx13ClientMax {
					return rpxExit(-1)
				}
				off := slot * rpxMsgSize
				v := binary.NativeEndian.Uint64(b.recv[off:])
				if v == rpxIMDone {
					done++
					continue
				}
				qp := int32(conns[idx].qpNum)
				e.printf("[server] value received: %d from the connection [qp#%d]\n", v, qp)
				if err := srq.Recv(b.recvMR, off, rpxMsgSize, slot); err != nil {
					return e.fail("rpma_srq_recv", err)
				}
				binary.NativeEndian.PutUint64(b.send[off:], v+1)
				e.printf("[server] value sent: %d from the connection [qp#%d]\n", v+1, qp)
				if err := conns[idx].conn.Send(b.sendMR, off, rpxMsgSize, rpma.OnError, 0); err != nil {
					return e.fail("rpma_send", err)
				}
			}
		}
		return nil
	}()
	if done != len(conns) {
		e.eprintf("Unable to receive data from all connections\n")
		return rpxJoin(err, rpxExit(-1))
	}
	return err
}
