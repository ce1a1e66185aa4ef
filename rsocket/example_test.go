package rsocket_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testutil/devexample"
	"github.com/goverbs/goverbs/rsocket"
)

func TestMain(m *testing.M) { devexample.Main(m, "Example") }

// A server and a client in one program over rxe0's IP address
// (169.254.77.1 in the test bed): the client writes "hello" and closes;
// the server reads to EOF. Conn and Listener are a net.Conn and a
// net.Listener, so anything written for those works over RDMA.
func Example() {
	l, err := rsocket.Listen("tcp", "169.254.77.1:0") // port 0: any free port
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	got := make(chan string)
	go func() {
		c, err := l.Accept()
		if err != nil {
			log.Fatal(err)
		}
		defer c.Close()
		msg, err := io.ReadAll(c) // until the client closes
		if err != nil {
			log.Fatal(err)
		}
		got <- string(msg)
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addr := l.Addr()
	c, err := rsocket.Dial(ctx, addr.Network(), addr.String())
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.Write([]byte("hello")); err != nil {
		log.Fatal(err)
	}
	if err := c.Close(); err != nil {
		log.Fatal(err)
	}
	fmt.Println(<-got)
	// Output: hello
}
