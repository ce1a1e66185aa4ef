package main

import (
	"encoding/binary"

	"github.com/goverbs/goverbs/rpma"
	"github.com/goverbs/goverbs/verbs"
)

// 07-atomic-write: the server keeps a log (struct log: char signature[8];
// uint64_t used; char data[1024]) and publishes where its "used" field is
// (common_data's data_offset). The client reads "used", then for each
// word writes it at "used", flushes, moves "used" past it with an atomic
// write, and flushes again. The server prints the words once the client is
// gone.

const (
	rpx07SigSize  = 8
	rpx07DataSize = 1024
	rpx07LogSize  = rpx07SigSize + 8 + rpx07DataSize
	rpx07UsedOff  = rpx07SigSize     // offsetof(struct log, used)
	rpx07DataOff  = rpx07UsedOff + 8 // offsetof(struct log, data)
)

func rpx07Server(e *rpxEnv) error {
	e.eprintf(rpxNoPMem)
	log, err := e.mem(rpx07LogSize)
	if err != nil {
		return err
	}
	binary.NativeEndian.PutUint64(log[rpx07UsedOff:], rpx07DataOff)
	peer, err := e.serverPeer()
	if err != nil {
		return err
	}
	ep, err := e.listen(peer)
	if err != nil {
		return err
	}
	m, err := e.reg(peer, log, rpma.UsageWriteDst|rpma.UsageReadSrc|rpma.UsageFlushVisibility)
	if err != nil {
		return err
	}
	data := rpxCommonData{dataOffset: rpx07UsedOff, mrDescSize: rpma.DescriptorSize}
	copy(data.descriptors[:], m.Descriptor())
	conn, err := e.serverAccept(ep, nil, data.bytes())
	if err != nil {
		return err
	}
	if err := e.waitCloseAndDisconnect(conn); err != nil {
		return err
	}
	// The words, NUL-terminated one after another, one per line.
	used := min(binary.NativeEndian.Uint64(log[rpx07UsedOff:]), rpx07LogSize)
	out := make([]byte, 0, rpx07DataSize)
	for _, c := range log[rpx07DataOff:max(used, rpx07DataOff)] {
		if c == 0 {
			c = '\n'
		}
		out = append(out, c)
	}
	e.printf("%s", out)
	return nil
}

func rpx07Client(e *rpxEnv) error {
	const maxWord = rpxKilobyte - 1
	buf, err := e.mem(rpxKilobyte)
	if err != nil {
		return err
	}
	peer, err := e.clientPeer()
	if err != nil {
		return err
	}
	conn, err := e.clientConnect(peer, nil, nil)
	if err != nil {
		return err
	}
	defer e.disconnectAndWaitClose(conn)
	// The server is taken to support persistent flushes (unilaterally);
	// its region says which flush it supports.
	if err := conn.ApplyRemotePeerCfg(&rpma.PeerCfg{DirectWriteToPMem: true}); err != nil {
		return e.fail("rpma_conn_apply_remote_peer_cfg", err)
	}
	local, err := e.reg(peer, buf, rpma.UsageWriteSrc|rpma.UsageReadDst)
	if err != nil {
		return err
	}
	data, ok := rpxCommonDataOf(conn.PrivateData())
	if !ok {
		return nil
	}
	usedOff := uint64(data.dataOffset)
	remote, err := e.remoteMR(&data)
	if err != nil {
		return err
	}
	if err := conn.Read(local, 0, remote, usedOff, 8, rpma.Always, 0); err != nil {
		return e.fail("rpma_read", err)
	}
	cq := conn.CQ()
	wc, err := e.getWC(cq)
	if err != nil {
		return err
	}
	if wc.Status != verbs.WCSuccess {
		e.eprintf("rpma_read() failed: %s\n", wc.Status)
		return rpxExit(-2)
	}
	used := binary.NativeEndian.Uint64(buf)
	e.printf("used value: %d\n", used)
	if remote.Size() <= used {
		e.eprintf("Log size exhausted.\n")
		return rpxExit(-2)
	}
	typ := rpma.FlushVisibility
	if remote.FlushType()&rpma.UsageFlushPersistent != 0 {
		typ = rpma.FlushPersistent
	}
	for _, word := range e.args {
		rpxStrncpy(buf[:maxWord], word)
		buf[maxWord] = 0
		size := uint64(len(rpxCString(buf))) + 1
		if err := conn.Write(remote, used, local, 0, size, rpma.OnError, 0); err != nil {
			return e.fail("rpma_write", err)
		}
		if err := conn.Flush(remote, used, size, typ, rpma.OnError, 0); err != nil {
			return e.fail("rpma_flush", err)
		}
		used += size
		var u [8]byte
		binary.NativeEndian.PutUint64(u[:], used)
		if err := conn.AtomicWrite(remote, usedOff, u, rpma.OnError, 0); err != nil {
			return e.fail("rpma_atomic_write", err)
		}
		if err := conn.Flush(remote, usedOff, 8, typ, rpma.Always, rpxFlushID); err != nil {
			return e.fail("rpma_flush", err)
		}
		wc, err := e.getWC(cq)
		if err != nil {
			return err
		}
		if wc.WRID != rpxFlushID {
			e.eprintf("unexpected wc.wr_id value (0x%X != 0x%X)\n", wc.WRID, rpxFlushID)
			return rpxExit(-2)
		}
		if wc.Status != verbs.WCSuccess {
			e.eprintf("rpma_flush() failed: %s\n", wc.Status)
			return rpxExit(-2)
		}
	}
	return nil
}
