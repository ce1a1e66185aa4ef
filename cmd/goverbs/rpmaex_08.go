package main

import (
	"encoding/binary"
	"errors"

	"github.com/goverbs/goverbs/rpma"
	"github.com/goverbs/goverbs/verbs"
)

// 08-messages-ping-pong, 08srq-simple-messages-ping-pong-with-srq: the
// client sends a counter (an 8-byte uint64 in host byte order), the server
// answers with the counter plus one, for a number of rounds; then the
// client sends UINT64_MAX ("I'm done"). The 08srq server receives through
// a shared receive queue, with its completions on the SRQ's receive CQ
// (default), the connection's main CQ ("m") or the connection's receive CQ
// ("r").

const (
	rpxMsgSize = 8
	rpxIMDone  = ^uint64(0) // I_M_DONE
	rpxRecvCtx = 0x5EC0     // the op context of receives (C: the buffer's address)
)

// validateWC is the ping-pongs' validate_wc: a successful send, or a
// receive of one message into the expected buffer.
func (e *rpxEnv) validateWC(wc *verbs.WorkCompletion, recvCtx uint64, sendDone, recvDone *bool) error {
	if wc.Status != verbs.WCSuccess {
		fn := "recv"
		if wc.Opcode == verbs.WCSend {
			fn = "send"
		}
		e.eprintf("rpma_%s() failed: %s\n", fn, wc.Status)
		return rpxExit(-1)
	}
	switch wc.Opcode {
	case verbs.WCSend:
		*sendDone = true
	case verbs.WCRecv:
		if wc.WRID != recvCtx || wc.ByteLen != rpxMsgSize {
			e.eprintf("received completion is not as expected (0x%X != 0x%X [wc.wr_id] || %d != %d [wc.byte_len])\n",
				wc.WRID, recvCtx, wc.ByteLen, rpxMsgSize)
			return rpxExit(-1)
		}
		*recvDone = true
	}
	return nil
}

// waitSendRecv waits until both the send and the receive of a round
// completed (wait_and_process_completions).
func (e *rpxEnv) waitSendRecv(cq *rpma.CQ, recvCtx uint64, sendDone, recvDone *bool) error {
	var wc [2]verbs.WorkCompletion
	for !*sendDone || !*recvDone {
		if err := e.cqWait(cq); err != nil {
			return err
		}
		n, err := cq.GetWC(wc[:])
		if err != nil && !errors.Is(err, rpma.ErrNoCompletion) {
			return e.fail("rpma_cq_get_wc", err)
		}
		for i := range n {
			if err := e.validateWC(&wc[i], recvCtx, sendDone, recvDone); err != nil {
				return err
			}
		}
	}
	return nil
}

// rpxMsgBufs are the ping-pongs' message buffers and their regions.
type rpxMsgBufs struct {
	recv, send     []byte
	recvMR, sendMR *rpma.LocalMR
}

func (e *rpxEnv) msgBufs(peer *rpma.Peer, n int) (*rpxMsgBufs, error) {
	var b rpxMsgBufs
	var err error
	if b.recv, err = e.mem(n * rpxMsgSize); err != nil {
		return nil, err
	}
	if b.send, err = e.mem(n * rpxMsgSize); err != nil {
		return nil, err
	}
	if b.recvMR, err = e.reg(peer, b.recv, rpma.UsageRecv); err != nil {
		return nil, err
	}
	if b.sendMR, err = e.reg(peer, b.send, rpma.UsageSend); err != nil {
		return nil, err
	}
	return &b, nil
}

// rpxPingPongArgs are the clients' <seed> <rounds> [<sleep>].
type rpxPingPongArgs struct {
	counter, rounds, sleepUsec uint64
}

func (e *rpxEnv) pingPongArgs() (rpxPingPongArgs, error) {
	var a rpxPingPongArgs
	var err error
	if a.counter, err = e.strtoulNoError(e.args[0]); err != nil {
		return a, err
	}
	if a.rounds, err = e.strtoulNoError(e.args[1]); err != nil {
		return a, err
	}
	if s, ok := e.arg(2); ok {
		if a.sleepUsec, err = e.strtoulNoError(s); err != nil {
			return a, err
		}
	}
	return a, nil
}

// rpxJoin keeps the first error.
func rpxJoin(err, more error) error {
	if err != nil {
		return err
	}
	return more
}

func rpx08Server(e *rpxEnv) error {
	peer, err := e.serverPeer()
	if err != nil {
		return err
	}
	ep, err := e.listen(peer)
	if err != nil {
		return err
	}
	b, err := e.msgBufs(peer, 1)
	if err != nil {
		return err
	}
	req, err := e.nextConnReq(ep, nil)
	if err != nil {
		return err
	}
	// The first message of the client may come as soon as it connects.
	if err := req.Recv(b.recvMR, 0, rpxMsgSize, rpxRecvCtx); err != nil {
		req.Close()
		return e.fail("rpma_conn_req_recv", err)
	}
	conn, err := e.connect(req, nil)
	if err != nil {
		return err
	}
	cq := conn.CQ()
	sendDone, recvDone := true, false
	var ret error
	for {
		if ret = e.waitSendRecv(cq, rpxRecvCtx, &sendDone, &recvDone); ret != nil {
			break
		}
		v := binary.NativeEndian.Uint64(b.recv)
		if v == rpxIMDone {
			break
		}
		e.printf("Value received: %d\n", v)
		binary.NativeEndian.PutUint64(b.send, v+1)
		if err := conn.Recv(b.recvMR, 0, rpxMsgSize, rpxRecvCtx); err != nil {
			ret = e.fail("rpma_recv", err)
			break
		}
		e.printf("Value sent: %d\n", v+1)
		if err := conn.Send(b.sendMR, 0, rpxMsgSize, rpma.Always, 0); err != nil {
			ret = e.fail("rpma_send", err)
			break
		}
		sendDone, recvDone = false, false
	}
	return rpxJoin(ret, e.disconnectAndWaitClose(conn))
}

