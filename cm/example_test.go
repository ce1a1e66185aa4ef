package cm_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/netip"
	"testing"
	"time"

	"github.com/goverbs/goverbs/cm"
	"github.com/goverbs/goverbs/internal/testutil/devexample"
	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/verbs"
)

func TestMain(m *testing.M) { devexample.Main(m, "Example", "ExampleCreateEP", "ExampleListen") }

// A server and a client in one program, connected through rdma_cm on
// rxe0's IP address: the client sends "hello" and disconnects; the
// server, which posted a receive before accepting, gets the message and
// sees the disconnect on Done, without an event loop of its own.
func Example() {
	dev, err := verbs.Open("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	gid, err := dev.RoutableGID(1) // rxe0's IP address
	if err != nil {
		log.Fatal(err)
	}
	ch, err := cm.NewChannel()
	if err != nil {
		log.Fatal(err)
	}
	defer ch.Close()                              // closes its IDs and their QPs
	if err := ch.AttachContext(dev); err != nil { // IDs on rxe0 use dev
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	caps := qp.Caps{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}

	// The server: listen on a port the kernel picks, accept one
	// connection.
	l, err := ch.CreateID(cm.TCP)
	if err != nil {
		log.Fatal(err)
	}
	if err := l.Bind(netip.AddrPortFrom(gid.GID.Addr(), 0)); err != nil {
		log.Fatal(err)
	}
	if err := l.Listen(1); err != nil {
		log.Fatal(err)
	}
	info, err := l.Query()
	if err != nil {
		log.Fatal(err)
	}
	served := make(chan string)
	go func() {
		id, _, err := l.GetRequest(ctx)
		if err != nil {
			log.Fatal(err)
		}
		ep, err := id.NewQueues(nil, caps) // a QP with its own CQs
		if err != nil {
			log.Fatal(err)
		}
		buf, err := mr.New(ep.PD(), 64, mr.LocalWrite)
		if err != nil {
			log.Fatal(err)
		}
		if err := ep.PostRecv(1, buf.Bytes(), buf); err != nil {
			log.Fatal(err)
		}
		if err := id.Accept(ctx, cm.ConnParam{}); err != nil {
			log.Fatal(err)
		}
		wc, err := ep.GetRecvComp(ctx) // a failed completion is an error too
		if err != nil {
			log.Fatal(err)
		}
		msg := string(buf.Bytes()[:wc.ByteLen])
		<-id.Done() // the client disconnected
		// Answer it, so that its DisconnectContext returns.
		if err := id.DisconnectContext(ctx); err != nil {
			log.Fatal(err)
		}
		served <- fmt.Sprintf("server got %q, then %v", msg, errors.Is(id.Err(), cm.ErrDisconnected))
	}()

	// The client: resolve the server's address, connect, send.
	id, err := ch.CreateID(cm.TCP)
	if err != nil {
		log.Fatal(err)
	}
	if err := id.ResolveAddr(ctx, netip.AddrPort{}, info.Src); err != nil {
		log.Fatal(err)
	}
	if err := id.ResolveRoute(ctx); err != nil {
		log.Fatal(err)
	}
	ep, err := id.NewQueues(nil, caps)
	if err != nil {
		log.Fatal(err)
	}
	buf, err := mr.New(ep.PD(), 64, mr.LocalWrite)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := id.Connect(ctx, cm.ConnParam{}); err != nil {
		log.Fatal(err)
	}
	n := copy(buf.Bytes(), "hello")
	if err := ep.PostSend(2, buf.Bytes()[:n], buf, verbs.SendSignaled); err != nil {
		log.Fatal(err)
	}
	if _, err := ep.GetSendComp(ctx); err != nil { // the wait's error or the SEND's
		log.Fatal(err)
	}
	if err := id.DisconnectContext(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println(<-served)
	// Output: server got "hello", then true
}
