package cq_test

import (
	"context"
	"log"
	"time"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/verbs"
)

// Sleep on a completion channel instead of spinning: Wait arms the CQ,
// re-checks it, and parks on Go's netpoller.
func ExampleCQ_Wait() {
	ctx, err := verbs.Open("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	defer ctx.Close()
	ch, _ := ctx.NewCompChannel()
	c, err := cq.New(ctx, cq.Options{CQE: 256, Channel: ch})
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
			if w.Status != verbs.WCSuccess {
				// Only WRID, Status, QPNum and VendorErr are valid.
				log.Printf("wr %d on QP %d failed: %s", w.WRID, w.QPNum, w.Status)
			}
		}
	}
}
