package qp_test

import (
	"context"
	"log"
	"testing"
	"time"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil/devexample"
	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/verbs"
)

// Example (example_loopback_test.go, the README's first program) opens
// rxe0.
func TestMain(m *testing.M) { devexample.Main(m, "Example") }

// The long path Connect takes: each transition with every attribute
// spelled out, for a program that needs what ConnectOptions does not
// cover. The peer's QP number, PSN and GID came over some out-of-band
// channel; the QP then RDMA-writes 64 bytes into the peer's memory.
func ExampleQP_ToRTR() {
	dev, err := verbs.Open("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	pd, _ := dev.AllocPD()
	c, _ := cq.New(dev, cq.Options{CQE: 64})
	buf, _ := mr.New(pd, 4096, mr.LocalWrite)
	q, err := qp.New(pd, qp.Options{Type: qp.RC, SendCQ: c, RecvCQ: c,
		Caps: qp.Caps{MaxSendWR: 32, MaxRecvWR: 32, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		log.Fatal(err)
	}

	var peer qp.PeerInfo    // from the peer
	var dst mr.RemoteRegion // from the peer
	src, err := dev.RoutableGID(1)
	if err != nil {
		log.Fatal(err)
	}
	if err := q.ToInit(qp.InitAttr{Port: 1, Access: mr.RemoteWrite}); err != nil {
		log.Fatal(err)
	}
	if err := q.ToRTR(qp.RTRAttr{Path: src.PathTo(peer.GID), MTU: verbs.MTU1024, DestQPN: peer.QPN, RQPSN: peer.PSN,
		MaxDestRDAtomic: 1, MinRNRTimer: qp.RNRTimerCode(time.Millisecond)}); err != nil {
		log.Fatal(err)
	}
	if err := q.ToRTS(qp.RTSAttr{SQPSN: 0x1234, Timeout: qp.AckTimeoutCode(100 * time.Millisecond),
		RetryCnt: 7, RNRRetry: qp.RNRRetryForever, MaxRDAtomic: 1}); err != nil {
		log.Fatal(err)
	}

	wr := []verbs.SendWR{{WRID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		SGList: []verbs.SGE{buf.SGE(0, 64)}, RemoteAddr: dst.Addr, RKey: dst.RKey}}
	if err := q.PostSend(wr); err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Next(ctx); err != nil {
		log.Fatalf("write failed: %v", err)
	}
}

// Connect takes the defaults of ConnectOptions; set a field to change one.
// The zero attribute values that would wait forever have names
// (NoAckTimeout, RNRRetryForever), so they are never chosen by accident.
func ExampleQP_Connect() {
	dev, err := verbs.Open("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	pd, _ := dev.AllocPD()
	c, _ := cq.New(dev, cq.Options{CQE: 16})
	q, err := qp.New(pd, qp.Options{Type: qp.RC, SendCQ: c, RecvCQ: c,
		Caps: qp.Caps{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		log.Fatal(err)
	}
	var peer qp.PeerInfo // from the peer, which has q.PeerInfo(1) in return
	err = q.Connect(peer, qp.ConnectOptions{
		AckTimeout:    time.Second, // rounded up to 4.096 µs × 2^18 ≈ 1.07 s
		RetryCount:    3,
		RNRRetryCount: 6, // fail with WCRNRRetryExcErr instead of waiting for a receive forever
		MaxRDAtomic:   16, MaxDestRDAtomic: 16,
	})
	if err != nil {
		log.Fatal(err)
	}
}
