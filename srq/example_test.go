package srq_test

import (
	"context"
	"fmt"
	"log"
	"slices"
	"testing"
	"time"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil/devexample"
	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/srq"
	"github.com/goverbs/goverbs/verbs"
)

func TestMain(m *testing.M) { devexample.Main(m, "Example") }

// Two QPs receive from one shared pool of buffers: each sends the other a
// message, and both messages land in buffers posted to the SRQ, found by
// the completion's WRID.
func Example() {
	dev, err := verbs.Open("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	pd, err := dev.AllocPD()
	if err != nil {
		log.Fatal(err)
	}
	s, err := srq.New(pd, srq.Attr{MaxWR: 4, MaxSGE: 1})
	if err != nil {
		log.Fatal(err)
	}
	mem, err := mr.New(pd, 4*64, mr.LocalWrite)
	if err != nil {
		log.Fatal(err)
	}
	for i := range 4 { // buffer i is bytes 64i to 64i+63, WRID i
		if err := s.PostRecv([]verbs.RecvWR{{WRID: uint64(i), SGList: []verbs.SGE{mem.SGE(64*i, 64)}}}); err != nil {
			log.Fatal(err)
		}
	}
	c, err := cq.New(dev, cq.Options{CQE: 8})
	if err != nil {
		log.Fatal(err)
	}
	var q [2]*qp.QP
	for i := range q { // no receive queue of their own: Caps.MaxRecvWR 0
		q[i], err = qp.New(pd, qp.Options{Type: qp.RC, SendCQ: c, RecvCQ: c, SRQ: s,
			Caps: qp.Caps{MaxSendWR: 1, MaxSendSGE: 1, MaxInlineData: 16}})
		if err != nil {
			log.Fatal(err)
		}
	}
	for i := range q {
		peer, err := q[1-i].PeerInfo(1)
		if err != nil {
			log.Fatal(err)
		}
		if err := q[i].Connect(peer, qp.ConnectOptions{}); err != nil {
			log.Fatal(err)
		}
	}
	for i, msg := range []string{"from a", "from b"} {
		if err := q[i].PostSend([]verbs.SendWR{{Opcode: verbs.WRSend, InlineData: []byte(msg)}}); err != nil {
			log.Fatal(err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []string
	for range 2 {
		wc, err := c.Next(ctx)
		if err != nil {
			log.Fatal(err)
		}
		got = append(got, string(mem.Bytes()[64*wc.WRID:][:wc.ByteLen]))
	}
	slices.Sort(got)
	fmt.Println(got, s.Posted(), "buffers left")
	// Output: [from a from b] 2 buffers left
}
