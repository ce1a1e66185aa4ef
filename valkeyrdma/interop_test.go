package valkeyrdma_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/valkeyrdma"
)

// envValkey names the directory with valkey-server, valkey-rdma.so and
// rdma-test, as hack/vm/build-valkey.sh builds them (make test-valkey
// sets it). Without it the interop tests skip, on the test bed too.
const envValkey = "GOVERBS_VALKEY"

// envExample names examples/valkey's binary, which TestValkeyServer runs
// against the server when it is set (make test-valkey builds it).
const envExample = "GOVERBS_VALKEY_EXAMPLE"

func valkeyDir(t *testing.T) string {
	t.Helper()
	d := os.Getenv(envValkey)
	if d == "" {
		testutil.SkipOptIn(t, "set "+envValkey+" to the directory hack/vm/build-valkey.sh prints (make test-valkey does)")
	}
	for _, f := range []string{"valkey-server", "valkey-rdma.so", "rdma-test"} {
		if _, err := os.Stat(filepath.Join(d, f)); err != nil {
			t.Fatalf("%s=%s: %v", envValkey, d, err)
		}
	}
	return d
}

// valkeyServer is a valkey-server serving RDMA on the test address.
type valkeyServer struct {
	addr string
	cmd  *exec.Cmd
	log  *bytes.Buffer
	done chan struct{} // closed when the process has ended
	err  error         // its Wait's, once done is closed
}

