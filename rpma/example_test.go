package rpma_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/rpma"
	"github.com/goverbs/goverbs/verbs"
)

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
