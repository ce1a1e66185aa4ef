// Command valkey is valkey-go over RDMA: it connects to a valkey-server
// built with RDMA (BUILD_RDMA=module or yes, its RDMA port enabled)
// through a ClientOption.DialCtxFn that returns valkeyrdma connections,
// then sets, reads and increments a key and times a few round trips.
// Nothing else changes: valkey-go runs on any net.Conn.
//
//	go run . -addr 169.254.77.1:6379
//
// The binary needs no cgo (CGO_ENABLED=0 go build gives a static one).
// It is a module of its own so that the library's go.mod keeps only
// x/sys and go-cmp.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/goverbs/goverbs/valkeyrdma"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "valkey:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("valkey", flag.ContinueOnError)
	addr := fs.String("addr", "169.254.77.1:6379", "the server's RDMA address, host:port")
	rounds := fs.Int("rounds", 100, "timed GET round trips")
	if err := fs.Parse(args); err != nil {
		return err
	}
	client, err := valkey.NewClient(valkey.ClientOption{
		InitAddress: []string{*addr},
		// valkey-go's own connection handling (pipelining, the
		// background reader, deadlines) runs on the RDMA connection.
		DialCtxFn: func(ctx context.Context, addr string, _ *net.Dialer, _ *tls.Config) (net.Conn, error) {
			return valkeyrdma.Dial(ctx, "tcp", addr)
		},
		DisableCache: true, // no client-side caching (CLIENT TRACKING): a minimal example
	})
	if err != nil {
		return err
	}
	defer client.Close()

	if err := client.Do(ctx, client.B().Set().Key("example:greeting").Value("hello over RDMA").Build()).Error(); err != nil {
		return fmt.Errorf("SET: %w", err)
	}
	v, err := client.Do(ctx, client.B().Get().Key("example:greeting").Build()).ToString()
	if err != nil {
		return fmt.Errorf("GET: %w", err)
	}
	fmt.Fprintf(out, "GET example:greeting = %q\n", v)
	n, err := client.Do(ctx, client.B().Incr().Key("example:counter").Build()).AsInt64()
	if err != nil {
		return fmt.Errorf("INCR: %w", err)
	}
	fmt.Fprintf(out, "INCR example:counter = %d\n", n)

	start := time.Now()
	for range *rounds {
		if err := client.Do(ctx, client.B().Get().Key("example:greeting").Build()).Error(); err != nil {
			return fmt.Errorf("GET: %w", err)
		}
	}
	if *rounds > 0 {
		fmt.Fprintf(out, "%d GETs: %v each\n", *rounds, time.Since(start)/time.Duration(*rounds))
	}
	return nil
}
