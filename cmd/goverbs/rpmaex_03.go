package main

import (
	"github.com/goverbs/goverbs/rpma"
	"github.com/goverbs/goverbs/verbs"
)

// 03-read-to-persistent, 04-write-to-persistent, 05-flush-to-persistent:
// the client keeps a greeting (struct hello_t), the server a 1 KiB
// string. In 03 the server reads the greeting (the client's region
// descriptor comes with the connection request); in 04 the client writes
// it into the server's region and reads 8 bytes back; in 05 it writes and
// flushes, with the server's peer configuration. Then the client
// translates its greeting for next time. (DRAM only: no PMem path.)

// helloClientMem prepares the client's greeting.
func (e *rpxEnv) helloClientMem() ([]byte, error) {
	e.eprintf(rpxNoPMem)
	h, err := e.mem(rpxHelloTSize)
	if err != nil {
		return nil, err
	}
	rpxWriteHello(h, 0)
	return h, nil
}

// helloServerMem prepares the server's string; its old value, if any, is
// printed.
func (e *rpxEnv) helloServerMem() ([]byte, error) {
	e.eprintf(rpxNoPMem)
	buf, err := e.mem(rpxHelloStrSize)
	if err != nil {
		return nil, err
	}
	if buf[0] != 0 {
		e.printf("Old value: %s\n", rpxCString(buf))
	}
	return buf, nil
}

// checkWC checks a completion's status and opcode, with the C examples'
// messages.
func (e *rpxEnv) checkWC(wc verbs.WorkCompletion, call string, want verbs.WCOpcode) error {
	if wc.Status != verbs.WCSuccess {
		e.eprintf("%s() failed: %s\n", call, wc.Status)
		return rpxExit(-1)
	}
	if wc.Opcode != want {
		e.eprintf("unexpected wc.opcode value (%d != %d)\n", wc.Opcode, want)
		return rpxExit(-1)
	}
	return nil
}

func rpx03Server(e *rpxEnv) error {
	buf, err := e.helloServerMem()
	if err != nil {
		return err
	}
	peer, err := e.serverPeer()
	if err != nil {
		return err
	}
	ep, err := e.listen(peer)
	if err != nil {
		return err
	}
	dst, err := e.reg(peer, buf, rpma.UsageReadDst)
	if err != nil {
		return err
	}
	conn, err := e.serverAccept(ep, nil, nil)
	if err != nil {
		return err
	}
	// The connection is closed from here whatever happens.
	ret := func() error {
		data, ok := rpxCommonDataOf(conn.PrivateData())
		if !ok {
			return rpxExit(-1)
		}
		src, err := e.remoteMR(&data)
		if err != nil {
			return err
		}
		if err := conn.Read(dst, 0, src, uint64(data.dataOffset), rpxHelloStrSize, rpma.Always, 0); err != nil {
			return e.fail("rpma_read", err)
		}
		wc, err := e.getWC(conn.CQ())
		if err != nil {
			return err
		}
		if err := e.checkWC(wc, "rpma_read", verbs.WCRDMARead); err != nil {
			return err
		}
		e.printf("New value: %s\n", rpxCString(buf))
		return nil
	}()
	if err := e.disconnectAndWaitClose(conn); err != nil && ret == nil {
		ret = err
	}
	return ret
}

func rpx03Client(e *rpxEnv) error {
	hello, err := e.helloClientMem()
	if err != nil {
		return err
	}
	e.printf("Next value: %s\n", rpxHelloText(hello))
	peer, err := e.clientPeer()
	if err != nil {
		return err
	}
	m, err := e.reg(peer, hello, rpma.UsageReadSrc)
	if err != nil {
		return err
	}
	data := rpxCommonData{dataOffset: rpxHelloStrOffset, mrDescSize: rpma.DescriptorSize}
	copy(data.descriptors[:], m.Descriptor())
	conn, err := e.clientConnect(peer, nil, data.bytes())
	if err != nil {
		return err
	}
	// The server reads while the connection is up.
	e.waitCloseAndDisconnect(conn)
	e.translate(hello)
	e.printf("Translation: %s\n", rpxHelloText(hello))
	return nil
}

// rpxHelloServer is the server of 04 and 05: it exposes its string for
// writing (and flushing) and prints it once the client is gone.
func rpxHelloServer(e *rpxEnv, usage rpma.Usage, pcfg *rpma.PeerCfg) error {
	buf, err := e.helloServerMem()
	if err != nil {
		return err
	}
	peer, err := e.serverPeer()
	if err != nil {
		return err
	}
	ep, err := e.listen(peer)
	if err != nil {
		return err
	}
	m, err := e.reg(peer, buf, usage)
	if err != nil {
		return err
	}
	data := rpxCommonData{mrDescSize: rpma.DescriptorSize}
	copy(data.descriptors[:], m.Descriptor())
	if pcfg != nil {
		d := pcfg.Descriptor()
		data.pcfgDescSize = uint8(len(d))
		copy(data.descriptors[rpma.DescriptorSize:], d)
	}
	conn, err := e.serverAccept(ep, nil, data.bytes())
	if err != nil {
		return err
	}
	if err := e.waitCloseAndDisconnect(conn); err != nil {
		return err
	}
	e.printf("New value: %s\n", rpxCString(buf))
	return nil
}

