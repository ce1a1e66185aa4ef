package qp_test

import (
	"log"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/verbs"
)

// Connect an RC QP to a peer whose QP number, PSN and GID came over some
// out-of-band channel, then RDMA-write 64 bytes into the peer's memory and
// wait for the completion.
func Example() {
	ctx, err := verbs.Open("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	defer ctx.Close()
	pd, _ := ctx.AllocPD()
	c, _ := cq.New(ctx, cq.Options{CQE: 64})
	buf, _ := mr.New(pd, 4096, mr.LocalWrite)
	q, err := qp.New(pd, qp.Options{Type: qp.RC, SendCQ: c, RecvCQ: c,
		Caps: qp.Caps{MaxSendWR: 32, MaxRecvWR: 32, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		log.Fatal(err)
	}

	var peerGID verbs.GID // from the peer
	var peerQPN, peerPSN, peerRKey uint32
	var peerAddr uint64
	path := verbs.AHAttr{IsGlobal: true, Port: 1, GRH: verbs.GlobalRoute{DGID: peerGID, SGIDIndex: 1, HopLimit: 1}}
	if err := q.ToInit(qp.InitAttr{Port: 1, Access: mr.LocalWrite | mr.RemoteWrite}); err != nil {
		log.Fatal(err)
	}
	if err := q.ToRTR(qp.RTRAttr{Path: path, MTU: verbs.MTU1024, DestQPN: peerQPN, RQPSN: peerPSN,
		MaxDestRDAtomic: 1, MinRNRTimer: 12}); err != nil {
		log.Fatal(err)
	}
	if err := q.ToRTS(qp.RTSAttr{SQPSN: 0x1234, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRDAtomic: 1}); err != nil {
		log.Fatal(err)
	}

	wr := []verbs.SendWR{{WRID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		SGList:     []verbs.SGE{{Addr: buf.IOVA(), Length: 64, LKey: buf.LKey()}},
		RemoteAddr: peerAddr, RKey: peerRKey}}
	if err := q.PostSend(wr); err != nil {
		log.Fatal(err)
	}
	wc := make([]verbs.WorkCompletion, 1)
	for {
		n, err := c.Poll(wc)
		if err != nil {
			log.Fatal(err)
		}
		if n == 1 {
			break
		}
	}
	if wc[0].Status != verbs.WCSuccess {
		log.Fatalf("write failed: %s", wc[0].Status)
	}
}
