// Command 09-flush-to-persistent-GPSPM is librpma's example 09-flush-to-persistent-GPSPM in Go.
//
// The client writes its greeting into the server's region, then asks
// the server to make it persistent with a message (General Purpose Server
// Persistency Method) instead of a flush: a GPSPM_flush_request
// {offset, length, op_context}, answered by a GPSPM_flush_response
// {op_context}. Both are protobuf (proto2) messages of required fixed64
// fields (package common codes them by hand). Receives complete on a
// receive CQ of one entry. 09scch-flush-to-persistent-GPSPM is this
// example with all completions on one shared channel.
//
//	09-flush-to-persistent-GPSPM server <server_address> <port> [<pmem-path>]
//	09-flush-to-persistent-GPSPM client <server_address> <port> [<pmem-path> [<pmem-offset>]]
package main

import (
	"github.com/goverbs/goverbs/examples/rpma/internal/common"
	"github.com/goverbs/goverbs/rpma"
	"github.com/goverbs/goverbs/verbs"
)

// example is this program for common.Main.
var example = common.Example{Name: "09-flush-to-persistent-GPSPM", Server: server, Client: client, ServerArgs: "[<pmem-path>]", ClientArgs: "[<pmem-path> [<pmem-offset>]]"}

func main() { common.Main(example) }

const (
	msgSizeMax = 512
	sendOff    = 0
	recvOff    = sendOff + msgSizeMax
	rcqSize    = 1
)

// gpspmWC waits for the completion of a send (on the main CQ) or of a
// receive (on the receive CQ).
func gpspmWC(e *common.Env, conn *rpma.Conn, want verbs.WCOpcode) (verbs.WorkCompletion, error) {
	cq, call := conn.CQ(), "rpma_send"
	if want == verbs.WCRecv {
		cq, call = conn.RCQ(), "rpma_recv"
	}
	wc, err := e.GetWC(cq)
	if err != nil {
		return wc, err
	}
	if wc.Status != verbs.WCSuccess {
		e.Eprintf("%s() failed: %s\n", call, wc.Status)
		return wc, common.Exit(-1)
	}
	if wc.Opcode != want {
		e.Eprintf("unexpected wc.opcode value (0x%X != 0x%X)\n", uint32(wc.Opcode), uint32(want))
		return wc, common.Exit(-1)
	}
	return wc, nil
}

func server(e *common.Env) error {
	e.Eprintf(common.NoPMem)
	buf, err := e.Mem(common.HelloStrSize)
	if err != nil {
		return err
	}
	msg, err := e.Mem(common.HelloStrSize)
	if err != nil {
		return err
	}
	if buf[0] != 0 {
		e.Printf("Old value: %s\n", common.CString(buf))
	}
	peer, err := e.ServerPeer()
	if err != nil {
		return err
	}
	ep, err := e.Listen(peer)
	if err != nil {
		return err
	}
	m, err := e.Reg(peer, buf, rpma.UsageWriteDst|rpma.UsageFlushVisibility)
	if err != nil {
		return err
	}
	msgMR, err := e.Reg(peer, msg, rpma.UsageSend|rpma.UsageRecv|rpma.UsageFlushVisibility)
	if err != nil {
		return err
	}
	data := common.CommonData{MRDescSize: rpma.DescriptorSize}
	copy(data.Descriptors[:], m.Descriptor())
	cfg := rpma.NewConnCfg()
	cfg.RCQSize = rcqSize
	req, err := e.NextConnReq(ep, cfg)
	if err != nil {
		return err
	}
	if err := req.Recv(msgMR, recvOff, msgSizeMax, 0); err != nil {
		req.Close()
		return e.Fail("rpma_conn_req_recv", err)
	}
	conn, err := e.Connect(req, data.Bytes())
	if err != nil {
		return err
	}
	wc, err := gpspmWC(e, conn, verbs.WCRecv)
	if err != nil {
		return err
	}
	flushReq, err := common.UnmarshalGPSPMFlushRequest(msg[recvOff : recvOff+min(int(wc.ByteLen), msgSizeMax)])
	if err != nil {
		e.Eprintf("Cannot unpack the flush request buffer\n")
		return nil
	}
	e.Printf("Flush request received: {offset: 0x%X, length: 0x%X, op_context: 0x%X}\n",
		flushReq.Offset, flushReq.Length, flushReq.OpContext)
	e.Printf("At this point, persist function should be called if persistent memory will be in use\n")
	resp := (&common.GPSPMFlushResponse{OpContext: flushReq.OpContext}).Marshal()
	copy(msg[sendOff:], resp)
	if err := conn.Send(msgMR, sendOff, uint64(len(resp)), rpma.Always, 0); err != nil {
		return e.Fail("rpma_send", err)
	}
	if _, err := gpspmWC(e, conn, verbs.WCSend); err != nil {
		return err
	}
	if err := e.WaitCloseAndDisconnect(conn); err != nil {
		return err
	}
	e.Printf("New value: %s\n", common.CString(buf))
	return nil
}

func client(e *common.Env) error {
	hello, err := e.HelloClientMem()
	if err != nil {
		return err
	}
	e.Printf("Next value: %s\n", common.HelloText(hello))
	msg, err := e.Mem(common.HelloStrSize)
	if err != nil {
		return err
	}
	peer, err := e.ClientPeer()
	if err != nil {
		return err
	}
	cfg := rpma.NewConnCfg()
	cfg.RCQSize = rcqSize
	conn, err := e.ClientConnect(peer, cfg, nil)
	if err != nil {
		return err
	}
	defer e.DisconnectAndWaitClose(conn)
	src, err := e.Reg(peer, hello, rpma.UsageWriteSrc)
	if err != nil {
		return err
	}
	msgMR, err := e.Reg(peer, msg, rpma.UsageSend|rpma.UsageRecv)
	if err != nil {
		return err
	}
	data, ok := common.CommonDataOf(conn.PrivateData())
	if !ok {
		return nil
	}
	dst, off, err := e.HelloWriteTarget(conn, &data,
		"Size of the remote memory region is too small for writing the data of the assumed size")
	if err != nil {
		return nil // as in C: reported, and the example ends with 0
	}
	if err := conn.Write(dst, off, src, common.HelloStrOffset, common.HelloStrSize, rpma.OnError, 0); err != nil {
		return e.Fail("rpma_write", err)
	}
	if err := conn.Recv(msgMR, recvOff, msgSizeMax, 0); err != nil {
		return e.Fail("rpma_recv", err)
	}
	req := (&common.GPSPMFlushRequest{Offset: off, Length: common.HelloStrSize, OpContext: common.FlushID}).Marshal()
	copy(msg[sendOff:], req)
	if err := conn.Send(msgMR, sendOff, uint64(len(req)), rpma.Always, 0); err != nil {
		return e.Fail("rpma_send", err)
	}
	if _, err := gpspmWC(e, conn, verbs.WCSend); err != nil {
		return err
	}
	wc, err := gpspmWC(e, conn, verbs.WCRecv)
	if err != nil {
		return err
	}
	resp, err := common.UnmarshalGPSPMFlushResponse(msg[recvOff : recvOff+min(int(wc.ByteLen), msgSizeMax)])
	if err != nil {
		e.Eprintf("Cannot unpack the flush response buffer\n")
		return nil
	}
	if resp.OpContext != common.FlushID {
		e.Eprintf("unexpected flush_resp->op_context value (0x%X != 0x%X)\n", resp.OpContext, common.FlushID)
		return nil
	}
	e.Translate(hello)
	e.Printf("Translation: %s\n", common.HelloText(hello))
	return nil
}
