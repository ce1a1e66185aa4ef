// Command 10-send-with-imm is librpma's example 10-send-with-imm in Go.
//
// The client announces an immediate value in its connection request's
// private data (a uint32 in host byte order), then sends a word (1 KiB;
// nothing without a word) with that immediate value; the server checks
// the two agree.
//
//	10-send-with-imm server <server_address> <port>
//	10-send-with-imm client <server_address> <port> <imm> [word]
package main

import (
	"encoding/binary"

	"github.com/goverbs/goverbs/examples/rpma/internal/common"
	"github.com/goverbs/goverbs/rpma"
	"github.com/goverbs/goverbs/verbs"
)

// example is this program for common.Main.
var example = common.Example{Name: "10-send-with-imm", Server: server, Client: client, ClientArgs: "<imm> [word]", ClientNeeds: 1}

func main() { common.Main(example) }

// immArg parses the clients' <imm>.
func immArg(e *common.Env) (uint32, error) {
	imm, ok := common.Strtoul(e.Args[0])
	if !ok {
		e.Eprintf("strtoul() overflow\n")
		return 0, common.Exit(-1)
	}
	if imm > 0xFFFFFFFF {
		e.Eprintf("The provided immediate data is too big (%d > %d)\n", imm, uint32(0xFFFFFFFF))
		return 0, common.Exit(-1)
	}
	return uint32(imm), nil
}

// checkImmExampleWC checks that wc is a successful completion of opcode
// want, with the messages of examples 10 and 11.
func checkImmExampleWC(e *common.Env, wc verbs.WorkCompletion, want verbs.WCOpcode) error {
	if wc.Status != verbs.WCSuccess {
		e.Eprintf("Received unexpected completion: %s\n", wc.Status)
		return common.Exit(-1)
	}
	if wc.Opcode != want {
		e.Eprintf("Received unexpected type of operation (%d != %d)\n", wc.Opcode, want)
		return common.Exit(-1)
	}
	return nil
}

// expectImmExampleWC takes the next completion of cq and checks it with
// checkImmExampleWC.
func expectImmExampleWC(e *common.Env, cq *rpma.CQ, want verbs.WCOpcode) error {
	wc, err := e.GetWC(cq)
	if err != nil {
		return err
	}
	return checkImmExampleWC(e, wc, want)
}

// checkImmWC checks the server's receive completion of 10 and 11.
func checkImmWC(e *common.Env, wc verbs.WorkCompletion, want verbs.WCOpcode, flagMsg string) error {
	if err := checkImmExampleWC(e, wc, want); err != nil {
		return err
	}
	if wc.Flags&verbs.WCWithImm == 0 {
		e.Eprintf("%s\n", flagMsg)
		return common.Exit(-1)
	}
	return nil
}

func server(e *common.Env) error {
	recv, err := e.Mem(common.Kilobyte)
	if err != nil {
		return err
	}
	peer, err := e.ServerPeer()
	if err != nil {
		return err
	}
	recvMR, err := e.Reg(peer, recv, rpma.UsageRecv)
	if err != nil {
		return err
	}
	ep, err := e.Listen(peer)
	if err != nil {
		return err
	}
	req, err := e.NextConnReq(ep, nil)
	if err != nil {
		return err
	}
	if err := req.Recv(recvMR, 0, common.Kilobyte, 0); err != nil {
		req.Close()
		return e.Fail("rpma_conn_req_recv", err)
	}
	conn, err := e.Connect(req, nil)
	if err != nil {
		return err
	}
	ret := func() error {
		pd := conn.PrivateData()
		if len(pd) < 4 {
			e.Eprintf("Received connection's private data is too small (%d < %d)\n", len(pd), 4)
			return common.Exit(-1)
		}
		expected := binary.NativeEndian.Uint32(pd)
		wc, err := e.GetWC(conn.CQ())
		if err != nil {
			return err
		}
		if err := checkImmWC(e, wc, verbs.WCRecv, "Received unexpected completion flag (no IBV_WC_WITH_IMM)"); err != nil {
			return err
		}
		imm := wc.Imm()
		if imm != expected {
			e.Eprintf("Received unexpected immediate data (%d != %d)\n", imm, expected)
			return common.Exit(-1)
		}
		if wc.ByteLen == 0 {
			recv[0] = 0
		}
		e.Printf("Received value '%s' with immediate data '%d'\n", common.CString(recv), imm)
		return nil
	}()
	e.WaitCloseAndDisconnect(conn)
	return ret
}

func client(e *common.Env) error {
	imm, err := immArg(e)
	if err != nil {
		return err
	}
	word, haveWord := e.Arg(1)
	var send []byte
	var length uint64
	if haveWord {
		length = common.Kilobyte
		if send, err = e.Mem(common.Kilobyte); err != nil {
			return err
		}
	}
	peer, err := e.ClientPeer()
	if err != nil {
		return err
	}
	var sendMR *rpma.LocalMR
	if haveWord {
		if sendMR, err = e.Reg(peer, send, rpma.UsageSend); err != nil {
			return err
		}
	}
	pdata := binary.NativeEndian.AppendUint32(nil, imm)
	conn, err := e.ClientConnect(peer, nil, pdata)
	if err != nil {
		return err
	}
	defer e.DisconnectAndWaitClose(conn)
	if haveWord {
		e.Printf("Sending value '%s' with immediate data '%d'\n", word, imm)
		common.Strncpy(send[:common.Kilobyte-1], word)
	} else {
		e.Printf("Sending immediate data '%d'\n", imm)
	}
	if err := conn.SendWithImm(sendMR, 0, length, rpma.Always, imm, 0); err != nil {
		return e.Fail("rpma_send_with_imm", err)
	}
	return expectImmExampleWC(e, conn.CQ(), verbs.WCSend)
}
