package common

// The messages of the ping-pongs: 08, 08srq, 12 and 13
// (common-messages-ping-pong.h).

import (
	"encoding/binary"
	"errors"

	"github.com/goverbs/goverbs/rpma"
	"github.com/goverbs/goverbs/verbs"
)

// The ping-pongs' messages: a counter, an 8-byte uint64 in host byte
// order; IMDone ends a ping-pong.
const (
	MsgSize = 8
	IMDone  = ^uint64(0) // I_M_DONE
	RecvCtx = 0x5EC0     // the op context of receives (C: the buffer's address)
)

// ValidateWC is the ping-pongs' validate_wc: a successful send, or a
// receive of one message into the expected buffer.
func (e *Env) ValidateWC(wc *verbs.WorkCompletion, recvCtx uint64, sendDone, recvDone *bool) error {
	if wc.Status != verbs.WCSuccess {
		fn := "recv"
		if wc.Opcode == verbs.WCSend {
			fn = "send"
		}
		e.Eprintf("rpma_%s() failed: %s\n", fn, wc.Status)
		return Exit(-1)
	}
	switch wc.Opcode {
	case verbs.WCSend:
		*sendDone = true
	case verbs.WCRecv:
		if wc.WRID != recvCtx || wc.ByteLen != MsgSize {
			e.Eprintf("received completion is not as expected (0x%X != 0x%X [wc.wr_id] || %d != %d [wc.byte_len])\n",
				wc.WRID, recvCtx, wc.ByteLen, MsgSize)
			return Exit(-1)
		}
		*recvDone = true
	}
	return nil
}

// WaitSendRecv waits until both the send and the receive of a round
// completed (wait_and_process_completions).
func (e *Env) WaitSendRecv(cq *rpma.CQ, recvCtx uint64, sendDone, recvDone *bool) error {
	return e.waitRound(cq, recvCtx, sendDone, recvDone, true)
}

// WaitRecv waits until the receive of a round completed, taking the
// send's completion too if it comes first or with it (sendDone).
//
// A ping-pong server waits for the receive first: when the message is
// "I'm done", the client has the server's last answer, and the
// acknowledgement that completes that answer's send may never come. The
// client's rxe posts the receive's completion before it acknowledges, and
// a client that has already moved its QP to the error state (it
// disconnected right after "I'm done") sends no acknowledgement at all;
// with librpma's retry count (7, which rxe takes as "retry for ever") the
// server's send then never completes (docs/kernels.md §1).
func (e *Env) WaitRecv(cq *rpma.CQ, recvCtx uint64, sendDone, recvDone *bool) error {
	return e.waitRound(cq, recvCtx, sendDone, recvDone, false)
}

// waitRound is WaitSendRecv, or WaitRecv when needSend is false.
func (e *Env) waitRound(cq *rpma.CQ, recvCtx uint64, sendDone, recvDone *bool, needSend bool) error {
	var wc [2]verbs.WorkCompletion
	for (needSend && !*sendDone) || !*recvDone {
		if err := e.CQWait(cq); err != nil {
			return err
		}
		n, err := cq.GetWC(wc[:])
		if err != nil && !errors.Is(err, rpma.ErrNoCompletion) {
			return e.Fail("rpma_cq_get_wc", err)
		}
		for i := range n {
			if err := e.ValidateWC(&wc[i], recvCtx, sendDone, recvDone); err != nil {
				return err
			}
		}
	}
	return nil
}

// MsgBufs are the ping-pongs' message buffers and their regions.
type MsgBufs struct {
	Recv, Send     []byte
	RecvMR, SendMR *rpma.LocalMR
}

// MsgBufs allocates and registers n messages to receive and n to send.
func (e *Env) MsgBufs(peer *rpma.Peer, n int) (*MsgBufs, error) {
	var b MsgBufs
	var err error
	if b.Recv, err = e.Mem(n * MsgSize); err != nil {
		return nil, err
	}
	if b.Send, err = e.Mem(n * MsgSize); err != nil {
		return nil, err
	}
	if b.RecvMR, err = e.Reg(peer, b.Recv, rpma.UsageRecv); err != nil {
		return nil, err
	}
	if b.SendMR, err = e.Reg(peer, b.Send, rpma.UsageSend); err != nil {
		return nil, err
	}
	return &b, nil
}

// PingPongArgs are the clients' <seed> <rounds> [<sleep>].
type PingPongArgs struct {
	Counter, Rounds, SleepUsec uint64
}

// PingPongArgs parses the clients' arguments.
func (e *Env) PingPongArgs() (PingPongArgs, error) {
	var a PingPongArgs
	var err error
	if a.Counter, err = e.StrtoulNoError(e.Args[0]); err != nil {
		return a, err
	}
	if a.Rounds, err = e.StrtoulNoError(e.Args[1]); err != nil {
		return a, err
	}
	if s, ok := e.Arg(2); ok {
		if a.SleepUsec, err = e.StrtoulNoError(s); err != nil {
			return a, err
		}
	}
	return a, nil
}

// Join keeps the first error.
func Join(err, more error) error {
	if err != nil {
		return err
	}
	return more
}

// PingPongClient runs a ping-pong client: exchanges rounds, rounds is
// decremented before each (08's while (--rounds)) or after it (08srq's
// and 13's do ... while (--rounds)); then "I'm done". sentFmt and recvFmt
// print the values.
func (e *Env) PingPongClient(doWhile bool, sentFmt, recvFmt string) error {
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
	conn, err := e.ClientConnect(peer, nil, nil)
	if err != nil {
		return err
	}
	cq := conn.CQ()
	var ret error
	for first := true; ; first = false {
		if !doWhile || !first {
			if a.Rounds--; a.Rounds == 0 {
				break
			}
		}
		if err := conn.Recv(b.RecvMR, 0, MsgSize, RecvCtx); err != nil {
			ret = e.Fail("rpma_recv", err)
			break
		}
		e.Printf(sentFmt, a.Counter)
		binary.NativeEndian.PutUint64(b.Send, a.Counter)
		if err := conn.Send(b.SendMR, 0, MsgSize, rpma.Always, 0); err != nil {
			ret = e.Fail("rpma_send", err)
			break
		}
		sendDone, recvDone := false, false
		if ret = e.WaitSendRecv(cq, RecvCtx, &sendDone, &recvDone); ret != nil {
			break
		}
		a.Counter = binary.NativeEndian.Uint64(b.Recv)
		e.Printf(recvFmt, a.Counter)
		e.SleepUsec(a.SleepUsec)
	}
	if doWhile && ret != nil {
		// 08srq and 13 skip "I'm done" after a failure.
		return Join(ret, e.WaitCloseAndDisconnect(conn))
	}
	binary.NativeEndian.PutUint64(b.Send, IMDone)
	if err := conn.Send(b.SendMR, 0, MsgSize, rpma.OnError, 0); err != nil {
		ret = Join(ret, e.Fail("rpma_send", err))
	}
	if doWhile {
		// The server disconnects once it has the last message.
		return Join(ret, e.WaitCloseAndDisconnect(conn))
	}
	return Join(ret, e.DisconnectAndWaitClose(conn))
}
