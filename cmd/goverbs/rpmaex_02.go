package main

import (
	"github.com/goverbs/goverbs/rpma"
	"github.com/goverbs/goverbs/verbs"
)

// 02-read-to-volatile: the server exposes a string in a READ_SRC region
// (its descriptor in common_data, as the accept's private data); the
// client reads the whole region and prints it.

const rpxKilobyte = 1024

func rpx02Server(e *rpxEnv) error {
	peer, err := e.serverPeer()
	if err != nil {
		return err
	}
	ep, err := e.listen(peer)
	if err != nil {
		return err
	}
	const hello = "Hello client!"
	buf, err := e.mem(len(hello) + 1)
	if err != nil {
		return err
	}
	copy(buf, hello)
	m, err := e.reg(peer, buf, rpma.UsageReadSrc)
	if err != nil {
		return err
	}
	data := rpxCommonData{mrDescSize: rpma.DescriptorSize}
	copy(data.descriptors[:], m.Descriptor())
	conn, err := e.serverAccept(ep, nil, data.bytes())
	if err != nil {
		return err
	}
	// The client reads while the connection is up.
	e.waitCloseAndDisconnect(conn)
	return nil
}

func rpx02Client(e *rpxEnv) error {
	peer, err := e.clientPeer()
	if err != nil {
		return err
	}
	dst, err := e.mem(rpxKilobyte)
	if err != nil {
		return err
	}
	dstMR, err := e.reg(peer, dst, rpma.UsageReadDst)
	if err != nil {
		return err
	}
	conn, err := e.clientConnect(peer, nil, nil)
	if err != nil {
		return err
	}
	defer e.disconnectAndWaitClose(conn)
	data, ok := rpxCommonDataOf(conn.PrivateData())
	if !ok {
		e.eprintf("The server has not provided a remote memory region. (the connection's private data is empty)\n")
		return nil
	}
	src, err := e.remoteMR(&data)
	if err != nil {
		return err
	}
	if src.Size() > rpxKilobyte {
		e.eprintf("Remote memory region size too big to reading to the sink buffer of the assumed size (%d > %d)\n",
			src.Size(), rpxKilobyte)
		return nil
	}
	if err := conn.Read(dstMR, 0, src, 0, src.Size(), rpma.Always, 0); err != nil {
		return e.fail("rpma_read", err)
	}
	wc, err := e.getWC(conn.CQ())
	if err != nil {
		return err
	}
	if wc.Status != verbs.WCSuccess {
		e.eprintf("rpma_read() failed: %s\n", wc.Status)
		return rpxExit(-1)
	}
	if wc.Opcode != verbs.WCRDMARead {
		e.eprintf("unexpected wc.opcode value (%d != %d)\n", wc.Opcode, verbs.WCRDMARead)
		return rpxExit(-1)
	}
	e.printf("Read a message: %s\n", rpxCString(dst))
	return nil
}
