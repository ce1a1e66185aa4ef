package main

import (
	"encoding/binary"

	"github.com/goverbs/goverbs/rpma"
	"github.com/goverbs/goverbs/verbs"
)

// 10-send-with-imm: the client announces an immediate value in its
// connection request's private data (a uint32 in host byte order), then
// sends a word (1 KiB; nothing without a word) with that immediate
// value; the server checks the two agree. 11-write-with-imm: the client
// writes the immediate value (as the first 4 bytes of 1 KiB) into the
// server's region with an RDMA write with immediate, which completes the
// server's 1-byte receive; the server checks the two agree.

// immArg parses the clients' <imm>.
func (e *rpxEnv) immArg() (uint32, error) {
	imm, ok := rpxStrtoul(e.args[0])
	if !ok {
		e.eprintf("strtoul() overflow\n")
		return 0, rpxExit(-1)
	}
	if imm > 0xFFFFFFFF {
		e.eprintf("The provided immediate data is too big (%d > %d)\n", imm, uint32(0xFFFFFFFF))
		return 0, rpxExit(-1)
	}
	return uint32(imm), nil
}

// checkImmExampleWC checks that wc is a successful completion of opcode
// want, with the messages of examples 10 and 11.
func (e *rpxEnv) checkImmExampleWC(wc verbs.WorkCompletion, want verbs.WCOpcode) error {
	if wc.Status != verbs.WCSuccess {
		e.eprintf("Received unexpected completion: %s\n", wc.Status)
		return rpxExit(-1)
	}
	if wc.Opcode != want {
		e.eprintf("Received unexpected type of operation (%d != %d)\n", wc.Opcode, want)
		return rpxExit(-1)
	}
	return nil
}

// expectImmExampleWC takes the next completion of cq and checks it with
// checkImmExampleWC.
func (e *rpxEnv) expectImmExampleWC(cq *rpma.CQ, want verbs.WCOpcode) error {
	wc, err := e.getWC(cq)
	if err != nil {
		return err
	}
	return e.checkImmExampleWC(wc, want)
}

// checkImmWC checks the server's receive completion of 10 and 11.
func (e *rpxEnv) checkImmWC(wc verbs.WorkCompletion, want verbs.WCOpcode, flagMsg string) error {
	if err := e.checkImmExampleWC(wc, want); err != nil {
		return err
	}
	if wc.Flags&verbs.WCWithImm == 0 {
		e.eprintf("%s\n", flagMsg)
		return rpxExit(-1)
	}
	return nil
}

func rpx10Server(e *rpxEnv) error {
	recv, err := e.mem(rpxKilobyte)
	if err != nil {
		return err
	}
	peer, err := e.serverPeer()
	if err != nil {
		return err
	}
	recvMR, err := e.reg(peer, recv, rpma.UsageRecv)
	if err != nil {
		return err
	}
	ep, err := e.listen(peer)
	if err != nil {
		return err
	}
	req, err := e.nextConnReq(ep, nil)
	if err != nil {
		return err
	}
	if err := req.Recv(recvMR, 0, rpxKilobyte, 0); err != nil {
		req.Close()
		return e.fail("rpma_conn_req_recv", err)
	}
	conn, err := e.connect(req, nil)
	if err != nil {
		return err
	}
	ret := func() error {
		pd := conn.PrivateData()
		if len(pd) < 4 {
			e.eprintf("Received connection's private data is too small (%d < %d)\n", len(pd), 4)
			return rpxExit(-1)
		}
		expected := binary.NativeEndian.Uint32(pd)
		wc, err := e.getWC(conn.CQ())
		if err != nil {
			return err
		}
		if err := e.checkImmWC(wc, verbs.WCRecv, "Received unexpected completion flag (no IBV_WC_WITH_IMM)"); err != nil {
			return err
		}
		imm := wc.Imm()
		if imm != expected {
			e.eprintf("Received unexpected immediate data (%d != %d)\n", imm, expected)
			return rpxExit(-1)
		}
		if wc.ByteLen == 0 {
			recv[0] = 0
		}
		e.printf("Received value '%s' with immediate data '%d'\n", rpxCString(recv), imm)
		return nil
	}()
	e.waitCloseAndDisconnect(conn)
	return ret
}

