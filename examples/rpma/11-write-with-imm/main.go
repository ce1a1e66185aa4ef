// Command 11-write-with-imm is librpma's example 11-write-with-imm in Go.
//
// The client writes the immediate value (as the first 4 bytes of 1 KiB)
// into the server's region with an RDMA write with immediate, which
// completes the server's 1-byte receive; the server checks the two
// agree.
//
//	11-write-with-imm server <server_address> <port>
//	11-write-with-imm client <server_address> <port> <imm>
package main

import (
	"encoding/binary"

	"github.com/goverbs/goverbs/examples/rpma/internal/common"
	"github.com/goverbs/goverbs/rpma"
	"github.com/goverbs/goverbs/verbs"
)

// example is this program for common.Main.
var example = common.Example{Name: "11-write-with-imm", Server: server, Client: client, ClientArgs: "<imm>", ClientNeeds: 1}

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
	dst, err := e.Mem(common.Kilobyte)
	if err != nil {
		return err
	}
	recv, err := e.Mem(1)
	if err != nil {
		return err
	}
	peer, err := e.ServerPeer()
	if err != nil {
		return err
	}
	dstMR, err := e.Reg(peer, dst, rpma.UsageWriteDst)
	if err != nil {
		return err
	}
	recvMR, err := e.Reg(peer, recv, rpma.UsageRecv)
	if err != nil {
		return err
	}
	data := common.CommonData{MRDescSize: rpma.DescriptorSize}
	copy(data.Descriptors[:], dstMR.Descriptor())
	ep, err := e.Listen(peer)
	if err != nil {
		return err
	}
	req, err := e.NextConnReq(ep, nil)
	if err != nil {
		return err
	}
	// The write with immediate consumes a receive.
	if err := req.Recv(recvMR, 0, 1, 0); err != nil {
		req.Close()
		return e.Fail("rpma_conn_req_recv", err)
	}
	conn, err := e.Connect(req, data.Bytes())
	if err != nil {
		return err
	}
	ret := func() error {
		wc, err := e.GetWC(conn.CQ())
		if err != nil {
			return err
		}
		if err := checkImmWC(e, wc, verbs.WCRecvRDMAWithImm, "Received an unexpected completion flag (no IBV_WC_WITH_IMM)"); err != nil {
			return err
		}
		expected := binary.NativeEndian.Uint32(dst)
		imm := wc.Imm()
		if imm != expected {
			e.Eprintf("Received unexpected immediate data (%d != %d)\n", imm, expected)
			return common.Exit(-1)
		}
		e.Printf("The value '%d' was written together with immediate data '%d'\n", expected, imm)
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
	src, err := e.Mem(common.Kilobyte)
	if err != nil {
		return err
	}
	peer, err := e.ClientPeer()
	if err != nil {
		return err
	}
	srcMR, err := e.Reg(peer, src, rpma.UsageWriteSrc)
	if err != nil {
		return err
	}
	conn, err := e.ClientConnect(peer, nil, nil)
	if err != nil {
		return err
	}
	defer e.DisconnectAndWaitClose(conn)
	pd := conn.PrivateData()
	data, ok := common.CommonDataOf(pd)
	if !ok {
		e.Eprintf("Received connection's private data is too small (%d < %d)\n", len(pd), common.CommonDataSize)
		return common.Exit(-1)
	}
	dst, err := e.RemoteMR(&data)
	if err != nil {
		return err
	}
	binary.NativeEndian.PutUint32(src, imm)
	e.Printf("Writing value '%d' with immediate data '%d'\n", binary.NativeEndian.Uint32(src), imm)
	if err := conn.WriteWithImm(dst, uint64(data.DataOffset), srcMR, 0, common.Kilobyte, rpma.Always, imm, 0); err != nil {
		return e.Fail("rpma_write_with_imm", err)
	}
	return expectImmExampleWC(e, conn.CQ(), verbs.WCRDMAWrite)
}
