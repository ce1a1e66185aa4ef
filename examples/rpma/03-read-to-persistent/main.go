// Command 03-read-to-persistent is librpma's example 03-read-to-persistent in Go.
//
// The client keeps a greeting (struct hello_t), the server a 1 KiB
// string. The server reads the greeting (the client's region descriptor
// comes with the connection request) and prints it; then the client
// translates its greeting for next time. (DRAM only: no PMem path.)
//
//	03-read-to-persistent server <server_address> <port> [<pmem-path>]
//	03-read-to-persistent client <server_address> <port> [<pmem-path> [<pmem-offset>]]
package main

import (
	"github.com/goverbs/goverbs/examples/rpma/internal/common"
	"github.com/goverbs/goverbs/rpma"
	"github.com/goverbs/goverbs/verbs"
)

// example is this program for common.Main.
var example = common.Example{Name: "03-read-to-persistent", Server: server, Client: client, ServerArgs: "[<pmem-path>]", ClientArgs: "[<pmem-path> [<pmem-offset>]]"}

func main() { common.Main(example) }

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
	dst, err := e.Reg(peer, buf, rpma.UsageReadDst)
	if err != nil {
		return err
	}
	conn, err := e.ServerAccept(ep, nil, nil)
	if err != nil {
		return err
	}
	// The connection is closed from here whatever happens.
	ret := func() error {
		data, ok := common.CommonDataOf(conn.PrivateData())
		if !ok {
			return common.Exit(-1)
		}
		src, err := e.RemoteMR(&data)
		if err != nil {
			return err
		}
		if err := conn.Read(dst, 0, src, uint64(data.DataOffset), common.HelloStrSize, rpma.Always, 0); err != nil {
			return e.Fail("rpma_read", err)
		}
		wc, err := e.GetWC(conn.CQ())
		if err != nil {
			return err
		}
		if err := e.CheckWC(wc, "rpma_read", verbs.WCRDMARead); err != nil {
			return err
		}
		e.Printf("New value: %s\n", common.CString(buf))
		return nil
	}()
	if err := e.DisconnectAndWaitClose(conn); err != nil && ret == nil {
		ret = err
	}
	return ret
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
	m, err := e.Reg(peer, hello, rpma.UsageReadSrc)
	if err != nil {
		return err
	}
	data := common.CommonData{DataOffset: common.HelloStrOffset, MRDescSize: rpma.DescriptorSize}
	copy(data.Descriptors[:], m.Descriptor())
	conn, err := e.ClientConnect(peer, nil, data.Bytes())
	if err != nil {
		return err
	}
	// The server reads while the connection is up.
	e.WaitCloseAndDisconnect(conn)
	e.Translate(hello)
	e.Printf("Translation: %s\n", common.HelloText(hello))
	return nil
}
