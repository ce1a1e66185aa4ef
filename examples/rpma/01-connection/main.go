// Command 01-connection is librpma's example 01-connection in Go.
//
// The two ends exchange a greeting as the private data of the
// connection, then disconnect.
//
//	01-connection server <server_address> <port>
//	01-connection client <server_address> <port>
package main

import (
	"time"

	"github.com/goverbs/goverbs/examples/rpma/internal/common"
	"github.com/goverbs/goverbs/rpma"
)

// example is this program for common.Main.
var example = common.Example{Name: "01-connection", Server: server, Client: client}

func main() { common.Main(example) }

// cStringData returns s with its terminating NUL, as the examples pass
// strings as private data.
func cStringData(s string) []byte { return append([]byte(s), 0) }

// printMessage prints the greeting of the other end.
func printMessage(e *common.Env, conn *rpma.Conn) {
	if pd := conn.PrivateData(); pd != nil {
		e.Printf("Received a message: %s\n", common.CString(pd))
	} else {
		e.Printf("No message received\n")
	}
}

func server(e *common.Env) error {
	peer, err := e.ServerPeer()
	if err != nil {
		return err
	}
	ep, err := e.Listen(peer)
	if err != nil {
		return err
	}
	conn, err := e.ServerAccept(ep, nil, cStringData("Hello client!"))
	if err != nil {
		return err
	}
	printMessage(e, conn)
	if err := conn.Disconnect(); err != nil {
		return e.Fail("rpma_conn_disconnect", err)
	}
	ev, err := e.NextEvent(conn)
	if err != nil {
		return err
	}
	if ev != rpma.ConnClosed {
		e.Eprintf("rpma_conn_next_event returned an unexpected event: %s\n", ev)
		return common.ErrFailed
	}
	if err := e.DeleteConn(conn); err != nil {
		return e.Fail("rpma_conn_delete", err)
	}
	return nil
}

// retries and retryDelay: the client tries 10 times, 5 s apart,
// while the server is not listening yet.
const (
	retries    = 10
	retryDelay = 5 * time.Second
)

func client(e *common.Env) error {
	peer, err := e.ClientPeer()
	if err != nil {
		return err
	}
	pdata := cStringData("Hello server!")
	var conn *rpma.Conn
	for retry := 0; retry < retries && conn == nil; retry++ {
		req, err := peer.NewConnReq(e.Ctx, e.Addr, e.Port, nil)
		if err != nil {
			return e.Fail("rpma_conn_req_new", err)
		}
		ctx, cancel := e.Op()
		c, err := req.Connect(ctx, pdata)
		cancel()
		if err != nil {
			return e.Fail("rpma_conn_req_connect", err)
		}
		e.Keep(c)
		ev, err := e.NextEvent(c)
		switch {
		case err != nil:
			return err
		case ev == rpma.ConnEstablished:
			conn = c
		case ev == rpma.ConnRejected:
			c.Disconnect()
			e.DeleteConn(c)
			if retry < retries-1 {
				e.Eprintf("Retrying...\n")
				select {
				case <-time.After(retryDelay):
				case <-e.Ctx.Done():
					return e.Ctx.Err()
				}
			} else {
				e.Eprintf("The retry number exceeded. Closing.\n")
			}
		default:
			e.Eprintf("rpma_conn_next_event returned an unexpected event: %s\n", ev)
			return common.ErrFailed
		}
	}
	if conn == nil {
		return common.ErrFailed
	}
	printMessage(e, conn)
	ev, err := e.NextEvent(conn)
	if err != nil {
		return err
	}
	if ev != rpma.ConnClosed {
		e.Eprintf("rpma_conn_next_event returned an unexpected event: %s\n", ev)
		return common.ErrFailed
	}
	if err := conn.Disconnect(); err != nil {
		return e.Fail("rpma_conn_disconnect", err)
	}
	if err := e.DeleteConn(conn); err != nil {
		return e.Fail("rpma_conn_delete", err)
	}
	return nil
}
