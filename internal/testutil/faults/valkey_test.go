package faults

import (
	"bufio"
	"bytes"
	"context"
	"errors"
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

// envValkey names the directory with valkey-server and valkey-rdma.so
// (hack/vm/build-valkey.sh); without it TestValkeyLinkDown skips (make
// faults leaves it to make faults-valkey, which builds the server).
const envValkey = "GOVERBS_VALKEY"

const valkeyPort = 7474 // b's valkey-server, RDMA

// valkeyDown is how long b's link stays down in TestValkeyLinkDown: well
// beyond what a's connection needs to fail (its WRITEs' retries, 7 ACK
// timeouts of about 0.5 s on rxe, or a Keepalive's, sent every 3 s).
const valkeyDown = 15 * time.Second

// valkeyGuard bounds a's wait for its pipeline's Read and Write once the
// link is down: a hang detector, not a timing check.
const valkeyGuard = 90 * time.Second

// TestValkeyLinkDown: a's Go client (valkeyrdma) pipelines SETs to
// valkey-server on b, reading the replies as they come, and b's link goes
// down mid-pipeline for longer than the connection's retries last. The
// reading and the writing caller must each get an error, not hang. Once
// the link is back, every SET whose reply a read must be on the server:
// each command either had its reply or its caller an error.
func TestValkeyLinkDown(t *testing.T) {
	if os.Getenv(envValkey) == "" {
		testutil.SkipOptIn(t, "set "+envValkey+" to the directory hack/vm/build-valkey.sh prints (make faults-valkey does)")
	}
	switch bed(t) {
	case "a":
		valkeyDrive(t)
	case "b":
		serve(t)
	}
}

// respCmd appends a RESP array of bulk strings.
func respCmd(b []byte, args ...string) []byte {
	b = fmt.Appendf(b, "*%d\r\n", len(args))
	for _, a := range args {
		b = fmt.Appendf(b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b
}

// readReply reads one simple-string, error or bulk-string reply.
func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("an empty reply line")
	}
	switch line[0] {
	case '+':
		return line[1:], nil
	case '-':
		return "", errors.New("server error: " + line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return "", fmt.Errorf("bad bulk length %q", line)
		}
		if n < 0 {
			return "(nil)", nil
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return "", err
		}
		return string(b[:n]), nil
	}
	return "", fmt.Errorf("an unexpected reply %q", line)
}

func valkeyValue(i int) string { return "value-" + strconv.Itoa(i) + strings.Repeat("v", i%300) }

func valkeyDrive(t *testing.T) {
	c := dial(t)
	defer c.c.Close()
	if err := c.send(setup{Test: t.Name(), Mode: "valkey"}); err != nil {
		t.Fatal(err)
	}
	var ready report
	if err := c.recv(&ready); err != nil || ready.Err != "" {
		t.Fatalf("b's valkey-server: %v %s", err, ready.Err)
	}
	addr := net.JoinHostPort(os.Getenv(envPeer), strconv.Itoa(valkeyPort))
	conn := valkeyDial(t, addr)
	defer conn.Close()

	// The writer pipelines SETs of keys 0, 1, 2, ... in batches of 50;
	// the reader reads their replies. Each records how it ended.
	var (
		mu         sync.Mutex
		sent       int // SETs whose bytes Write took whole
		replied    int // "+OK" replies read, in order
		werr, rerr error
		werrAt     time.Time
		rerrAt     time.Time
	)
	started := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		var buf []byte
		for i := 0; ; {
			buf = buf[:0]
			for j := 0; j < 50; j++ {
				buf = respCmd(buf, "SET", "linkdown:"+strconv.Itoa(i+j), valkeyValue(i+j))
			}
			_, err := conn.Write(buf)
			mu.Lock()
			if err != nil {
				werr, werrAt = err, time.Now()
				mu.Unlock()
				return
			}
			i += 50
			sent = i
			mu.Unlock()
			// Keep the pipeline at most a few batches ahead of the
			// replies: the data in flight is what the fault catches.
			for {
				mu.Lock()
				ahead, failed := sent-replied, rerr != nil
				mu.Unlock()
				if ahead < 500 || failed {
					break
				}
				time.Sleep(time.Millisecond)
			}
		}
	}()
	go func() {
		defer wg.Done()
		r := bufio.NewReader(conn)
		signalled := false
		for {
			v, err := readReply(r)
			if err == nil && v != "OK" {
				err = fmt.Errorf("SET reply %q", v)
			}
			mu.Lock()
			if err != nil {
				rerr, rerrAt = err, time.Now()
				mu.Unlock()
				if !signalled {
					close(started)
				}
				return
			}
			replied++
			n := replied
			mu.Unlock()
			if !signalled && n >= 1000 {
				close(started)
				signalled = true
			}
		}
	}()
	select {
	case <-started:
	case <-time.After(ctlWait):
		t.Fatal("no 1000 replies before the fault")
	}
	mu.Lock()
	early := rerr
	mu.Unlock()
	if early != nil {
		t.Fatalf("the pipeline failed before the fault: %v", early)
	}
	if err := c.send(command{Op: "linkdown", DownFor: valkeyDown}); err != nil {
		t.Fatal(err)
	}
	var ack report
	if err := c.recv(&ack); err != nil || ack.Err != "" {
		t.Fatalf("b's link down: %v %s", err, ack.Err)
	}
	down := time.Now() // b answers right before it takes the link down
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(valkeyGuard):
		mu.Lock()
		t.Fatalf("Read or Write still blocked %v after b's link went down (sent %d, replied %d)", valkeyGuard, sent, replied)
	}
	mu.Lock()
	t.Logf("link down after %d replies; %d SETs sent, %d replied; Read returned %q after %v, Write %q after %v",
		replied, sent, replied, rerr, rerrAt.Sub(down).Round(time.Millisecond), werr, werrAt.Sub(down).Round(time.Millisecond))
	if rerr == nil || werr == nil {
		t.Errorf("Read's error %v, Write's %v: want both", rerr, werr)
	}
	var op *net.OpError
	if !errors.As(werr, &op) {
		t.Errorf("Write's error %v is not a *net.OpError", werr)
	}
	if rerr != io.EOF && !errors.As(rerr, &op) {
		t.Errorf("Read's error %v is neither io.EOF nor a *net.OpError", rerr)
	}
	sentN, repliedN := sent, replied
	mu.Unlock()
	if _, err := conn.Write(respCmd(nil, "PING")); err == nil {
		t.Error("a Write after the connection failed succeeded")
	}
	if err := conn.Close(); err != nil {
		t.Errorf("Close after the connection failed: %v", err)
	}

	// done waits for b's link to come up again; sent once the link is
	// due up, it does not wait for TCP's back-off as well.
	time.Sleep(time.Until(down.Add(valkeyDown)))
	if err := c.send(command{Op: "done"}); err != nil {
		t.Fatal(err)
	}
	var rep report
	if err := c.recv(&rep); err != nil || rep.Err != "" {
		t.Fatalf("b's report: %v %s", err, rep.Err)
	}
	t.Logf("b's link was down %v", rep.Down.Round(time.Millisecond))

	// Every replied SET is on the server; of those sent without a
	// reply (their caller got an error), the server may have applied
	// some.
	conn2 := valkeyDial(t, addr)
	defer conn2.Close()
	r := bufio.NewReader(conn2)
	check := func(from, to int) (found int) {
		for i := from; i < to; {
			end := min(i+200, to)
			var buf []byte
			for j := i; j < end; j++ {
				buf = respCmd(buf, "GET", "linkdown:"+strconv.Itoa(j))
			}
			if _, err := conn2.Write(buf); err != nil {
				t.Fatalf("GETs after the link came back: %v", err)
			}
			for j := i; j < end; j++ {
				v, err := readReply(r)
				if err != nil {
					t.Fatalf("GET %d after the link came back: %v", j, err)
				}
				switch v {
				case valkeyValue(j):
					found++
				case "(nil)":
					if j < repliedN {
						t.Errorf("SET %d had its reply, but the key is not on the server", j)
					}
				default:
					t.Errorf("GET %d: %.40q, want %.40q", j, v, valkeyValue(j))
				}
			}
			i = end
		}
		return found
	}
	check(0, repliedN)
	applied := check(repliedN, sentN)
	if err := c.send(command{Op: "end"}); err != nil {
		t.Error(err)
	}
	t.Logf("all %d replied SETs on the server; of the %d without a reply, %d were applied", repliedN, sentN-repliedN, applied)
	res := result{Fault: "valkey: b's link down " + valkeyDown.String() + " under a SET pipeline", Posted: sentN, OK: repliedN, Error: sentN - repliedN,
		Detect: min(rerrAt.Sub(down), werrAt.Sub(down)), Wall: time.Since(down)}
	resultMu.Lock()
	results = append(results, res)
	resultMu.Unlock()
}

