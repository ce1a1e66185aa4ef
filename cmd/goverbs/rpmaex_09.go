package main

import (
	"encoding/binary"
	"errors"

	"github.com/goverbs/goverbs/rpma"
	"github.com/goverbs/goverbs/verbs"
)

// 09-flush-to-persistent-GPSPM, 09scch-flush-to-persistent-GPSPM: the
// client writes its greeting into the server's region, then asks the
// server to make it persistent with a message (General Purpose Server
// Persistency Method) instead of a flush: a GPSPM_flush_request
// {offset, length, op_context}, answered by a GPSPM_flush_response
// {op_context}. Both are protobuf (proto2) messages of required fixed64
// fields, coded here by hand. Receives complete on a receive CQ of one
// entry; 09scch waits for all completions on one shared channel.

const (
	rpx09MsgSizeMax = 512
	rpx09SendOff    = 0
	rpx09RecvOff    = rpx09SendOff + rpx09MsgSizeMax
	rpx09RCQSize    = 1
)

// rpxGPSPMFlushRequest is message GPSPM_flush_request.
type rpxGPSPMFlushRequest struct {
	offset, length, opContext uint64 // fields 1, 2 and 3
}

// rpxGPSPMFlushResponse is message GPSPM_flush_response.
type rpxGPSPMFlushResponse struct {
	opContext uint64 // field 1
}

// rpxPBFixed64 appends a fixed64 field: its key (field number, wire type
// 1) and 8 little-endian bytes.
func rpxPBFixed64(b []byte, field int, v uint64) []byte {
	b = binary.AppendUvarint(b, uint64(field)<<3|1)
	return binary.LittleEndian.AppendUint64(b, v)
}

func (m *rpxGPSPMFlushRequest) marshal() []byte {
	b := rpxPBFixed64(nil, 1, m.offset)
	b = rpxPBFixed64(b, 2, m.length)
	return rpxPBFixed64(b, 3, m.opContext)
}

func (m *rpxGPSPMFlushResponse) marshal() []byte { return rpxPBFixed64(nil, 1, m.opContext) }

var rpxErrPB = errors.New("malformed protobuf message")

// rpxPBFixed64Fields decodes a message whose known fields (1..n) are
// fixed64, as protobuf-c's unpack does: unknown fields are skipped, the
// last value of a field wins, a known field of another wire type or a
// missing one (they are all required) is an error.
func rpxPBFixed64Fields(b []byte, n int) ([]uint64, error) {
	vals := make([]uint64, n+1)
	seen := make([]bool, n+1)
	for len(b) > 0 {
		key, k := binary.Uvarint(b)
		if k <= 0 {
			return nil, rpxErrPB
		}
		b = b[k:]
		field, wire := key>>3, key&7
		if field == 0 {
			return nil, rpxErrPB
		}
		if field <= uint64(n) && wire != 1 {
			return nil, rpxErrPB
		}
		switch wire {
		case 0: // varint
			_, k := binary.Uvarint(b)
			if k <= 0 {
				return nil, rpxErrPB
			}
			b = b[k:]
		case 1: // 64-bit
			if len(b) < 8 {
				return nil, rpxErrPB
			}
			if field <= uint64(n) {
				vals[field], seen[field] = binary.LittleEndian.Uint64(b), true
			}
			b = b[8:]
		case 2: // length-delimited
			l, k := binary.Uvarint(b)
			if k <= 0 || l > uint64(len(b)-k) {
				return nil, rpxErrPB
			}
			b = b[k+int(l):]
		case 5: // 32-bit
			if len(b) < 4 {
				return nil, rpxErrPB
			}
			b = b[4:]
		default:
			return nil, rpxErrPB
		}
	}
	for _, s := range seen[1:] {
		if !s {
			return nil, rpxErrPB
		}
	}
	return vals[1:], nil
}

func rpxUnmarshalFlushRequest(b []byte) (rpxGPSPMFlushRequest, error) {
	v, err := rpxPBFixed64Fields(b, 3)
	if err != nil {
		return rpxGPSPMFlushRequest{}, err
	}
	return rpxGPSPMFlushRequest{offset: v[0], length: v[1], opContext: v[2]}, nil
}

func rpxUnmarshalFlushResponse(b []byte) (rpxGPSPMFlushResponse, error) {
	v, err := rpxPBFixed64Fields(b, 1)
	if err != nil {
		return rpxGPSPMFlushResponse{}, err
	}
	return rpxGPSPMFlushResponse{opContext: v[0]}, nil
}

// gpspmWC waits for the completion of a send (on the main CQ) or of a
// receive (on the receive CQ), or, with a shared channel, for the next
// completion, which must be of that kind.
func (e *rpxEnv) gpspmWC(conn *rpma.Conn, scch bool, want verbs.WCOpcode) (verbs.WorkCompletion, error) {
	if scch {
		return e.waitAndValidate(conn, want)
	}
	cq, call := conn.CQ(), "rpma_send"
	if want == verbs.WCRecv {
		cq, call = conn.RCQ(), "rpma_recv"
	}
	wc, err := e.getWC(cq)
	if err != nil {
		return wc, err
	}
	if wc.Status != verbs.WCSuccess {
		e.eprintf("%s() failed: %s\n", call, wc.Status)
		return wc, rpxExit(-1)
	}
	if wc.Opcode != want {
		e.eprintf("unexpected wc.opcode value (0x%X != 0x%X)\n", uint32(wc.Opcode), uint32(want))
		return wc, rpxExit(-1)
	}
	return wc, nil
}

