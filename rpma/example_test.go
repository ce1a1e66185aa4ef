package rpma_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testutil/devexample"
	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/rpma"
	"github.com/goverbs/goverbs/verbs"
)

func TestMain(m *testing.M) { devexample.Main(m, "Example") }

// A server and a client in one program, the way librpma's
// 02-read-to-volatile and 03-write-to-volatile pair up: the server
// registers memory and sends its descriptor as private data; the client
// RDMA-writes into it, reads it back, and disconnects; the server then
// finds the bytes in its memory. The address is rxe0's (RoutableGID); a
// program would take it from its command line.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dev, err := verbs.Open("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close() // after the peer and everything on it
	gid, err := dev.RoutableGID(1)
	if err != nil {
		log.Fatal(err)
	}
	addr := gid.GID.Addr().String()
	peer, err := rpma.NewPeer(dev)
	if err != nil {
		log.Fatal(err)
	}
	defer peer.Close()

	// The server: 4 KiB a client may write to and read from.
	ep, err := peer.Listen(addr, "0")
	if err != nil {
		log.Fatal(err)
	}
	defer ep.Close()
	srvMem := make([]byte, 4096)
	dst, err := peer.RegisterMR(srvMem, rpma.UsageWriteDst|rpma.UsageReadSrc)
	if err != nil {
		log.Fatal(err)
	}
	defer dst.Close()
	served := make(chan string)
	go func() {
		req, err := ep.NextConnReq(ctx, nil)
		if err != nil {
			log.Fatal(err)
		}
		conn, err := req.Connect(ctx, dst.Descriptor())
		if err != nil {
			log.Fatal(err)
		}
		defer conn.Close()
		for _, want := range []rpma.ConnEvent{rpma.ConnEstablished, rpma.ConnClosed} {
			if ev, err := conn.NextEvent(ctx); err != nil || ev != want {
				log.Fatalf("server: %v %v, want %v", ev, err, want)
			}
		}
		conn.Disconnect()
		served <- string(srvMem[:5])
	}()

	// The client.
	buf, err := mr.Alloc(4096)
	if err != nil {
		log.Fatal(err)
	}
	defer buf.Close()
	src, err := peer.RegisterMR(buf.Bytes(), rpma.UsageWriteSrc|rpma.UsageReadDst)
	if err != nil {
		log.Fatal(err)
	}
	defer src.Close()
	req, err := peer.NewConnReq(ctx, addr, ep.Port(), nil)
	if err != nil {
		log.Fatal(err)
	}
	conn, err := req.Connect(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	if ev, err := conn.NextEvent(ctx); err != nil || ev != rpma.ConnEstablished {
		log.Fatalf("client: %v %v", ev, err)
	}
	remote, err := rpma.RemoteMRFromDescriptor(conn.PrivateData())
	if err != nil {
		log.Fatal(err)
	}
	copy(buf.Bytes(), "hello")
	if err := conn.Write(remote, 0, src, 0, 5, rpma.OnError, 0); err != nil {
		log.Fatal(err)
	}
	// An RDMA READ after the WRITE, on the same connection, returns what
	// the WRITE put there.
	if err := conn.Read(src, 100, remote, 0, 5, rpma.Always, 1); err != nil {
		log.Fatal(err)
	}
	wc := make([]verbs.WorkCompletion, 1)
	for {
		if err := conn.CQ().Wait(ctx); err != nil {
			log.Fatal(err)
		}
		if n, err := conn.CQ().GetWC(wc); err == nil && n == 1 {
			break
		} else if !errors.Is(err, rpma.ErrNoCompletion) {
			log.Fatal(err)
		}
	}
	if err := wc[0].Err(); err != nil {
		log.Fatal(err)
	}
	if err := conn.Disconnect(); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("client read back %q, server has %q\n", buf.Bytes()[100:105], <-served)
	// Output: client read back "hello", server has "hello"
}