func rpx04Server(e *rpxEnv) error {
	return rpxHelloServer(e, rpma.UsageWriteDst|rpma.UsageReadSrc, nil)
}

func rpx05Server(e *rpxEnv) error {
	// DRAM: no persistent flush, and no direct write to PMem.
	return rpxHelloServer(e, rpma.UsageWriteDst|rpma.UsageFlushVisibility, &rpma.PeerCfg{})
}

// helloWriteTarget returns the server's region and the offset of its
// string, from the connection's private data, checking there is room for
// the string.
func (e *rpxEnv) helloWriteTarget(conn *rpma.Conn, data *rpxCommonData, what string) (*rpma.RemoteMR, uint64, error) {
	dst, err := e.remoteMR(data)
	if err != nil {
		return nil, 0, err
	}
	off := uint64(data.dataOffset)
	if dst.Size()-off < rpxHelloStrSize {
		e.eprintf("%s (%d < %d)\n", what, dst.Size()-off, rpxHelloStrSize)
		return nil, 0, rpxExit(-1)
	}
	return dst, off, nil
}

func rpx04Client(e *rpxEnv) error {
	hello, err := e.helloClientMem()
	if err != nil {
		return err
	}
	raw, err := e.mem(8)
	if err != nil {
		return err
	}
	e.printf("Next value: %s\n", rpxHelloText(hello))
	peer, err := e.clientPeer()
	if err != nil {
		return err
	}
	conn, err := e.clientConnect(peer, nil, nil)
	if err != nil {
		return err
	}
	defer e.disconnectAndWaitClose(conn)
	src, err := e.reg(peer, hello, rpma.UsageWriteSrc)
	if err != nil {
		return err
	}
	rawMR, err := e.reg(peer, raw, rpma.UsageReadDst)
	if err != nil {
		return err
	}
	data, ok := rpxCommonDataOf(conn.PrivateData())
	if !ok {
		return nil
	}
	dst, off, err := e.helloWriteTarget(conn, &data,
		"Remote memory region size too small for writing the data of the assumed size")
	if err != nil {
		return err
	}
	if err := conn.Write(dst, off, src, rpxHelloStrOffset, rpxHelloStrSize, rpma.OnError, 0); err != nil {
		return e.fail("rpma_write", err)
	}
	// A read after the write makes the write complete at the server.
	if err := conn.Read(rawMR, 0, dst, 0, 8, rpma.Always, 0); err != nil {
		return e.fail("rpma_read", err)
	}
	wc, err := e.getWC(conn.CQ())
	if err != nil {
		return err
	}
	if err := e.checkWC(wc, "rpma_read", verbs.WCRDMARead); err != nil {
		return err
	}
	e.translate(hello)
	e.printf("Translation: %s\n", rpxHelloText(hello))
	return nil
}

// rpxFlushID is the op context of the examples' flushes.
const rpxFlushID = 0xF01D

func rpx05Client(e *rpxEnv) error {
	hello, err := e.helloClientMem()
	if err != nil {
		return err
	}
	e.printf("Next value: %s\n", rpxHelloText(hello))
	peer, err := e.clientPeer()
	if err != nil {
		return err
	}
	conn, err := e.clientConnect(peer, nil, nil)
	if err != nil {
		return err
	}
	defer e.disconnectAndWaitClose(conn)
	src, err := e.reg(peer, hello, rpma.UsageWriteSrc)
	if err != nil {
		return err
	}
	data, ok := rpxCommonDataOf(conn.PrivateData())
	if !ok {
		return nil
	}
	pcfg, err := rpma.PeerCfgFromDescriptor(data.pcfgDesc())
	if err != nil {
		return e.fail("rpma_peer_cfg_from_descriptor", err)
	}
	if err := conn.ApplyRemotePeerCfg(pcfg); err != nil {
		return e.fail("rpma_conn_apply_remote_peer_cfg", err)
	}
	dst, off, err := e.helloWriteTarget(conn, &data,
		"Remote memory region size too small for writing the data of the assumed size")
	if err != nil {
		return nil // as in C: reported, and the example ends with 0
	}
	if err := conn.Write(dst, off, src, rpxHelloStrOffset, rpxHelloStrSize, rpma.OnError, 0); err != nil {
		return e.fail("rpma_write", err)
	}
	typ := rpma.FlushVisibility
	if pcfg.DirectWriteToPMem {
		e.printf("RPMA_FLUSH_TYPE_PERSISTENT is supported\n")
		typ = rpma.FlushPersistent
	} else {
		e.printf("RPMA_FLUSH_TYPE_PERSISTENT is NOT supported, RPMA_FLUSH_TYPE_VISIBILITY is used instead\n")
	}
	if err := conn.Flush(dst, off, rpxHelloStrSize, typ, rpma.Always, rpxFlushID); err != nil {
		return e.fail("rpma_flush", err)
	}
	wc, err := e.getWC(conn.CQ())
	if err != nil {
		return err
	}
	if wc.WRID != rpxFlushID {
		e.eprintf("unexpected wc.wr_id value (0x%X != 0x%X)\n", wc.WRID, rpxFlushID)
		return rpxExit(-1)
	}
	if wc.Status != verbs.WCSuccess {
		e.eprintf("rpma_flush() failed: %s\n", wc.Status)
		return rpxExit(-1)
	}
	e.translate(hello)
	e.printf("Translation: %s\n", rpxHelloText(hello))
	return nil
}
