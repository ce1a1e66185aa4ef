package cm_test

import (
	"context"
	"fmt"
	"log"
	"net/netip"
	"time"

	"github.com/goverbs/goverbs/cm"
	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/verbs"
)

// A server that accepts with one call per connection: Listen's Ready
// registers the connection's memory and posts its receive before the
// peer can send; Accept returns the connection established.
func ExampleListen() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bufs := make(chan *mr.MR, 1)
	l, err := cm.Listen(netip.MustParseAddrPort("169.254.77.1:0"), cm.ListenOptions{
		Ready: func(c *cm.EP) error {
			buf, err := c.Queues().NewMR(64, mr.LocalWrite) // Close deregisters it
			if err != nil {
				return err
			}
			bufs <- buf
			return c.Queues().PostRecv(1, buf.Bytes(), buf)
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	got := make(chan string)
	go func() {
		c, err := l.Accept(ctx)
		if err != nil {
			log.Fatal(err)
		}
		defer c.Close()
		wc, err := c.Queues().GetRecvComp(ctx)
		if err != nil {
			log.Fatal(err)
		}
		got <- string((<-bufs).Bytes()[:wc.ByteLen])
		<-c.ID().Done() // the client disconnected: answer it
		if err := c.ID().DisconnectContext(ctx); err != nil {
			log.Fatal(err)
		}
	}()

	// The client: CreateEP resolves the address and makes the queues.
	info, err := cm.GetAddrInfo(ctx, l.Addr().Addr().String(), fmt.Sprint(l.Addr().Port()), nil)
	if err != nil {
		log.Fatal(err)
	}
	ep, err := cm.CreateEP(ctx, info, nil, &cm.DefaultListenCaps)
	if err != nil {
		log.Fatal(err)
	}
	defer ep.Close()
	if _, err := ep.ID().Connect(ctx, cm.ConnParam{}); err != nil {
		log.Fatal(err)
	}
	msg, err := ep.Queues().NewMR(64, 0) // only sent from: no access flags
	if err != nil {
		log.Fatal(err)
	}
	n := copy(msg.Bytes(), "hello")
	if err := ep.Queues().PostSend(1, msg.Bytes()[:n], msg, verbs.SendSignaled); err != nil {
		log.Fatal(err)
	}
	if _, err := ep.Queues().GetSendComp(ctx); err != nil { // the wait's error or the SEND's
		log.Fatal(err)
	}
	fmt.Println(<-got)
	if err := ep.ID().DisconnectContext(ctx); err != nil {
		log.Fatal(err)
	}
	// Output: hello
}