// A client writes into the server's memory and makes the write visible
// with a flush, the way librpma's 05-flush-to-persistent does: the server
// sent its region's descriptor as private data.
func Example_writeAndFlush() {
	ctx := context.Background()
	ibv, err := rpma.GetIBVContext(ctx, "169.254.77.1", rpma.IBVContextRemote)
	if err != nil {
		log.Fatal(err)
	}
	defer ibv.Close()
	peer, err := rpma.NewPeer(ibv)
	if err != nil {
		log.Fatal(err)
	}
	defer peer.Close()
	buf, _ := mr.Alloc(4096)
	defer buf.Close()
	src, err := peer.RegisterMR(buf.Bytes(), rpma.UsageWriteSrc)
	if err != nil {
		log.Fatal(err)
	}
	defer src.Close()

	req, err := peer.NewConnReq(ctx, "169.254.77.1", "7204", nil)
	if err != nil {
		log.Fatal(err)
	}
	conn, err := req.Connect(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	if ev, err := conn.NextEvent(ctx); err != nil || ev != rpma.ConnEstablished {
		log.Fatalf("%v %v", ev, err)
	}
	dst, err := rpma.RemoteMRFromDescriptor(conn.PrivateData())
	if err != nil {
		log.Fatal(err)
	}

	copy(buf.Bytes(), "Hello world!")
	if err := conn.Write(dst, 0, src, 0, 1024, rpma.OnError, 0); err != nil {
		log.Fatal(err)
	}
	if err := conn.Flush(dst, 0, 1024, rpma.FlushVisibility, rpma.Always, 0xF01D); err != nil {
		log.Fatal(err)
	}
	if err := conn.CQ().Wait(ctx); err != nil {
		log.Fatal(err)
	}
	wc := make([]verbs.WorkCompletion, 1)
	if _, err := conn.CQ().GetWC(wc); err != nil || wc[0].Status != verbs.WCSuccess || wc[0].WRID != 0xF01D {
		log.Fatalf("flush failed: %+v %v", wc[0], err)
	}
	conn.Disconnect()
}

// A server serves many connections from one shared receive queue and tells
// them apart by the QP number of each receive completion, as librpma's
// 13-messages-ping-pong-with-srq does.
func Example_srqServer() {
	ctx := context.Background()
	ibv, err := rpma.GetIBVContext(ctx, "169.254.77.1", rpma.IBVContextLocal)
	if err != nil {
		log.Fatal(err)
	}
	defer ibv.Close()
	peer, _ := rpma.NewPeer(ibv)
	defer peer.Close()
	srq, err := peer.NewSRQ(nil) // 20 receives, with its own receive CQ
	if err != nil {
		log.Fatal(err)
	}
	defer srq.Close()
	buf, _ := mr.Alloc(20 * 8)
	recv, _ := peer.RegisterMR(buf.Bytes(), rpma.UsageRecv)
	for i := uint64(0); i < 20; i++ {
		srq.Recv(recv, i*8, 8, i) // the op context names the slot
	}

	ep, err := peer.Listen("169.254.77.1", "7205")
	if err != nil {
		log.Fatal(err)
	}
	defer ep.Close()
	cfg := rpma.NewConnCfg()
	cfg.SRQ = srq
	conns := map[uint32]*rpma.Conn{}
	for len(conns) < 2 {
		req, err := ep.NextConnReq(ctx, cfg)
		if err != nil {
			log.Fatal(err)
		}
		conn, err := req.Connect(ctx, nil)
		if err != nil {
			log.Fatal(err)
		}
		conns[conn.QPNum()] = conn
	}

	wc := make([]verbs.WorkCompletion, 4)
	for {
		if err := srq.RCQ().Wait(ctx); err != nil {
			log.Fatal(err)
		}
		n, err := srq.RCQ().GetWC(wc)
		if errors.Is(err, rpma.ErrNoCompletion) {
			continue // a wake-up with nothing to collect is normal
		}
		for _, w := range wc[:n] {
			v := binary.LittleEndian.Uint64(buf.Bytes()[w.WRID*8:])
			fmt.Printf("value %d from the connection [qp#%d]\n", v, w.QPNum)
			srq.Recv(recv, w.WRID*8, 8, w.WRID) // give the slot back
			_ = conns[w.QPNum]
		}
	}
}

// Wait for completions without spinning, collecting everything queued
// after each wake-up: the loop every librpma program has.
func ExampleCQ_Wait() {
	var conn *rpma.Conn // connected
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cq := conn.CQ()
	wc := make([]verbs.WorkCompletion, 16)
	for pending := 1; pending > 0; {
		if err := cq.Wait(ctx); err != nil {
			log.Fatal(err)
		}
		for {
			n, err := cq.GetWC(wc)
			if errors.Is(err, rpma.ErrNoCompletion) {
				break
			}
			if err != nil {
				log.Fatal(err)
			}
			for _, w := range wc[:n] {
				if w.Status != verbs.WCSuccess {
					// Only WRID, Status, QPNum and VendorErr are valid.
					log.Fatalf("operation %#x failed: %s", w.WRID, w.Status)
				}
				pending--
			}
		}
	}
}
