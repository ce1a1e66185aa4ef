// Package proc runs the programs an interop test puts beside itself: the
// test binary re-executed as the Go program under test (goverbs, or an
// rpma example), or a C peer; it keeps their output, kills a hang and
// watches a pair on siw for the kernel's own failures (WatchSiw).
//
//	p, err := proc.Start(t, "go server", argv, env, 4*time.Minute)
//	...
//	if err := p.Wait(); err != nil {
//		t.Fatalf("server failed: %v", p) // name, pid, error, stdout, stderr
//	}
package proc

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Proc is a program a test runs beside itself.
type Proc struct {
	Name           string
	Impl, Tool     string // the caller's labels (e.g. "c", "c-lines" or "go", and the tool)
	Cmd            *exec.Cmd
	Stdout, Stderr SyncBuffer
	done           chan struct{}
	err            error
	goProgram      bool               // this binary, which prints its stacks on SIGQUIT
	stop           context.CancelFunc // ends the process as the guard does
	guardStacks    string             // its threads' kernel stacks when the guard (or stop) ended it
}

// isSelf reports whether argv runs this binary, directly or through
// taskset (which execs it in the same process, so signals reach it).
func isSelf(argv []string) bool {
	if len(argv) > 3 && filepath.Base(argv[0]) == "taskset" && argv[1] == "-c" {
		argv = argv[3:]
	}
	return argv[0] == os.Args[0]
}

// Start starts argv with env (nil: inherit). The process is killed when
// the test ends, or after guard (a hang, not a timing check). When argv
// runs this binary (a Go program), directly or through taskset, the guard
// sends SIGQUIT first, so that its goroutines' stacks land on its stderr,
// and SIGKILL 5 s later.
func Start(t testing.TB, name string, argv, env []string, guard time.Duration) (*Proc, error) {
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	p := &Proc{Name: name, done: make(chan struct{}), stop: cancel}
	p.Cmd = exec.CommandContext(ctx, argv[0], argv[1:]...)
	p.Cmd.Env = env
	p.Cmd.Stdout, p.Cmd.Stderr = &p.Stdout, &p.Stderr
	p.goProgram = isSelf(argv)
	// When the guard expires, where each thread was in the kernel is kept
	// for String, the evidence of a hang in a system call. For this
	// binary, a Go program, SIGQUIT then makes it print every goroutine's
	// stack to its stderr (kept in the failure message), the evidence of
	// where it hung in Go; SIGKILL follows if it has not exited 5 s later.
	// Any other program is killed.
	p.Cmd.Cancel = func() error {
		p.guardStacks = p.KernelStacks()
		if p.goProgram {
			return p.Cmd.Process.Signal(syscall.SIGQUIT)
		}
		return p.Cmd.Process.Kill()
	}
	if p.goProgram {
		p.Cmd.WaitDelay = 5 * time.Second
	}
	if err := p.Cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("start %v: %v", argv, err)
	}
	go func() {
		p.err = p.Cmd.Wait()
		cancel()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.Cmd.Process.Kill()
			<-p.done
		}
	})
	return p, nil
}

// Wait waits for the process to exit and returns exec.Cmd.Wait's error.
func (p *Proc) Wait() error {
	<-p.done
	return p.err
}

// Excuse drops the error of the exited process, a failure the test has
// found to be a known one of the peer's: Wait and String report none.
func (p *Proc) Excuse() {
	<-p.done
	p.err = nil
}

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Status returns the exit status, -1 while the process runs.
func (p *Proc) Status() int {
	if p.Cmd.ProcessState == nil {
		return -1
	}
	return p.Cmd.ProcessState.ExitCode()
}

// String is what a failure message shows of the process: its name, pid,
// error, standard output and standard error. For a process the guard
// ended, the standard error's goroutine stacks come without the register
// dump that follows them (the signalled thread's, which says nothing of
// the hang), and then the kernel stacks of its threads at the guard.
func (p *Proc) String() string {
	status := "still running"
	stderr, guard := p.Stderr.String(), ""
	if p.Exited() { // p.err and guardStacks are written before done closes
		status = fmt.Sprint(p.err)
		if p.guardStacks != "" {
			status += " (ended by its guard)"
			stderr = dropRegisters(stderr)
			guard = "--- kernel stacks at the guard:\n" + p.guardStacks
		}
	}
	return fmt.Sprintf("%s (pid %d): %s\n--- stdout:\n%s--- stderr:\n%s%s", p.Name, p.Cmd.Process.Pid, status,
		p.Stdout.String(), stderr, guard)
}

// Guarded reports whether the guard (or WaitReady) ended the process.
func (p *Proc) Guarded() bool {
	return p.Exited() && p.guardStacks != ""
}

// registerRE matches a line of the register dump a Go program prints
// after its goroutines on SIGQUIT ("rax    0x1", "rflags 0x206").
var registerRE = regexp.MustCompile(`^(r[a-z0-9]{1,5}|[a-z]?[cdefgs]s|pc|sp|lr|fault|x[0-9]{1,2}|pstate)\s+0x[0-9a-f]+$`)