// pingPongClient runs a ping-pong client: exchanges rounds, rounds is
// decremented before each (08's while (--rounds)) or after it (08srq's
// and 13's do ... while (--rounds)); then "I'm done". sentFmt and recvFmt
// print the values.
func (e *rpxEnv) pingPongClient(doWhile bool, sentFmt, recvFmt string) error {
	a, err := e.pingPongArgs()
	if err != nil {
		return err
	}
	peer, err := e.clientPeer()
	if err != nil {
		return err
	}
	b, err := e.msgBufs(peer, 1)
	if err != nil {
		return err
	}
	conn, err := e.clientConnect(peer, nil, nil)
	if err != nil {
		return err
	}
	cq := conn.CQ()
	var ret error
	for first := true; ; first = false {
		if !doWhile || !first {
			if a.rounds--; a.rounds == 0 {
				break
			}
		}
		if err := conn.Recv(b.recvMR, 0, rpxMsgSize, rpxRecvCtx); err != nil {
			ret = e.fail("rpma_recv", err)
			break
		}
		e.printf(sentFmt, a.counter)
		binary.NativeEndian.PutUint64(b.send, a.counter)
		if err := conn.Send(b.sendMR, 0, rpxMsgSize, rpma.Always, 0); err != nil {
			ret = e.fail("rpma_send", err)
			break
		}
		sendDone, recvDone := false, false
		if ret = e.waitSendRecv(cq, rpxRecvCtx, &sendDone, &recvDone); ret != nil {
			break
		}
		a.counter = binary.NativeEndian.Uint64(b.recv)
		e.printf(recvFmt, a.counter)
		e.sleepUsec(a.sleepUsec)
	}
	if doWhile && ret != nil {
		// 08srq and 13 skip "I'm done" after a failure.
		return rpxJoin(ret, e.waitCloseAndDisconnect(conn))
	}
	binary.NativeEndian.PutUint64(b.send, rpxIMDone)
	if err := conn.Send(b.sendMR, 0, rpxMsgSize, rpma.OnError, 0); err != nil {
		ret = rpxJoin(ret, e.fail("rpma_send", err))
	}
	if doWhile {
		// The server disconnects once it has the last message.
		return rpxJoin(ret, e.waitCloseAndDisconnect(conn))
	}
	return rpxJoin(ret, e.disconnectAndWaitClose(conn))
}

func rpx08Client(e *rpxEnv) error {
	return e.pingPongClient(false, "Value sent: %d\n", "Value received: %d\n")
}

func rpx08srqClient(e *rpxEnv) error {
	return e.pingPongClient(true, "Value sent: %d\n", "Value received: %d\n")
}

func rpx08srqServer(e *rpxEnv) error {
	mode := byte('s') // the SRQ's receive CQ
	if a, ok := e.arg(0); ok {
		switch a {
		case "m", "r":
			mode = a[0]
		default:
			e.eprintf("The third parameter should be one of m or r (%s given)\n", a)
			return rpxExit(-1)
		}
	}
	peer, err := e.serverPeer()
	if err != nil {
		return err
	}
	srqCfg := rpma.NewSRQCfg()
	if mode != 's' {
		srqCfg.RCQSize = 0
	}
	srq, err := peer.NewSRQ(srqCfg)
	if err != nil {
		return e.fail("rpma_srq_new", err)
	}
	e.atExit(func() { srq.Close() })
	cfg := rpma.NewConnCfg()
	if mode == 'r' {
		cfg.RCQSize = 10
	}
	cfg.SRQ = srq
	ep, err := e.listen(peer)
	if err != nil {
		return err
	}
	b, err := e.msgBufs(peer, 1)
	if err != nil {
		return err
	}
	if err := srq.Recv(b.recvMR, 0, rpxMsgSize, rpxRecvCtx); err != nil {
		return e.fail("rpma_srq_recv", err)
	}
	conn, err := e.serverAccept(ep, cfg, nil)
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
				if err := e.cqWait(rcq); err != nil {
					return err
				}
				n, err := rcq.GetWC(wc[:])
				if err != nil && !errors.Is(err, rpma.ErrNoCompletion) {
					return e.fail("rpma_cq_get_wc", err)
				}
				if n > 0 {
					if err := e.validateWC(&wc[0], rpxRecvCtx, &sendDone, &recvDone); err != nil {
						return err
					}
				}
			}
			v := binary.NativeEndian.Uint64(b.recv)
			if v == rpxIMDone {
				return nil
			}
			if wc[0].QPNum != qpNum {
				e.eprintf("Error: number of QP (qp_num) in the received completion (%d) differs from the one of the connection (%d)\n",
					wc[0].QPNum, qpNum)
				return rpxExit(-1)
			}
			e.printf("Value received: %d\n", v)
			binary.NativeEndian.PutUint64(b.send, v+1)
			if err := srq.Recv(b.recvMR, 0, rpxMsgSize, rpxRecvCtx); err != nil {
				return e.fail("rpma_srq_recv", err)
			}
			e.printf("Value sent: %d\n", v+1)
			if err := conn.Send(b.sendMR, 0, rpxMsgSize, rpma.OnError, 0); err != nil {
				return e.fail("rpma_send", err)
			}
		}
	}()
	conn.Disconnect()
	e.deleteConn(conn)
	return ret
}
