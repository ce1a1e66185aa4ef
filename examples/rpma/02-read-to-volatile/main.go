// Command 02-read-to-volatile is librpma's example 02-read-to-volatile in Go.
//
// The server exposes a string in a READ_SRC region (its descriptor in
// common_data, as the accept's private data); the client reads the whole
// region and prints it.
//
//	02-read-to-volatile server <server_address> <port>
//	02-read-to-volatile client <server_address> <port>
package main

import (
	"github.com/goverbs/goverbs/examples/rpma/internal/common"
	"github.com/goverbs/goverbs/rpma"
	"github.com/goverbs/goverbs/verbs"
)

// example is this program for common.Main.
var example = common.Example{Name: "02-read-to-volatile", Server: server, Client: client}

func main() { common.Main(example) }

func server(e *common.Env) error {
	peer, err := e.ServerPeer()
	if err != nil {
		return err
	}
	ep, err := e.Listen(peer)
	if err != nil {
		return err
	}
	const hello = "Hello client!"
	buf, err := e.Mem(len(hello) + 1)
	if err != nil {
		return err
	}
	copy(buf, hello)
	m, err := e.Reg(peer, buf, rpma.UsageReadSrc)
	if err != nil {
		return err
	}
	data := common.CommonData{MRDescSize: rpma.DescriptorSize}
	copy(data.Descriptors[:], m.Descriptor())
	conn, err := e.ServerAccept(ep, nil, data.Bytes())
	if err != nil {
		return err
	}
	// The client reads while the connection is up.
	e.WaitCloseAndDisconnect(conn)
	return nil
}

func client(e *common.Env) error {
	peer, err := e.ClientPeer()
	if err != nil {
		return err
	}
	dst, err := e.Mem(common.Kilobyte)
	if err != nil {
		return err
	}
	dstMR, err := e.Reg(peer, dst, rpma.UsageReadDst)
	if err != nil {
		return err
	}
	conn, err := e.ClientConnect(peer, nil, nil)
	if err != nil {
		return err
	}
	defer e.DisconnectAndWaitClose(conn)
	data, ok := common.CommonDataOf(conn.PrivateData())
	if !ok {
		e.Eprintf("The server has not provided a remote memory region. (the connection's private data is empty)\n")
		return nil
	}
	src, err := e.RemoteMR(&data)
	if err != nil {
		return err
	}
	if src.Size() > common.Kilobyte {
		e.Eprintf("Remote memory region size too big to reading to the sink buffer of the assumed size (%d > %d)\n",
			src.Size(), common.Kilobyte)
		return nil
	}
	if err := conn.Read(dstMR, 0, src, 0, src.Size(), rpma.Always, 0); err != nil {
		return e.Fail("rpma_read", err)
	}
	wc, err := e.GetWC(conn.CQ())
	if err != nil {
		return err
	}
	if wc.Status != verbs.WCSuccess {
		e.Eprintf("rpma_read() failed: %s\n", wc.Status)
		return common.Exit(-1)
	}
	if wc.Opcode != verbs.WCRDMARead {
		e.Eprintf("unexpected wc.opcode value (%d != %d)\n", wc.Opcode, verbs.WCRDMARead)
		return common.Exit(-1)
	}
	e.Printf("Read a message: %s\n", common.CString(dst))
	return nil
}