// startValkey starts valkey-server with the RDMA module on the test
// address and waits until a PING over RDMA is answered. It is killed
// when the test ends.
func startValkey(t *testing.T) *valkeyServer {
	t.Helper()
	dir := valkeyDir(t)
	host := device(t)
	port := strconv.Itoa(testutil.Port())
	s := &valkeyServer{addr: net.JoinHostPort(host, port), log: new(bytes.Buffer), done: make(chan struct{})}
	s.cmd = exec.Command(filepath.Join(dir, "valkey-server"),
		"--protected-mode", "no", "--dir", t.TempDir(), "--save", "", "--appendonly", "no",
		"--port", "0", "--loadmodule", filepath.Join(dir, "valkey-rdma.so"), "--rdma-bind", host, "--rdma-port", port)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s.err = s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		s.cmd.Process.Kill()
		<-s.done
		if t.Failed() {
			t.Logf("valkey-server's log:\n%s", s.log)
		}
	})
	deadline := time.Now().Add(2 * time.Minute)
	for {
		select {
		case <-s.done:
			t.Fatalf("valkey-server ended: %v; its log:\n%s", s.err, s.log)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := valkeyrdma.Dial(ctx, "tcp", s.addr)
		cancel()
		if err == nil {
			v, err := newRESP(c).do("PING")
			c.Close()
			if err == nil && v == "PONG" {
				return s
			}
			t.Logf("PING: %v, %v", v, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("valkey-server did not answer over RDMA at %s: %v", s.addr, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (s *valkeyServer) dial(t *testing.T) *respConn {
	t.Helper()
	c, err := valkeyrdma.Dial(timeout(t, time.Minute), "tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	guard(t, 5*time.Minute, c)
	return newRESP(c)
}

func expect(t *testing.T, r *respConn, want any, args ...string) {
	t.Helper()
	got, err := r.do(args...)
	if err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%q: got %v, want %v", args, got, want)
	}
}

// The Go client against valkey-server 8.1.1 over RDMA.
func TestValkeyServer(t *testing.T) {
	s := startValkey(t)

	t.Run("SetGet", func(t *testing.T) {
		r := s.dial(t)
		expect(t, r, "OK", "SET", "greeting", "hello over RDMA")
		expect(t, r, "hello over RDMA", "GET", "greeting")
		expect(t, r, nil, "GET", "no-such-key")
		f, ok := r.c.(*valkeyrdma.Conn).PeerFeatures()
		if !ok || f != 0 {
			t.Errorf("PeerFeatures = %#x, %v; want 0, true (valkey 8.1 has none)", f, ok)
		}
	})

	// 10,000 commands written at once, their replies read as they come:
	// both RX buffers fill and are published again several times.
	t.Run("Pipeline", func(t *testing.T) {
		r := s.dial(t)
		const n = 10000
		werr := make(chan error, 1)
		go func() {
			for i := range n {
				r.send("SET", "pipe:"+strconv.Itoa(i), strings.Repeat("v", i%200))
			}
			for i := range n {
				r.send("GET", "pipe:"+strconv.Itoa(i))
			}
			werr <- r.flush()
		}()
		for i := range n {
			if v, err := r.read(); err != nil || v != "OK" {
				t.Fatalf("SET reply %d: %v, %v", i, v, err)
			}
		}
		for i := range n {
			if v, err := r.read(); err != nil || v != strings.Repeat("v", i%200) {
				t.Fatalf("GET reply %d: %.40v, %v", i, v, err)
			}
		}
		if err := <-werr; err != nil {
			t.Fatal(err)
		}
	})

	// Values larger than both sides' 1 MiB RX buffers.
	t.Run("LargeValues", func(t *testing.T) {
		r := s.dial(t)
		for _, size := range []int{1<<20 - 1, 1 << 20, 3<<20 + 12345} {
			v := make([]byte, size)
			for i := range v {
				v[i] = 'a' + byte(i%26)
			}
			key := "large:" + strconv.Itoa(size)
			expect(t, r, "OK", "SET", key, string(v))
			got, err := r.do("GET", key)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(v) {
				t.Fatalf("GET of a %d-byte value gave %d bytes, or other bytes", size, len(fmt.Sprint(got)))
			}
			expect(t, r, int64(size), "STRLEN", key)
		}
	})

	t.Run("PubSub", func(t *testing.T) {
		sub, pub := s.dial(t), s.dial(t)
		expect(t, sub, []any{"subscribe", "news", int64(1)}, "SUBSCRIBE", "news")
		const n = 2000 // more messages than receives posted (1024): the subscriber reads after all were published
		for i := range n {
			pub.send("PUBLISH", "news", "message "+strconv.Itoa(i))
		}
		if err := pub.flush(); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if v, err := pub.read(); err != nil || v != int64(1) {
				t.Fatalf("PUBLISH %d: %v, %v (want 1 subscriber)", i, v, err)
			}
		}
		for i := range n {
			v, err := sub.read()
			if err != nil {
				t.Fatal(err)
			}
			if want := []any{"message", "news", "message " + strconv.Itoa(i)}; fmt.Sprint(v) != fmt.Sprint(want) {
				t.Fatalf("message %d: %v, want %v", i, v, want)
			}
		}
	})

	t.Run("MultiExec", func(t *testing.T) {
		r := s.dial(t)
		expect(t, r, "OK", "MULTI")
		expect(t, r, "QUEUED", "SET", "counter", "41")
		expect(t, r, "QUEUED", "INCR", "counter")
		expect(t, r, "QUEUED", "GET", "counter")
		expect(t, r, []any{"OK", int64(42), "42"}, "EXEC")
	})

	t.Run("Concurrent", func(t *testing.T) {
		const conns, rounds = 8, 300
		rs := make([]*respConn, conns)
		for i := range rs {
			rs[i] = s.dial(t)
		}
		var wg sync.WaitGroup
		errs := make(chan error, conns)
		for i, r := range rs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range rounds {
					key, val := fmt.Sprintf("conc:%d:%d", i, j), strings.Repeat(strconv.Itoa(i), 1+j)
					if v, err := r.do("SET", key, val); err != nil || v != "OK" {
						errs <- fmt.Errorf("conn %d SET %d: %v, %v", i, j, v, err)
						return
					}
					if v, err := r.do("GET", key); err != nil || v != val {
						errs <- fmt.Errorf("conn %d GET %d: %.40v, %v", i, j, v, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})

	// CLIENT KILL of a connection blocked in Read ends that Read with
	// io.EOF (the server disconnects), not a hang.
	t.Run("ClientKill", func(t *testing.T) {
		victim, killer := s.dial(t), s.dial(t)
		id, err := victim.do("CLIENT", "ID")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := victim.read()
			done <- err
		}()
		waitBlocked(t)
		expect(t, killer, int64(1), "CLIENT", "KILL", "ID", fmt.Sprint(id)) // the number of clients killed
		if err := <-done; err != io.EOF {
			t.Fatalf("Read of a killed client: %v, want io.EOF", err)
		}
		if _, err := victim.do("PING"); err == nil {
			t.Fatal("PING on a killed client succeeded")
		}
	})

	// Valkey's own C client against the server: the bed's control for
	// TestCClient.
	t.Run("CClient", func(t *testing.T) {
		host, port, _ := net.SplitHostPort(s.addr)
		runRDMATest(t, filepath.Join(valkeyDir(t), "rdma-test"), host, port, "0", nil)
	})

	// examples/valkey: valkey-go over RDMA (its binary built on the host
	// by make test-valkey).
	t.Run("ValkeyGo", func(t *testing.T) {
		bin := os.Getenv(envExample)
		if bin == "" {
			testutil.SkipOptIn(t, "set "+envExample+" to examples/valkey's binary (make test-valkey does)")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, bin, "-addr", s.addr, "-rounds", "200").CombinedOutput()
		t.Logf("%s:\n%s", filepath.Base(bin), out)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), `GET example:greeting = "hello over RDMA"`) || !strings.Contains(string(out), "200 GETs") {
			t.Fatal("the example's output lacks its GET results")
		}
	})

	// The server killed in the middle of a pipeline: the reader and the
	// writer end with errors. Last: it ends the server.
	t.Run("ServerKilled", func(t *testing.T) {
		r := s.dial(t)
		werr := make(chan error, 1)
		stop := make(chan struct{})
		go func() {
			for {
				select {
				case <-stop:
					werr <- nil
					return
				default:
				}
				for i := range 100 {
					r.send("SET", "killed:"+strconv.Itoa(i), "x")
				}
				if err := r.flush(); err != nil {
					werr <- err
					return
				}
			}
		}()
		for i := range 1000 {
			if v, err := r.read(); err != nil || v != "OK" {
				t.Fatalf("reply %d before the kill: %v, %v", i, v, err)
			}
		}
		s.cmd.Process.Kill()
		var err error
		for err == nil {
			_, err = r.read()
		}
		t.Logf("Read after the server's death: %v", err)
		close(stop)
		if err := <-werr; err == nil {
			// The writer may have been between flushes: one more.
			r.send("PING")
			err = r.flush()
			if err == nil {
				t.Fatal("Write after the server's death succeeded")
			}
		}
	})
}

// Valkey's C client (tests/rdma/rdma-test: PING, SET and GET of 1 KiB
// values, one BGSAVE) against a Go Listener serving RESP.
func TestCClient(t *testing.T) {
	dir := valkeyDir(t)
	host := device(t)
	l := listen(t)
	srv := serveRESP(l)
	port := strconv.Itoa(int(l.Addr().(*valkeyrdma.Addr).Port()))
	// How long a Go dial and accept take here: rdma-test gives its
	// connect one second.
	start := time.Now()
	c, err := valkeyrdma.Dial(timeout(t, time.Minute), "tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a Go Dial to the Listener took %v", time.Since(start))
	c.Close()
	for _, threads := range []string{"0", "4"} {
		t.Run("threads="+threads, func(t *testing.T) {
			runRDMATest(t, filepath.Join(dir, "rdma-test"), host, port, threads, srv)
		})
	}
	select {
	case err := <-srv.errs:
		t.Errorf("the Go server: %v", err)
	default:
	}
}

// runRDMATest runs valkey's tests/rdma/rdma-test against host:port with
// threads threads (0: the main thread only). It ends itself (an
// assertion) when a connect, read or write takes more than a second; the
// guard is for a process stuck in the kernel. Its output goes through a
// file, so that what it printed before being killed is kept. srv, if not
// nil, is the Go server, whose connections' state is logged then.
//
// rdma-test gives each connection, from address resolution to
// ESTABLISHED, one second, and prints "RDMA: resolve failed" for any
// connection that took longer; on a loaded TCG machine a connection to
// valkey-server or to the Go Listener sometimes does. Such a run is tried
// again, at most twice: a connection that never comes up still fails.
func runRDMATest(t *testing.T, bin, host, port, threads string, srv *respServer) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		out, err := runRDMATestOnce(t, bin, host, port, threads, srv)
		if err != nil && attempt < 3 && strings.Contains(out, "RDMA: resolve failed") {
			t.Logf("rdma-test did not connect within its one second (run %d of at most 3): again", attempt)
			continue
		}
		if err != nil {
			t.Fatalf("rdma-test: %v", err)
		}
		if !strings.Contains(out, "GET") || !strings.Contains(out, "KVs [OK]") {
			t.Fatal("rdma-test did not report its GETs as passed")
		}
		return
	}
}

// runRDMATestOnce runs rdma-test once and returns its output.
func runRDMATestOnce(t *testing.T, bin, host, port, threads string, srv *respServer) (string, error) {
	t.Helper()
	outPath := filepath.Join(t.TempDir(), "out")
	outFile, err := os.Create(outPath)
	if err != nil {
		t.Fatal(err)
	}
	defer outFile.Close()
	start := time.Now()
	cmd := exec.Command("stdbuf", "-oL", "-eL", bin, "-h", host, "-p", port, "-t", threads, "-m", "64", "-M", "512")
	cmd.Stdout, cmd.Stderr = outFile, outFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(4 * time.Minute):
		if srv != nil {
			srv.mu.Lock()
			for _, c := range srv.all {
				t.Logf("server side %v: %s", c.RemoteAddr(), valkeyrdma.State(c.(*valkeyrdma.Conn)))
			}
			srv.mu.Unlock()
		}
		cmd.Process.Kill()
		err = fmt.Errorf("still running after 4 minutes: killed (%v)", <-done)
	}
	out, _ := os.ReadFile(outPath)
	t.Logf("rdma-test -t %s (%v):\n%s", threads, time.Since(start), out)
	return string(out), err
}