func rpx09Server(e *rpxEnv, scch bool) error {
	e.eprintf(rpxNoPMem)
	buf, err := e.mem(rpxHelloStrSize)
	if err != nil {
		return err
	}
	msg, err := e.mem(rpxHelloStrSize)
	if err != nil {
		return err
	}
	if buf[0] != 0 {
		e.printf("Old value: %s\n", rpxCString(buf))
	}
	peer, err := e.serverPeer()
	if err != nil {
		return err
	}
	ep, err := e.listen(peer)
	if err != nil {
		return err
	}
	m, err := e.reg(peer, buf, rpma.UsageWriteDst|rpma.UsageFlushVisibility)
	if err != nil {
		return err
	}
	msgMR, err := e.reg(peer, msg, rpma.UsageSend|rpma.UsageRecv|rpma.UsageFlushVisibility)
	if err != nil {
		return err
	}
	data := rpxCommonData{mrDescSize: rpma.DescriptorSize}
	copy(data.descriptors[:], m.Descriptor())
	cfg := rpma.NewConnCfg()
	cfg.RCQSize = rpx09RCQSize
	cfg.SharedChannel = scch
	req, err := e.nextConnReq(ep, cfg)
	if err != nil {
		return err
	}
	if err := req.Recv(msgMR, rpx09RecvOff, rpx09MsgSizeMax, 0); err != nil {
		req.Close()
		return e.fail("rpma_conn_req_recv", err)
	}
	conn, err := e.connect(req, data.bytes())
	if err != nil {
		return err
	}
	wc, err := e.gpspmWC(conn, scch, verbs.WCRecv)
	if err != nil {
		return err
	}
	flushReq, err := rpxUnmarshalFlushRequest(msg[rpx09RecvOff : rpx09RecvOff+min(int(wc.ByteLen), rpx09MsgSizeMax)])
	if err != nil {
		e.eprintf("Cannot unpack the flush request buffer\n")
		return nil
	}
	e.printf("Flush request received: {offset: 0x%X, length: 0x%X, op_context: 0x%X}\n",
		flushReq.offset, flushReq.length, flushReq.opContext)
	if scch {
		e.printf("At this point, persistent function should be called if persistent memory will be in use\n")
	} else {
		e.printf("At this point, persist function should be called if persistent memory will be in use\n")
	}
	resp := (&rpxGPSPMFlushResponse{opContext: flushReq.opContext}).marshal()
	copy(msg[rpx09SendOff:], resp)
	if err := conn.Send(msgMR, rpx09SendOff, uint64(len(resp)), rpma.Always, 0); err != nil {
		return e.fail("rpma_send", err)
	}
	if _, err := e.gpspmWC(conn, scch, verbs.WCSend); err != nil {
		return err
	}
	if err := e.waitCloseAndDisconnect(conn); err != nil {
		return err
	}
	e.printf("New value: %s\n", rpxCString(buf))
	return nil
}

func rpx09Client(e *rpxEnv, scch bool) error {
	hello, err := e.helloClientMem()
	if err != nil {
		return err
	}
	e.printf("Next value: %s\n", rpxHelloText(hello))
	msg, err := e.mem(rpxHelloStrSize)
	if err != nil {
		return err
	}
	peer, err := e.clientPeer()
	if err != nil {
		return err
	}
	cfg := rpma.NewConnCfg()
	cfg.RCQSize = rpx09RCQSize
	cfg.SharedChannel = scch
	conn, err := e.clientConnect(peer, cfg, nil)
	if err != nil {
		return err
	}
	defer e.disconnectAndWaitClose(conn)
	src, err := e.reg(peer, hello, rpma.UsageWriteSrc)
	if err != nil {
		return err
	}
	msgMR, err := e.reg(peer, msg, rpma.UsageSend|rpma.UsageRecv)
	if err != nil {
		return err
	}
	data, ok := rpxCommonDataOf(conn.PrivateData())
	if !ok {
		return nil
	}
	dst, off, err := e.helloWriteTarget(conn, &data,
		"Size of the remote memory region is too small for writing the data of the assumed size")
	if err != nil {
		return nil // as in C: reported, and the example ends with 0
	}
	if err := conn.Write(dst, off, src, rpxHelloStrOffset, rpxHelloStrSize, rpma.OnError, 0); err != nil {
		return e.fail("rpma_write", err)
	}
	if err := conn.Recv(msgMR, rpx09RecvOff, rpx09MsgSizeMax, 0); err != nil {
		return e.fail("rpma_recv", err)
	}
	req := (&rpxGPSPMFlushRequest{offset: off, length: rpxHelloStrSize, opContext: rpxFlushID}).marshal()
	copy(msg[rpx09SendOff:], req)
	if err := conn.Send(msgMR, rpx09SendOff, uint64(len(req)), rpma.Always, 0); err != nil {
		return e.fail("rpma_send", err)
	}
	if _, err := e.gpspmWC(conn, scch, verbs.WCSend); err != nil {
		return err
	}
	wc, err := e.gpspmWC(conn, scch, verbs.WCRecv)
	if err != nil {
		return err
	}
	resp, err := rpxUnmarshalFlushResponse(msg[rpx09RecvOff : rpx09RecvOff+min(int(wc.ByteLen), rpx09MsgSizeMax)])
	if err != nil {
		e.eprintf("Cannot unpack the flush response buffer\n")
		return nil
	}
	if resp.opContext != rpxFlushID {
		e.eprintf("unexpected flush_resp->op_context value (0x%X != 0x%X)\n", resp.opContext, rpxFlushID)
		return nil
	}
	e.translate(hello)
	e.printf("Translation: %s\n", rpxHelloText(hello))
	return nil
}