func rpx10Client(e *rpxEnv) error {
	imm, err := e.immArg()
	if err != nil {
		return err
	}
	word, haveWord := e.arg(1)
	var send []byte
	var length uint64
	if haveWord {
		length = rpxKilobyte
		if send, err = e.mem(rpxKilobyte); err != nil {
			return err
		}
	}
	peer, err := e.clientPeer()
	if err != nil {
		return err
	}
	var sendMR *rpma.LocalMR
	if haveWord {
		if sendMR, err = e.reg(peer, send, rpma.UsageSend); err != nil {
			return err
		}
	}
	pdata := binary.NativeEndian.AppendUint32(nil, imm)
	conn, err := e.clientConnect(peer, nil, pdata)
	if err != nil {
		return err
	}
	defer e.disconnectAndWaitClose(conn)
	if haveWord {
		e.printf("Sending value '%s' with immediate data '%d'\n", word, imm)
		rpxStrncpy(send[:rpxKilobyte-1], word)
	} else {
		e.printf("Sending immediate data '%d'\n", imm)
	}
	if err := conn.SendWithImm(sendMR, 0, length, rpma.Always, imm, 0); err != nil {
		return e.fail("rpma_send_with_imm", err)
	}
	return e.expectImmExampleWC(conn.CQ(), verbs.WCSend)
}

func rpx11Server(e *rpxEnv) error {
	dst, err := e.mem(rpxKilobyte)
	if err != nil {
		return err
	}
	recv, err := e.mem(1)
	if err != nil {
		return err
	}
	peer, err := e.serverPeer()
	if err != nil {
		return err
	}
	dstMR, err := e.reg(peer, dst, rpma.UsageWriteDst)
	if err != nil {
		return err
	}
	recvMR, err := e.reg(peer, recv, rpma.UsageRecv)
	if err != nil {
		return err
	}
	data := rpxCommonData{mrDescSize: rpma.DescriptorSize}
	copy(data.descriptors[:], dstMR.Descriptor())
	ep, err := e.listen(peer)
	if err != nil {
		return err
	}
	req, err := e.nextConnReq(ep, nil)
	if err != nil {
		return err
	}
	// The write with immediate consumes a receive.
	if err := req.Recv(recvMR, 0, 1, 0); err != nil {
		req.Close()
		return e.fail("rpma_conn_req_recv", err)
	}
	conn, err := e.connect(req, data.bytes())
	if err != nil {
		return err
	}
	ret := func() error {
		wc, err := e.getWC(conn.CQ())
		if err != nil {
			return err
		}
		if err := e.checkImmWC(wc, verbs.WCRecvRDMAWithImm, "Received an unexpected completion flag (no IBV_WC_WITH_IMM)"); err != nil {
			return err
		}
		expected := binary.NativeEndian.Uint32(dst)
		imm := wc.Imm()
		if imm != expected {
			e.eprintf("Received unexpected immediate data (%d != %d)\n", imm, expected)
			return rpxExit(-1)
		}
		e.printf("The value '%d' was written together with immediate data '%d'\n", expected, imm)
		return nil
	}()
	e.waitCloseAndDisconnect(conn)
	return ret
}

func rpx11Client(e *rpxEnv) error {
	imm, err := e.immArg()
	if err != nil {
		return err
	}
	src, err := e.mem(rpxKilobyte)
	if err != nil {
		return err
	}
	peer, err := e.clientPeer()
	if err != nil {
		return err
	}
	srcMR, err := e.reg(peer, src, rpma.UsageWriteSrc)
	if err != nil {
		return err
	}
	conn, err := e.clientConnect(peer, nil, nil)
	if err != nil {
		return err
	}
	defer e.disconnectAndWaitClose(conn)
	pd := conn.PrivateData()
	data, ok := rpxCommonDataOf(pd)
	if !ok {
		e.eprintf("Received connection's private data is too small (%d < %d)\n", len(pd), rpxCommonDataSize)
		return rpxExit(-1)
	}
	dst, err := e.remoteMR(&data)
	if err != nil {
		return err
	}
	binary.NativeEndian.PutUint32(src, imm)
	e.printf("Writing value '%d' with immediate data '%d'\n", binary.NativeEndian.Uint32(src), imm)
	if err := conn.WriteWithImm(dst, uint64(data.dataOffset), srcMR, 0, rpxKilobyte, rpma.Always, imm, 0); err != nil {
		return e.fail("rpma_write_with_imm", err)
	}
	return e.expectImmExampleWC(conn.CQ(), verbs.WCRDMAWrite)
}
