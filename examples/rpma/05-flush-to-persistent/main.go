// Command 05-flush-to-persistent is librpma's example 05-flush-to-persistent in Go.
//
// The client keeps a greeting (struct hello_t), the server a 1 KiB
// string. The client writes the greeting into the server's region and
// flushes it, as the server's peer configuration allows; then it
// translates its greeting for next time. (DRAM only: no PMem path.)
//
//	05-flush-to-persistent server <server_address> <port> [<pmem-path>] [direct-pmem-write]
//	05-flush-to-persistent client <server_address> <port> [<pmem-path> [<pmem-offset>]]
package main

import (
	"github.com/goverbs/goverbs/examples/rpma/internal/common"
	"github.com/goverbs/goverbs/rpma"
	"github.com/goverbs/goverbs/verbs"
)

// example is this program for common.Main.
var example = common.Example{Name: "05-flush-to-persistent", Server: server, Client: client, ServerArgs: "[<pmem-path>] [direct-pmem-write]", ClientArgs: "[<pmem-path> [<pmem-offset>]]"}

func main() { common.Main(example) }

// server exposes its string for writing and flushing, with its peer
// configuration, and prints it once the client is gone.
func server(e *common.Env) error {
	buf, err := e.HelloServerMem()
	if err != nil {
		return err
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
	data := common.CommonData{MRDescSize: rpma.DescriptorSize}
	copy(data.Descriptors[:], m.Descriptor())
	// DRAM: no persistent flush, and no direct write to PMem.
	pcfg := &rpma.PeerCfg{}
	d := pcfg.Descriptor()
	data.PCfgDescSize = uint8(len(d))
	copy(data.Descriptors[rpma.DescriptorSize:], d)
	conn, err := e.ServerAccept(ep, nil, data.Bytes())
	if err != nil {
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
	peer, err := e.ClientPeer()
	if err != nil {
		return err
	}
	conn, err := e.ClientConnect(peer, nil, nil)
	if err != nil {
		return err
	}
	defer e.DisconnectAndWaitClose(conn)
	src, err := e.Reg(peer, hello, rpma.UsageWriteSrc)
	if err != nil {
		return err
	}
	data, ok := common.CommonDataOf(conn.PrivateData())
	if !ok {
		return nil
	}
	pcfg, err := rpma.PeerCfgFromDescriptor(data.PCfgDesc())
	if err != nil {
		return e.Fail("rpma_peer_cfg_from_descriptor", err)
	}
	if err := conn.ApplyRemotePeerCfg(pcfg); err != nil {
		return e.Fail("rpma_conn_apply_remote_peer_cfg", err)
	}
	dst, off, err := e.HelloWriteTarget(conn, &data,
		"Remote memory region size too small for writing the data of the assumed size")
	if err != nil {
		return nil // as in C: reported, and the example ends with 0
	}
	if err := conn.Write(dst, off, src, common.HelloStrOffset, common.HelloStrSize, rpma.OnError, 0); err != nil {
		return e.Fail("rpma_write", err)
	}
	typ := rpma.FlushVisibility
	if pcfg.DirectWriteToPMem {
		e.Printf("RPMA_FLUSH_TYPE_PERSISTENT is supported\n")
		typ = rpma.FlushPersistent
	} else {
		e.Printf("RPMA_FLUSH_TYPE_PERSISTENT is NOT supported, RPMA_FLUSH_TYPE_VISIBILITY is used instead\n")
	}
	if err := conn.Flush(dst, off, common.HelloStrSize, typ, rpma.Always, common.FlushID); err != nil {
		return e.Fail("rpma_flush", err)
	}
	wc, err := e.GetWC(conn.CQ())
	if err != nil {
		return err
	}
	if wc.WRID != common.FlushID {
		e.Eprintf("unexpected wc.wr_id value (0x%X != 0x%X)\n", wc.WRID, common.FlushID)
		return common.Exit(-1)
	}
	if wc.Status != verbs.WCSuccess {
		e.Eprintf("rpma_flush() failed: %s\n", wc.Status)
		return common.Exit(-1)
	}
	e.Translate(hello)
	e.Printf("Translation: %s\n", common.HelloText(hello))
	return nil
}
