package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// proc is a program a test runs beside itself: this binary as goverbs
// (see envRunMain) or a C peer.
type proc struct {
	name           string
	impl, tool     string // set by cmStart: "c", "c-lines" or "go", and the tool
	cmd            *exec.Cmd
	stdout, stderr syncBuffer
	done           chan struct{}
	err            error
}

// The test files' names for it.
type (
	ppProc  = proc
	cmProc  = proc
	rpxProc = proc
)

// startProc starts argv with env (nil: inherit). The process is killed
// when the test ends, or after guard (a hang, not a timing check).
func startProc(t testing.TB, name string, argv, env []string, guard time.Duration) (*proc, error) {
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	p := &proc{name: name, done: make(chan struct{})}
	p.cmd = exec.CommandContext(ctx, argv[0], argv[1:]...)
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if argv[0] == os.Args[0] {
		// goverbs is this binary, a Go program: when the guard expires,
		// SIGQUIT makes it print every goroutine's stack to its stderr
		// (kept in the failure message), the evidence of where it hung;
		// SIGKILL follows if it has not exited 5 s later.
		p.cmd.Cancel = func() error { return p.cmd.Process.Signal(syscall.SIGQUIT) }
		p.cmd.WaitDelay = 5 * time.Second
	}
	if err := p.cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("start %v: %v", argv, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		cancel()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p, nil
}

func (p *proc) wait() error {
	<-p.done
	return p.err
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) status() int {
	if p.cmd.ProcessState == nil {
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

func (p *proc) String() string {
	return fmt.Sprintf("%s (pid %d): %v\n--- stdout:\n%s--- stderr:\n%s", p.name, p.cmd.Process.Pid, p.err,
		p.stdout.String(), p.stderr.String())
}

func (p *proc) lines() []string {
	s := strings.TrimSuffix(p.stdout.String(), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// syncBuffer is a bytes.Buffer that may be read while the process writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// trimSuffix removes suffix from the end of the buffer if it is there,
// and reports whether it was.
func (b *syncBuffer) trimSuffix(suffix string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !bytes.HasSuffix(b.buf.Bytes(), []byte(suffix)) {
		return false
	}
	b.buf.Truncate(b.buf.Len() - len(suffix))
	return true
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
