// Command 07-atomic-write is librpma's example 07-atomic-write in Go.
//
// The server keeps a log (struct log: char signature[8]; uint64_t used;
// char data[1024]) and publishes where its "used" field is (common_data's
// data_offset). The client reads "used", then for each word writes it at
// "used", flushes, moves "used" past it with an atomic write, and flushes
// again. The server prints the words once the client is gone.
//
//	07-atomic-write server <server_address> <port> [<pmem-path>]
//	07-atomic-write client <server_address> <port> <word1> [<word2>] [..]
package main

import (
	"encoding/binary"

	"github.com/goverbs/goverbs/examples/rpma/internal/common"
	"github.com/goverbs/goverbs/rpma"
	"github.com/goverbs/goverbs/verbs"
)

// example is this program for common.Main.
var example = common.Example{Name: "07-atomic-write", Server: server, Client: client, ServerArgs: "[<pmem-path>]", ClientArgs: "<word1> [<word2>] [..]", ClientNeeds: 1}

func main() { common.Main(example) }

const (
	rpx07SigSize  = 8
	rpx07DataSize = 1024
	rpx07LogSize  = rpx07SigSize + 8 + rpx07DataSize
	rpx07UsedOff  = rpx07SigSize     // offsetof(struct log, used)
	rpx07DataOff  = rpx07UsedOff + 8 // offsetof(struct log, data)
)

func server(e *common.Env) error {
	e.Eprintf(common.NoPMem)
	log, err := e.Mem(rpx07LogSize)
	if err != nil {
		return err
	}
	binary.NativeEndian.PutUint64(log[rpx07UsedOff:], rpx07DataOff)
	peer, err := e.ServerPeer()
	if err != nil {
		return err
	}
	ep, err := e.Listen(peer)
	if err != nil {
		return err
	}
	m, err := e.Reg(peer, log, rpma.UsageWriteDst|rpma.UsageReadSrc|rpma.UsageFlushVisibility)
	if err != nil {
		return err
	}
	data := common.CommonData{DataOffset: rpx07UsedOff, MRDescSize: rpma.DescriptorSize}
	copy(data.Descriptors[:], m.Descriptor())
	conn, err := e.ServerAccept(ep, nil, data.Bytes())
	if err != nil {
		return err
	}
	if err := e.WaitCloseAndDisconnect(conn); err != nil {
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
	e.Printf("%s", out)
	return nil
}

func client(e *common.Env) error {
	const maxWord = common.Kilobyte - 1
	buf, err := e.Mem(common.Kilobyte)
	if err != nil {
		return err
	}
	peer, err := e.ClientPeer()
	if err != nil {
		return err
	}
	conn, err := e.ClientConnect(peer, nil, nil)
	if err != nil {
		return err
	}
	defer e.DisconnectAndWaitClose(conn)
	// The server is taken to support persistent flushes (unilaterally);
	// its region says which flush it supports.
	if err := conn.ApplyRemotePeerCfg(&rpma.PeerCfg{DirectWriteToPMem: true}); err != nil {
		return e.Fail("rpma_conn_apply_remote_peer_cfg", err)
	}
	local, err := e.Reg(peer, buf, rpma.UsageWriteSrc|rpma.UsageReadDst)
	if err != nil {
		return err
	}
	data, ok := common.CommonDataOf(conn.PrivateData())
	if !ok {
		return nil
	}
	usedOff := uint64(data.DataOffset)
	remote, err := e.RemoteMR(&data)
	if err != nil {
		return err
	}
	if err := conn.Read(local, 0, remote, usedOff, 8, rpma.Always, 0); err != nil {
		return e.Fail("rpma_read", err)
	}
	cq := conn.CQ()
	wc, err := e.GetWC(cq)
	if err != nil {
		return err
	}
	if wc.Status != verbs.WCSuccess {
		e.Eprintf("rpma_read() failed: %s\n", wc.Status)
		return common.Exit(-2)
	}
	used := binary.NativeEndian.Uint64(buf)
	e.Printf("used value: %d\n", used)
	if remote.Size() <= used {
		e.Eprintf("Log size exhausted.\n")
		return common.Exit(-2)
	}
	typ := rpma.FlushVisibility
	if remote.FlushType()&rpma.UsageFlushPersistent != 0 {
		typ = rpma.FlushPersistent
	}
	for _, word := range e.Args {
		common.Strncpy(buf[:maxWord], word)
		buf[maxWord] = 0
		size := uint64(len(common.CString(buf))) + 1
		if err := conn.Write(remote, used, local, 0, size, rpma.OnError, 0); err != nil {
			return e.Fail("rpma_write", err)
		}
		if err := conn.Flush(remote, used, size, typ, rpma.OnError, 0); err != nil {
			return e.Fail("rpma_flush", err)
		}
		used += size
		var u [8]byte
		binary.NativeEndian.PutUint64(u[:], used)
		if err := conn.AtomicWrite(remote, usedOff, u, rpma.OnError, 0); err != nil {
			return e.Fail("rpma_atomic_write", err)
		}
		if err := conn.Flush(remote, usedOff, 8, typ, rpma.Always, common.FlushID); err != nil {
			return e.Fail("rpma_flush", err)
		}
		wc, err := e.GetWC(cq)
		if err != nil {
			return err
		}
		if wc.WRID != common.FlushID {
			e.Eprintf("unexpected wc.wr_id value (0x%X != 0x%X)\n", wc.WRID, common.FlushID)
			return common.Exit(-2)
		}
		if wc.Status != verbs.WCSuccess {
			e.Eprintf("rpma_flush() failed: %s\n", wc.Status)
			return common.Exit(-2)
		}
	}
	return nil
}