// valkeyDial dials addr, retrying while b's server is starting or the
// link is coming back.
func valkeyDial(t *testing.T, addr string) *valkeyrdma.Conn {
	t.Helper()
	deadline := time.Now().Add(ctlWait)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		conn, err := valkeyrdma.Dial(ctx, "tcp", addr)
		cancel()
		if err == nil {
			return conn
		}
		if time.Now().After(deadline) {
			t.Fatalf("dial valkey-server at %s: %v", addr, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// serveValkey is b's side of TestValkeyLinkDown: valkey-server with RDMA
// on b's address, and the link taken down when a asks.
func serveValkey(t *testing.T, c *ctl) {
	dir := os.Getenv(envValkey)
	addr := os.Getenv(testutil.EnvAddr)
	var log bytes.Buffer
	srv := exec.Command(filepath.Join(dir, "valkey-server"),
		"--protected-mode", "no", "--dir", t.TempDir(), "--save", "", "--appendonly", "no", "--port", "0",
		"--loadmodule", filepath.Join(dir, "valkey-rdma.so"), "--rdma-bind", addr, "--rdma-port", strconv.Itoa(valkeyPort))
	srv.Stdout, srv.Stderr = &log, &log
	if err := srv.Start(); err != nil {
		c.send(report{Err: err.Error()})
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait() }()
	defer func() {
		srv.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("valkey-server's log:\n%s", log.String())
		}
	}()
	if err := c.send(report{}); err != nil { // a dials until the server answers
		t.Fatal(err)
	}
	var f peerFaults
	for {
		var cmd command
		if err := c.recv(&cmd); err != nil {
			t.Fatalf("a's command: %v", err)
		}
		if ok, err := f.apply(c, cmd); err != nil {
			t.Fatal(err)
		} else if ok {
			continue
		}
		if cmd.Op != "done" {
			t.Fatalf("unexpected command %q", cmd.Op)
		}
		rep := report{}
		if err := f.clear(); err != nil {
			rep.Err = err.Error()
		}
		rep.Down = f.down
		if err := c.send(rep); err != nil {
			t.Fatal(err)
		}
		// a checks its SETs over a new connection, then says end.
		var end command
		if err := c.recv(&end); err != nil || end.Op != "end" {
			t.Errorf("a's end: %v %q", err, end.Op)
		}
		return
	}
}
