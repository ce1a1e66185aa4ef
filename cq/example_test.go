package cq_test

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
	"github.com/goverbs/goverbs/verbs"
)

func TestMain(m *testing.M) { devexample.Main(m, "ExampleCQ_Next") }

// Next waits for the next completion and returns one error for both
// checks: the wait's, or the completion's own status (a *verbs.WCError).
// Here a QP connected to itself sends itself a message: two completions,
// the receive and the send.
func ExampleCQ_Next() {
	dev, err := verbs.Open("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	pd, err := dev.AllocPD()
	if err != nil {
		log.Fatal(err)
	}
	c, err := cq.New(dev, cq.Options{CQE: 4})
	if err != nil {
		log.Fatal(err)
	}
	mem, err := mr.New(pd, 64, mr.LocalWrite)
	if err != nil {
		log.Fatal(err)
	}
	q, err := qp.New(pd, qp.Options{Type: qp.RC, SendCQ: c, RecvCQ: c,
		Caps: qp.Caps{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 16}})
	if err != nil {
		log.Fatal(err)
	}
	self, err := q.PeerInfo(1)
	if err != nil {
		log.Fatal(err)
	}
	if err := q.Connect(self, qp.ConnectOptions{}); err != nil {
		log.Fatal(err)
	}
	if err := q.PostRecv([]verbs.RecvWR{{WRID: 1, SGList: []verbs.SGE{mem.SGE(0, 64)}}}); err != nil {
		log.Fatal(err)
	}
	if err := q.PostSend([]verbs.SendWR{{WRID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, InlineData: []byte("ping")}}); err != nil {
		log.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []string
	for range 2 {
		wc, err := c.Next(ctx)
		if err != nil {
			log.Fatal(err) // the context's error, or the failed completion's
		}
		got = append(got, fmt.Sprintf("%d:%s", wc.WRID, wc.Opcode))
	}
	slices.Sort(got) // the two may come in either order
	fmt.Println(got, string(mem.Bytes()[:4]))
	// Output: [1:RECV 2:SEND] ping
}

// Sleep on a completion channel instead of spinning: Wait arms the CQ,
// re-checks it, and parks on Go's netpoller. (PollWait and Next do this
// loop for a CQ with a channel.)
func ExampleCQ_Wait() {
	dev, err := verbs.Open("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	ch, _ := dev.NewCompChannel()
	c, err := cq.New(dev, cq.Options{CQE: 256, Channel: ch})
	if err != nil {
		log.Fatal(err)
	}
	wc := make([]verbs.WorkCompletion, 32)
	for {
		wctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Wait(wctx)
		cancel()
		if err != nil {
			log.Fatal(err)
		}
		n, _ := c.Poll(wc)
		for _, w := range wc[:n] {
			if err := w.Err(); err != nil {
				log.Print(err) // names the work request, its QP and the status
			}
		}
	}
}

// PollWait fills a batch, waiting only while the CQ is empty.
func ExampleCQ_PollWait() {
	var c *cq.CQ // with completions coming
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wc := make([]verbs.WorkCompletion, 16)
	n, err := c.PollWait(ctx, wc)
	if err != nil {
		log.Fatal(err)
	}
	for _, w := range wc[:n] {
		if err := w.Err(); err != nil {
			log.Fatal(err)
		}
	}
}
