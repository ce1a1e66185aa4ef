package valkeyrdma_test

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"time"

	"github.com/goverbs/goverbs/valkeyrdma"
)

// A PING to a Valkey server's RDMA port, RESP written by hand. A Valkey
// client library takes the Conn through its dialer instead (the package
// documentation shows valkey-go's and go-redis').
func ExampleDial() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := valkeyrdma.Dial(ctx, "tcp", "169.254.77.1:6379")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		log.Fatal(err)
	}
	reply, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(reply) // +PONG
}
