// Command 04-write-to-persistent is librpma's example 04-write-to-persistent in Go.
//
// The client keeps a greeting (struct hello_t), the server a 1 KiB
// string. The client writes the greeting into the server's region and
// reads 8 bytes back (which makes the write complete at the server);
// then it translates its greeting for next time. (DRAM only: no PMem
// path.)
//
//	04-write-to-persistent server <server_address> <port> [<pmem-path>]
//	04-write-to-persistent client <server_address> <port> [<pmem-path> [<pmem-offset>]]
package main

import (
	"github.com/goverbs/goverbs/examples/rpma/internal/common"
	"github.com/goverbs/goverbs/rpma"
	"github.com/goverbs/goverbs/verbs"
)

// example is this program for common.Main.
var example = common.Example{Name: "04-write-to-persistent", Server: server, Client: client, ServerArgs: "[<pmem-path>]", ClientArgs: "[<pmem-path> [<pmem-offset>]]"}

func main() { common.Main(example) }

// server exposes its string for writing and prints it once the client is
// gone.
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
	m, err := e.Reg(peer, buf, rpma.UsageWriteDst|rpma.UsageReadSrc)
	if err != nil {
		return err
	}
	data := common.CommonData{MRDescSize: rpma.DescriptorSize}
	copy(data.Descriptors[:], m.Descriptor())
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
	raw, err := e.Mem(8)
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
	rawMR, err := e.Reg(peer, raw, rpma.UsageReadDst)
	if err != nil {
		return err
	}
	data, ok := common.CommonDataOf(conn.PrivateData())
	if !ok {
		return nil
	}
	dst, off, err := e.HelloWriteTarget(conn, &data,
		"Remote memory region size too small for writing the data of the assumed size")
	if err != nil {
		return err
	}
	if err := conn.Write(dst, off, src, common.HelloStrOffset, common.HelloStrSize, rpma.OnError, 0); err != nil {
		return e.Fail("rpma_write", err)
	}
	// A read after the write makes the write complete at the server.
	if err := conn.Read(rawMR, 0, dst, 0, 8, rpma.Always, 0); err != nil {
		return e.Fail("rpma_read", err)
	}
	wc, err := e.GetWC(conn.CQ())
	if err != nil {
		return err
	}
	if err := e.CheckWC(wc, "rpma_read", verbs.WCRDMARead); err != nil {
		return err
	}
	e.Translate(hello)
	e.Printf("Translation: %s\n", common.HelloText(hello))
	return nil
}
