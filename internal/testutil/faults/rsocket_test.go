package faults

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/rsocket"
)

const rsPort = 7473 // b's rsocket listener

// rsGuard bounds a's wait for its blocked Read and Write once b's process
// died: b's kernel closes the dead process's rdma_cm IDs, which sends the
// DREQ; a's rsocket learns of it from the DISCONNECTED event. Seconds are
// enough; this is a hang detector, not a timing check.
const rsGuard = 90 * time.Second

func rsDrive(t *testing.T) {
	c := dial(t)
	if err := c.send(setup{Test: t.Name(), Mode: "rskill"}); err != nil {
		t.Fatal(err)
	}
	var ready report
	if err := c.recv(&ready); err != nil || ready.Err != "" {
		t.Fatalf("b's listener: %v %s", err, ready.Err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), ctlWait)
	defer cancel()
	conn, err := rsocket.Dial(ctx, "tcp", net.JoinHostPort(os.Getenv(envPeer), strconv.Itoa(rsPort)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	// The writer sends 64 KiB at a time, the reader takes what b echoes;
	// each records how it ended.
	var wg sync.WaitGroup
	var written, read int64
	var mu sync.Mutex
	var werr, rerr error
	echoed := make(chan struct{})
	wg.Add(2)
	go func() {
		defer wg.Done()
		buf := make([]byte, 64<<10)
		for {
			n, err := conn.Write(buf)
			mu.Lock()
			written += int64(n)
			mu.Unlock()
			if err != nil {
				mu.Lock()
				werr = err
				mu.Unlock()
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		buf := make([]byte, 32<<10)
		signalled := false
		for {
			n, err := conn.Read(buf)
			mu.Lock()
			read += int64(n)
			r := read
			mu.Unlock()
			if !signalled && r >= 4<<20 {
				close(echoed)
				signalled = true
			}
			if err != nil {
				mu.Lock()
				rerr = err
				mu.Unlock()
				if !signalled {
					close(echoed)
				}
				return
			}
		}
	}()
	select {
	case <-echoed:
	case <-time.After(ctlWait):
		t.Fatal("no 4 MiB echoed before the fault")
	}
	mu.Lock()
	early := rerr
	mu.Unlock()
	if early != nil {
		t.Fatalf("the stream failed before the fault: %v", early)
	}
	killed := time.Now()
	if err := c.send(command{Op: "die"}); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(rsGuard):
		t.Fatalf("Read or Write still blocked %v after b's process was killed (written %d, read %d)", rsGuard, written, read)
	}
	took := time.Since(killed)
	mu.Lock()
	defer mu.Unlock()
	t.Logf("b killed after %d bytes echoed; Write returned %v, Read %v, both within %v", read, werr, rerr, took.Round(time.Millisecond))
	if werr == nil {
		t.Error("Write returned no error after the peer died")
	}
	if rerr == nil {
		t.Error("Read returned no error after the peer died")
	}
	var op *net.OpError
	if !errors.As(werr, &op) {
		t.Errorf("Write's error %v is not a *net.OpError", werr)
	}
	if rerr != io.EOF && !errors.As(rerr, &op) {
		t.Errorf("Read's error %v is neither io.EOF nor a *net.OpError", rerr)
	}
	// After the fault the Conn stays usable for what net.Conn promises:
	// later calls fail at once, Close succeeds.
	if _, err := conn.Write([]byte("x")); err == nil {
		t.Error("a Write after the peer died succeeded")
	}
	if err := conn.Close(); err != nil {
		t.Errorf("Close after the peer died: %v", err)
	}
	var rep report
	if err := c.recv(&rep); err != nil {
		t.Fatalf("b's report: %v", err)
	}
	if !rep.Killed || rep.Baseline != "" || rep.Err != "" {
		t.Errorf("b: killed %v, kernel objects left %q, error %q", rep.Killed, rep.Baseline, rep.Err)
	}
}

// rsRespond is b's child for rskill: it echoes one rsocket connection
// until a has it killed.
func rsRespond(c *ctl, addr string) error {
	l, err := rsocket.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(rsPort)))
	if err != nil {
		c.send(report{Err: err.Error()})
		return err
	}
	if err := c.send(report{}); err != nil {
		return err
	}
	conn, err := l.Accept()
	if err != nil {
		return err
	}
	go io.Copy(conn, conn)
	var cmd command
	if err := c.recv(&cmd); err != nil {
		return err
	}
	if cmd.Op != "die" {
		return errors.New("rskill: unexpected command " + cmd.Op)
	}
	return unix.Kill(os.Getpid(), unix.SIGKILL)
}
