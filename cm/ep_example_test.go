package cm_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/goverbs/goverbs/cm"
	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/verbs"
)

// librdmacm's shortest form, rdma_getaddrinfo plus rdma_create_ep (the
// shape of rdma-core's rdma_server and rdma_client): the address and port
// become an EPInfo, CreateEP makes the ID, resolves or binds it, and
// makes the QP with its CQs.
func ExampleCreateEP() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	caps := qp.Caps{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}

	// The server: passive, on rxe0's address (169.254.77.1 in the test
	// bed), port 7471.
	info, err := cm.GetAddrInfo(ctx, "169.254.77.1", "7471", &cm.Hints{Flags: cm.AIPassive})
	if err != nil {
		log.Fatal(err)
	}
	listen, err := cm.CreateEP(ctx, info, nil, &caps)
	if err != nil {
		log.Fatal(err)
	}
	defer listen.Close()
	if err := listen.Listen(0); err != nil {
		log.Fatal(err)
	}
	got := make(chan string)
	go func() {
		conn, _, err := listen.GetRequest(ctx) // an EP with its Queues
		if err != nil {
			log.Fatal(err)
		}
		defer conn.Close()
		e := conn.Queues()
		buf, err := mr.New(e.PD(), 16, mr.LocalWrite)
		if err != nil {
			log.Fatal(err)
		}
		defer buf.Close()
		if err := e.PostRecv(0, buf.Bytes(), buf); err != nil {
			log.Fatal(err)
		}
		if err := conn.ID().Accept(ctx, cm.ConnParam{}); err != nil {
			log.Fatal(err)
		}
		wc, err := e.GetRecvComp(ctx)
		if err != nil {
			log.Fatal(err)
		}
		<-conn.ID().Done() // the client disconnected: answer it
		if err := conn.ID().DisconnectContext(ctx); err != nil {
			log.Fatal(err)
		}
		got <- string(buf.Bytes()[:wc.ByteLen])
	}()

	// The client: active, to the same address and port.
	info, err = cm.GetAddrInfo(ctx, "169.254.77.1", "7471", nil)
	if err != nil {
		log.Fatal(err)
	}
	ep, err := cm.CreateEP(ctx, info, nil, &caps)
	if err != nil {
		log.Fatal(err)
	}
	defer ep.Close()
	buf, err := mr.New(ep.Queues().PD(), 16, mr.LocalWrite)
	if err != nil {
		log.Fatal(err)
	}
	defer buf.Close()
	if _, err := ep.ID().Connect(ctx, cm.ConnParam{}); err != nil {
		log.Fatal(err)
	}
	n := copy(buf.Bytes(), "hi")
	if err := ep.Queues().PostSend(1, buf.Bytes()[:n], buf, verbs.SendSignaled); err != nil {
		log.Fatal(err)
	}
	if _, err := ep.Queues().GetSendComp(ctx); err != nil {
		log.Fatal(err)
	}
	if err := ep.ID().DisconnectContext(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println(<-got)
	// Output: hi
}
