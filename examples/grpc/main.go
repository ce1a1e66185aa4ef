// Command grpc is gRPC-Go over RDMA: an echo service served on an
// rsocket.Listener and called through grpc.NewClient with a dialer that
// returns rsocket connections. Nothing else changes: gRPC's HTTP/2
// transport runs on any net.Conn, and rsocket.Conn is one.
//
// Serve on the RDMA device's address:
//
//	go run . -listen 169.254.77.1:7472
//
// and call it from the same or another host (sizes in bytes; -count calls
// of each kind: unary echo, client-streaming digest, server-streaming
// generate, bidirectional chat):
//
//	go run . -connect 169.254.77.1:7472 -size 1048576 -count 8
//
// The service is defined by hand (echo.go): a grpc.ServiceDesc and a codec
// over a plain Go struct, so that neither protoc nor generated code is
// needed. It is a module of its own so that the library's go.mod keeps
// only x/sys and go-cmp.
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/goverbs/goverbs/rsocket"
)

// maxMessage is the largest message either side accepts: gRPC's default
// receive limit is 4 MiB.
const maxMessage = 64 << 20

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "grpc:", err)
		}
		os.Exit(1)
	}
}

// run is the program: flags in args, results on stdout.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("grpc", flag.ContinueOnError)
	listen := fs.String("listen", "", "serve on this `address` (host:port of the RDMA device's IP)")
	connect := fs.String("connect", "", "call the server at this `address`")
	size := fs.Int("size", 1<<20, "payload `bytes` of each message")
	count := fs.Int("count", 4, "calls (messages) of each kind")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case fs.NArg() != 0:
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	case (*listen == "") == (*connect == ""):
		return errors.New("give one of -listen and -connect")
	case *size < 0 || *size > maxMessage-8:
		return fmt.Errorf("-size %d out of range 0..%d", *size, maxMessage-8)
	case *count < 1:
		return fmt.Errorf("-count %d: must be at least 1", *count)
	case *listen != "":
		return runServer(ctx, *listen, stdout)
	}
	return runClient(ctx, *connect, *size, *count, stdout)
}

// newServer returns a gRPC server with the echo service registered.
func newServer() *grpc.Server {
	s := grpc.NewServer(grpc.MaxRecvMsgSize(maxMessage), grpc.MaxSendMsgSize(maxMessage))
	s.RegisterService(&serviceDesc, service{})
	return s
}

// runServer serves on an rsocket listener until ctx is done.
func runServer(ctx context.Context, addr string, stdout io.Writer) error {
	l, err := rsocket.Listen("tcp", addr)
	if err != nil {
		return err
	}
	s := newServer()
	fmt.Fprintf(stdout, "listening on %s\n", l.Addr())
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			s.Stop()
		case <-done:
		}
	}()
	if err := s.Serve(l); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// dialer is gRPC's context dialer over rsocket.
func dialer(ctx context.Context, addr string) (net.Conn, error) {
	return rsocket.Dial(ctx, "tcp", addr)
}

// newClient returns a gRPC client connection to addr over rsocket. The
// passthrough resolver hands addr to the dialer as it is.
func newClient(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient("passthrough:///"+addr,
		grpc.WithContextDialer(dialer),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.CallContentSubtype(codecName),
			grpc.MaxCallRecvMsgSize(maxMessage), grpc.MaxCallSendMsgSize(maxMessage)))
}

// pattern returns n bytes that differ from one (seed, offset) to another.
func pattern(seed uint64, n int) []byte {
	b := make([]byte, n)
	x := seed*0x9e3779b97f4a7c15 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
	return b
}

// runClient makes count calls of each kind with payloads of size bytes,
// checks every answer, and reports each kind's time.
func runClient(ctx context.Context, addr string, size, count int, stdout io.Writer) error {
	cc, err := newClient(addr)
	if err != nil {
		return err
	}
	defer cc.Close()
	c := client{cc}
	payloads := make([][]byte, count)
	for i := range payloads {
		payloads[i] = pattern(uint64(i), size)
	}
	report := func(kind string, start time.Time, msgs int) {
		d := time.Since(start)
		fmt.Fprintf(stdout, "%-8s %d messages of %d bytes in %v (%.1f MB/s)\n",
			kind, msgs, size, d.Round(time.Microsecond), float64(msgs*size)/d.Seconds()/1e6)
	}

	start := time.Now()
	for i, p := range payloads {
		resp, err := c.Echo(ctx, &message{Seq: uint64(i), Payload: p})
		if err != nil {
			return fmt.Errorf("echo %d: %w", i, err)
		}
		if resp.Seq != uint64(i) || !bytes.Equal(resp.Payload, p) {
			return fmt.Errorf("echo %d: answer differs (seq %d, %d bytes)", i, resp.Seq, len(resp.Payload))
		}
	}
	report("echo", start, count)

	start = time.Now()
	sum, err := c.Digest(ctx, payloads)
	if err != nil {
		return fmt.Errorf("digest: %w", err)
	}
	h := sha256.New()
	for _, p := range payloads {
		h.Write(p)
	}
	if sum.Seq != uint64(size*count) || !bytes.Equal(sum.Payload, h.Sum(nil)) {
		return fmt.Errorf("digest: server counted %d bytes, SHA-256 %x; sent %d, %x", sum.Seq, sum.Payload, size*count, h.Sum(nil))
	}
	report("digest", start, count)

	start = time.Now()
	var n uint64
	err = c.Generate(ctx, uint64(count), payloads[0], func(m *message) error {
		if m.Seq != n || !bytes.Equal(m.Payload, payloads[0]) {
			return fmt.Errorf("message %d differs (seq %d, %d bytes)", n, m.Seq, len(m.Payload))
		}
		n++
		return nil
	})
	if err == nil && n != uint64(count) {
		err = fmt.Errorf("%d messages, want %d", n, count)
	}
	if err != nil {
		return fmt.Errorf("generate: %w", err)
	}
	report("generate", start, count)

	start = time.Now()
	got, err := c.Chat(ctx, payloads)
	if err != nil {
		return fmt.Errorf("chat: %w", err)
	}
	if len(got) != count {
		return fmt.Errorf("chat: %d answers, want %d", len(got), count)
	}
	for i, m := range got {
		if m.Seq != uint64(i) || !bytes.Equal(m.Payload, payloads[i]) {
			return fmt.Errorf("chat: answer %d differs (seq %d, %d bytes)", i, m.Seq, len(m.Payload))
		}
	}
	report("chat", start, count)
	return nil
}