// dropRegisters removes the register dump lines from a Go program's
// SIGQUIT output.
func dropRegisters(s string) string {
	lines := strings.SplitAfter(s, "\n")
	out := lines[:0]
	dropped := 0
	for _, l := range lines {
		if registerRE.MatchString(strings.TrimSpace(l)) {
			dropped++
			continue
		}
		out = append(out, l)
	}
	if dropped == 0 {
		return s
	}
	return strings.Join(out, "") + fmt.Sprintf("(%d register lines dropped)\n", dropped)
}

// WaitReady polls ready every 20 ms until it reports true, and returns
// how long that took. It fails if the process exits first, or if ready
// is still false after within (a hang, not a timing check: give it
// twice what the slowest bed has been measured to need). Then the error
// holds what the process was doing: the kernel stack of each of its
// threads, and, for this binary as a Go program, every goroutine's stack
// (SIGQUIT, then SIGKILL 5 s later), with its output.
func (p *Proc) WaitReady(what string, within time.Duration, ready func() bool) (time.Duration, error) {
	start := time.Now()
	for !ready() {
		if p.Exited() {
			return time.Since(start), fmt.Errorf("%s: exited first: %v", what, p)
		}
		if time.Since(start) > within {
			p.stop() // as the guard's expiry: kernel stacks kept, SIGQUIT first for a Go program
			<-p.done
			return time.Since(start), fmt.Errorf("%s: not after %v: %v", what, within, p)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start), nil
}

// KernelStacks returns where each thread of the running process is in
// the kernel (/proc/PID/task/TID/stack, readable by root, as the test
// beds run), or why it cannot.
func (p *Proc) KernelStacks() string {
	dir := fmt.Sprintf("/proc/%d/task", p.Cmd.Process.Pid)
	tids, err := os.ReadDir(dir)
	if err != nil {
		return err.Error() + "\n"
	}
	var b strings.Builder
	for _, tid := range tids {
		comm, _ := os.ReadFile(filepath.Join(dir, tid.Name(), "comm"))
		stat, _ := os.ReadFile(filepath.Join(dir, tid.Name(), "stat"))
		state, user, sys := threadStat(stat)
		fmt.Fprintf(&b, "thread %s (%s) state %s, CPU time %s user %s system:\n",
			tid.Name(), strings.TrimSpace(string(comm)), state, user, sys)
		stack, err := os.ReadFile(filepath.Join(dir, tid.Name(), "stack"))
		if err != nil {
			fmt.Fprintf(&b, "  %v\n", err)
			continue
		}
		for _, l := range strings.Split(strings.TrimSpace(string(stack)), "\n") {
			fmt.Fprintf(&b, "  %s\n", l)
		}
	}
	return b.String()
}

// threadStat returns the state letter and the user and system CPU time
// of a /proc/PID/task/TID/stat line: a thread in state R with no kernel
// stack was running, and the two times say where (in a VM, a trapped
// MMIO store counts as user time). The command is in parentheses and may
// hold spaces, so the fields are counted after its last ')'.
func threadStat(stat []byte) (state string, user, sys time.Duration) {
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "?", 0, 0
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state); utime and stime are fields 14 and 15
	if len(f) < 13 {
		return "?", 0, 0
	}
	tick := func(v string) time.Duration {
		n, _ := strconv.ParseInt(v, 10, 64)
		return time.Duration(n) * time.Second / 100 // USER_HZ, 100 on Linux
	}
	return f[0], tick(f[11]), tick(f[12])
}

// Lines returns the lines of standard output.
func (p *Proc) Lines() []string {
	s := strings.TrimSuffix(p.Stdout.String(), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// SyncBuffer is a bytes.Buffer that may be read while the process writes.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p to the buffer.
func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// TrimSuffix removes suffix from the end of the buffer if it is there,
// and reports whether it was.
func (b *SyncBuffer) TrimSuffix(suffix string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !bytes.HasSuffix(b.buf.Bytes(), []byte(suffix)) {
		return false
	}
	b.buf.Truncate(b.buf.Len() - len(suffix))
	return true
}

// String returns what was written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TCPListening reports whether a TCP socket listens on port, from
// /proc/net/tcp{,6}: a probe connection would use up a server's only
// accept.
func TCPListening(port int) bool {
	suffix := fmt.Sprintf(":%04X", port)
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) > 3 && strings.HasSuffix(fields[1], suffix) && fields[3] == "0A" {
				return true
			}
		}
	}
	return false
}

// ServerFailed is the failure message of a server that failed after its
// client exited: "server failed: " with the server, then the client. A
// server its guard ended (a hang) comes last instead, after the client,
// so that its goroutine and kernel stacks end the message, where a
// summary that keeps a failure's last lines finds them.
func ServerFailed(server, client *Proc) string {
	if server.Guarded() {
		return fmt.Sprintf("server failed: ended by its guard, its output last\n\nclient %v\n\nserver %v", client, server)
	}
	return fmt.Sprintf("server failed: %v\n\nclient %v", server, client)
}
