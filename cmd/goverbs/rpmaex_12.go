package main

import (
	"encoding/binary"

	"github.com/goverbs/goverbs/rpma"
	"github.com/goverbs/goverbs/verbs"
)

// 12-receive-completion-queue, 12scch-receive-completion-queue: the
// ping-pong of 08 with receives completing on a receive CQ of their own
// (10 entries) at both ends, each completion awaited on its own; 12scch
// waits for both CQs on one shared completion channel.

const rpx12RCQSize = 10

// pingWC waits for the next send (main CQ) or receive (receive CQ)
// completion and checks it (get_wc_and_validate, or the shared channel's
// wait_and_validate_completion).
func (e *rpxEnv) pingWC(conn *rpma.Conn, scch bool, want verbs.WCOpcode) error {
	if scch {
		_, err := e.waitAndValidate(conn, want)
		return err
	}
	cq, fn := conn.CQ(), "rpma_send()"
	if want == verbs.WCRecv {
		cq, fn = conn.RCQ(), "rpma_recv()"
	}
	wc, err := e.getWC(cq)
	if err != nil {
		return err
	}
	if wc.Status != verbs.WCSuccess {
		e.eprintf("%s failed: %s\n", fn, wc.Status)
		return rpxExit(-1)
	}
	if wc.Opcode != want {
		e.eprintf("unexpected wc.opcode value (0x%X != 0x%X)\n", uint32(wc.Opcode), uint32(want))
		return rpxExit(-1)
	}
	return nil
}

func rpx12Cfg(scch bool) *rpma.ConnCfg {
	cfg := rpma.NewConnCfg()
	cfg.RCQSize = rpx12RCQSize
	cfg.SharedChannel = scch
	return cfg
}

func rpx12Server(e *rpxEnv, scch bool) error {
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
	req, err := e.nextConnReq(ep, rpx12Cfg(scch))
	if err != nil {
		return err
	}
	if err := req.Recv(b.recvMR, 0, rpxMsgSize, rpxRecvCtx); err != nil {
		req.Close()
		return e.fail("rpma_conn_req_recv", err)
	}
	conn, err := e.connect(req, nil)
	if err != nil {
		return err
	}
	ret := func() error {
		for {
			if err := e.pingWC(conn, scch, verbs.WCRecv); err != nil {
				return err
			}
			v := binary.NativeEndian.Uint64(b.recv)
			if v == rpxIMDone {
				return nil
			}
			e.printf("SERVER: Value received: %d\n", v)
			binary.NativeEndian.PutUint64(b.send, v+1)
			if err := conn.Recv(b.recvMR, 0, rpxMsgSize, rpxRecvCtx); err != nil {
				return e.fail("rpma_recv", err)
			}
			e.printf("SERVER: Value sent: %d\n", v+1)
			if err := conn.Send(b.sendMR, 0, rpxMsgSize, rpma.Always, 0); err != nil {
				return e.fail("rpma_send", err)
			}
			if err := e.pingWC(conn, scch, verbs.WCSend); err != nil {
				return err
			}
		}
	}()
	return rpxJoin(ret, e.disconnectAndWaitClose(conn))
}

func rpx12Client(e *rpxEnv, scch bool) error {
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
	conn, err := e.clientConnect(peer, rpx12Cfg(scch), nil)
	if err != nil {
		return err
	}
	ret := func() error {
		for a.rounds--; a.rounds != 0; a.rounds-- {
			if err := conn.Recv(b.recvMR, 0, rpxMsgSize, rpxRecvCtx); err != nil {
				return e.fail("rpma_recv", err)
			}
			e.printf("CLIENT: Value sent: %d\n", a.counter)
			binary.NativeEndian.PutUint64(b.send, a.counter)
			if err := conn.Send(b.sendMR, 0, rpxMsgSize, rpma.Always, 0); err != nil {
				return e.fail("rpma_send", err)
			}
			if err := e.pingWC(conn, scch, verbs.WCSend); err != nil {
				return err
			}
			if err := e.pingWC(conn, scch, verbs.WCRecv); err != nil {
				return err
			}
			a.counter = binary.NativeEndian.Uint64(b.recv)
			e.printf("CLIENT: Value received: %d\n", a.counter)
			e.sleepUsec(a.sleepUsec)
		}
		return nil
	}()
	binary.NativeEndian.PutUint64(b.send, rpxIMDone)
	if err := conn.Send(b.sendMR, 0, rpxMsgSize, rpma.OnError, 0); err != nil {
		ret = rpxJoin(ret, e.fail("rpma_send", err))
	}
	return rpxJoin(ret, e.disconnectAndWaitClose(conn))
}
