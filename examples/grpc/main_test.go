package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/rsocket"
	"github.com/goverbs/goverbs/verbs"
)

// testAddr returns the test device's address, skipping on a bare host (and
// failing when the environment requires the device) as every goverbs
// device test does.
func testAddr(t *testing.T) string {
	t.Helper()
	dev := testutil.Device(t)
	testutil.SkipUnlessCap(t, dev.NodeType.Transport() != verbs.TransportIWARP,
		"RDMA WRITE WITH IMMEDIATE (iWARP transport)")
	return testutil.Addr(t)
}

// serve starts the echo service on an rsocket listener on the test device
// and returns its address; the server stops when the test ends.
func serve(t *testing.T) string {
	t.Helper()
	l, err := rsocket.Listen("tcp", net.JoinHostPort(testAddr(t), "0"))
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	s := newServer()
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	t.Cleanup(func() {
		s.Stop()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return l.Addr().String()
}

// dial returns a client of the service at addr, closed when the test ends.
func dial(t *testing.T, addr string) client {
	t.Helper()
	cc, err := newClient(addr)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	t.Cleanup(func() { cc.Close() })
	return client{cc}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// sizes are the payload sizes the tests use: empty, below and above
// rsocket's 2 KiB first and 64 KiB largest messages, gRPC's 16 KiB HTTP/2
// frames, and above 1 MiB.
var sizes = []int{0, 1, 2047, 16<<10 + 1, 64<<10 + 3, 300 << 10, 1<<20 + 5, 2<<20 + 11}

func TestUnary(t *testing.T) {
	c := dial(t, serve(t))
	ctx := testContext(t)
	for i, n := range sizes {
		p := pattern(uint64(i), n)
		resp, err := c.Echo(ctx, &message{Seq: uint64(i) + 100, Payload: p})
		if err != nil {
			t.Fatalf("echo of %d bytes: %v", n, err)
		}
		if resp.Seq != uint64(i)+100 || !bytes.Equal(resp.Payload, p) {
			t.Fatalf("echo of %d bytes: got seq %d, %d bytes (equal %v)", n, resp.Seq, len(resp.Payload), bytes.Equal(resp.Payload, p))
		}
	}
}

func TestStreaming(t *testing.T) {
	c := dial(t, serve(t))
	ctx := testContext(t)
	payloads := make([][]byte, len(sizes))
	h := sha256.New()
	total := 0
	for i, n := range sizes {
		payloads[i] = pattern(uint64(i)+7, n)
		h.Write(payloads[i])
		total += n
	}

	t.Run("client", func(t *testing.T) {
		sum, err := c.Digest(ctx, payloads)
		if err != nil {
			t.Fatal(err)
		}
		if sum.Seq != uint64(total) || !bytes.Equal(sum.Payload, h.Sum(nil)) {
			t.Fatalf("server counted %d bytes, SHA-256 %x; sent %d, %x", sum.Seq, sum.Payload, total, h.Sum(nil))
		}
	})

	t.Run("server", func(t *testing.T) {
		for _, n := range []int{0, 5000, 1<<20 + 3} {
			p := pattern(uint64(n), n)
			var got uint64
			err := c.Generate(ctx, 4, p, func(m *message) error {
				if m.Seq != got || !bytes.Equal(m.Payload, p) {
					return fmt.Errorf("message %d: seq %d, %d bytes", got, m.Seq, len(m.Payload))
				}
				got++
				return nil
			})
			if err != nil {
				t.Fatalf("%d bytes: %v", n, err)
			}
			if got != 4 {
				t.Fatalf("%d bytes: %d messages, want 4", n, got)
			}
		}
	})

	t.Run("bidi", func(t *testing.T) {
		got, err := c.Chat(ctx, payloads)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(payloads) {
			t.Fatalf("%d answers, want %d", len(got), len(payloads))
		}
		for i, m := range got {
			if m.Seq != uint64(i) || !bytes.Equal(m.Payload, payloads[i]) {
				t.Fatalf("answer %d: seq %d, %d bytes, want %d bytes", i, m.Seq, len(m.Payload), len(payloads[i]))
			}
		}
	})
}

// TestConcurrent runs unary calls and chats at once from several
// goroutines, over one gRPC connection (HTTP/2 streams multiplexed on one
// rsocket connection) and over several.
func TestConcurrent(t *testing.T) {
	addr := serve(t)
	ctx := testContext(t)
	clients := []client{dial(t, addr), dial(t, addr), dial(t, addr)}
	const workers, calls = 8, 4
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			c := clients[w%len(clients)]
			for i := range calls {
				seq := uint64(w*calls + i)
				n := 1000 + 37*int(seq)*(int(seq)%3) + (int(seq)%5)*(20<<10)
				if i == calls-1 && w%4 == 0 {
					n = 1<<20 + int(seq)
				}
				p := pattern(seq+1000, n)
				resp, err := c.Echo(ctx, &message{Seq: seq, Payload: p})
				if err != nil {
					errs <- fmt.Errorf("worker %d echo %d (%d bytes): %w", w, i, n, err)
					return
				}
				if resp.Seq != seq || !bytes.Equal(resp.Payload, p) {
					errs <- fmt.Errorf("worker %d echo %d (%d bytes): got seq %d, %d bytes", w, i, n, resp.Seq, len(resp.Payload))
					return
				}
			}
			var chat [][]byte
			for i := range calls {
				chat = append(chat, pattern(uint64(w*100+i), 20000*(i+1)+w))
			}
			got, err := c.Chat(ctx, chat)
			if err != nil {
				errs <- fmt.Errorf("worker %d chat: %w", w, err)
				return
			}
			for i, m := range got {
				if m.Seq != uint64(i) || !bytes.Equal(m.Payload, chat[i]) {
					errs <- fmt.Errorf("worker %d chat answer %d: seq %d, %d bytes", w, i, m.Seq, len(m.Payload))
					return
				}
			}
			if len(got) != len(chat) {
				errs <- fmt.Errorf("worker %d chat: %d answers, want %d", w, len(got), len(chat))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestRun runs the program as a user does: a server with -listen, and a
// client with -connect that checks every answer.
func TestRun(t *testing.T) {
	addr := net.JoinHostPort(testAddr(t), "0")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	pr, pw := io.Pipe()
	srvDone := make(chan error, 1)
	go func() {
		err := run(ctx, []string{"-listen", addr}, pw)
		pw.Close()
		srvDone <- err
	}()
	sc := bufio.NewScanner(pr)
	if !sc.Scan() {
		cancel()
		t.Fatalf("server printed nothing; run: %v", <-srvDone)
	}
	listening, ok := strings.CutPrefix(sc.Text(), "listening on ")
	if !ok {
		t.Fatalf("server printed %q, want \"listening on ADDR\"", sc.Text())
	}
	go io.Copy(io.Discard, pr)

	var out bytes.Buffer
	if err := run(ctx, []string{"-connect", listening, "-size", "1100000", "-count", "2"}, &out); err != nil {
		t.Fatalf("client: %v\n%s", err, out.String())
	}
	t.Logf("client:\n%s", out.String())
	for _, kind := range []string{"echo", "digest", "generate", "chat"} {
		if !strings.Contains(out.String(), kind+" ") || !strings.Contains(out.String(), "2 messages of 1100000 bytes") {
			t.Errorf("client output lacks %q line:\n%s", kind, out.String())
		}
	}
	cancel()
	if err := <-srvDone; err != nil {
		t.Errorf("server: %v", err)
	}
}

// TestCodec needs no device: the codec's round trip and its errors.
func TestCodec(t *testing.T) {
	var c codec
	for _, n := range []int{0, 1, 100000} {
		in := &message{Seq: uint64(n) << 40, Payload: pattern(3, n)}
		b, err := c.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != 8+n {
			t.Fatalf("marshal of %d bytes: %d bytes, want %d", n, len(b), 8+n)
		}
		out := new(message)
		if err := c.Unmarshal(b, out); err != nil {
			t.Fatal(err)
		}
		b[len(b)-1]++ // the message must not alias the buffer
		if out.Seq != in.Seq || !bytes.Equal(out.Payload, in.Payload) {
			t.Fatalf("round trip of %d bytes: seq %d, %d bytes", n, out.Seq, len(out.Payload))
		}
	}
	if err := c.Unmarshal(make([]byte, 7), new(message)); !errors.Is(err, errCodec) {
		t.Errorf("7-byte message: %v, want %v", err, errCodec)
	}
	if _, err := c.Marshal("text"); !errors.Is(err, errCodec) {
		t.Errorf("marshal of a string: %v, want %v", err, errCodec)
	}
	if err := c.Unmarshal(make([]byte, 8), new(int)); !errors.Is(err, errCodec) {
		t.Errorf("unmarshal into *int: %v, want %v", err, errCodec)
	}
}

// TestFlags needs no device: run refuses bad command lines before it
// touches the network.
func TestFlags(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"-listen", "a:1", "-connect", "b:2"},
		{"-connect", "b:2", "-size", "-1"},
		{"-connect", "b:2", "-size", "100000000"},
		{"-connect", "b:2", "-count", "0"},
		{"-connect", "b:2", "extra"},
		{"-nosuchflag"},
	} {
		var out bytes.Buffer
		if err := run(t.Context(), args, &out); err == nil {
			t.Errorf("run %q: no error", args)
		}
	}
	if err := run(t.Context(), []string{"-h"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("run -h: %v, want flag.ErrHelp", err)
	}
}

// The service's descriptor must say what the client's streams assume.
func TestServiceDesc(t *testing.T) {
	want := map[string][2]bool{"Digest": {false, true}, "Generate": {true, false}, "Chat": {true, true}}
	for _, s := range serviceDesc.Streams {
		if w := want[s.StreamName]; w != [2]bool{s.ServerStreams, s.ClientStreams} {
			t.Errorf("%s: server/client streams %v %v, want %v", s.StreamName, s.ServerStreams, s.ClientStreams, w)
		}
	}
}
