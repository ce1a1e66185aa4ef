package main

import (
	"time"

	"github.com/goverbs/goverbs/rpma"
)

// 01-connection: the two ends exchange a greeting as the private data of
// the connection, then disconnect.

// rpxCStringData returns s with its terminating NUL, as the examples pass
// strings as private data.
func rpxCStringData(s string) []byte { return append([]byte(s), 0) }

// printMessage prints the greeting of the other end.
func (e *rpxEnv) printMessage(conn *rpma.Conn) {
	if pd := conn.PrivateData(); pd != nil {
		e.printf("Received a message: %s\n", rpxCString(pd))
	} else {
		e.printf("No message received\n")
	}
}

func rpx01Server(e *rpxEnv) error {
	peer, err := e.serverPeer()
	if err != nil {
		return err
	}
	ep, err := e.listen(peer)
	if err != nil {
		return err
	}
	conn, err := e.serverAccept(ep, nil, rpxCStringData("Hello client!"))
	if err != nil {
		return err
	}
	e.printMessage(conn)
	if err := conn.Disconnect(); err != nil {
		return e.fail("rpma_conn_disconnect", err)
	}
	ev, err := e.nextEvent(conn)
	if err != nil {
		return err
	}
	if ev != rpma.ConnClosed {
		e.eprintf("rpma_conn_next_event returned an unexpected event: %s\n", ev)
		return rpxFailed
	}
	if err := e.deleteConn(conn); err != nil {
		return e.fail("rpma_conn_delete", err)
	}
	return nil
}

// rpx01Retries and rpx01RetryDelay: the client tries 10 times, 5 s apart,
// while the server is not listening yet.
const (
	rpx01Retries    = 10
	rpx01RetryDelay = 5 * time.Second
)

func rpx01Client(e *rpxEnv) error {
	peer, err := e.clientPeer()
	if err != nil {
		return err
	}
	pdata := rpxCStringData("Hello server!")
	var conn *rpma.Conn
	for retry := 0; retry < rpx01Retries && conn == nil; retry++ {
		req, err := peer.NewConnReq(e.ctx, e.addr, e.port, nil)
		if err != nil {
			return e.fail("rpma_conn_req_new", err)
		}
		ctx, cancel := e.op()
		c, err := req.Connect(ctx, pdata)
		cancel()
		if err != nil {
			return e.fail("rpma_conn_req_connect", err)
		}
		e.keep(c)
		ev, err := e.nextEvent(c)
		switch {
		case err != nil:
			return err
		case ev == rpma.ConnEstablished:
			conn = c
		case ev == rpma.ConnRejected:
			c.Disconnect()
			e.deleteConn(c)
			if retry < rpx01Retries-1 {
				e.eprintf("Retrying...\n")
				select {
				case <-time.After(rpx01RetryDelay):
				case <-e.ctx.Done():
					return e.ctx.Err()
				}
			} else {
				e.eprintf("The retry number exceeded. Closing.\n")
			}
		default:
			e.eprintf("rpma_conn_next_event returned an unexpected event: %s\n", ev)
			return rpxFailed
		}
	}
	if conn == nil {
		return rpxFailed
	}
	e.printMessage(conn)
	ev, err := e.nextEvent(conn)
	if err != nil {
		return err
	}
	if ev != rpma.ConnClosed {
		e.eprintf("rpma_conn_next_event returned an unexpected event: %s\n", ev)
		return rpxFailed
	}
	if err := conn.Disconnect(); err != nil {
		return e.fail("rpma_conn_disconnect", err)
	}
	if err := e.deleteConn(conn); err != nil {
		return e.fail("rpma_conn_delete", err)
	}
	return nil
}
