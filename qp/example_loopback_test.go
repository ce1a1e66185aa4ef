package qp_test

import (
	"context"
	"fmt"
	"log"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/verbs"
)

// Two RC queue pairs on one device, connected to each other: a SENDs
// "hello" into a receive b posted, then RDMA-writes "world" into b's memory.
func Example() {
	dev := must(verbs.Open("rxe0"))
	defer dev.Close() // closes everything made on dev too
	pd := must(dev.AllocPD())
	c := must(cq.New(dev, cq.Options{CQE: 8}))
	mem := must(mr.New(pd, 4096, mr.LocalWrite|mr.RemoteWrite))
	caps := qp.Caps{MaxSendWR: 2, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}
	opts := qp.Options{Type: qp.RC, SendCQ: c, RecvCQ: c, Caps: caps}
	a, b := must(qp.New(pd, opts)), must(qp.New(pd, opts))

	// Connect each QP to the other's endpoint (QPN, PSN, LID, GID, MTU:
	// what two hosts exchange), RESET to RTS with ConnectOptions' defaults.
	check(a.Connect(must(b.PeerInfo(1)), qp.ConnectOptions{}))
	check(b.Connect(must(a.PeerInfo(1)), qp.ConnectOptions{}))

	buf, dst := mem.Bytes(), mem.Remote(200) // dst: what b would tell a
	copy(buf, "helloworld")
	check(b.PostRecv([]verbs.RecvWR{{SGList: []verbs.SGE{mem.SGE(100, 5)}}}))
	check(a.PostSend([]verbs.SendWR{
		{Opcode: verbs.WRSend, SGList: []verbs.SGE{mem.SGE(0, 5)}},
		{Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, SGList: []verbs.SGE{mem.SGE(5, 5)},
			RemoteAddr: dst.Addr, RKey: dst.RKey},
	}))
	for range 2 { // b's receive and a's write; Next fails on a failed one
		must(c.Next(context.Background()))
	}
	fmt.Printf("SEND %s, WRITE %s\n", buf[100:105], buf[200:205])
	// Output: SEND hello, WRITE world
}

// must and check end the program at the first error (a real one would
// return it).
func must[T any](v T, err error) T {
	check(err)
	return v
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
