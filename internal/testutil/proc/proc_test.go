package proc

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// envSleeper makes this test binary, re-executed, sleep in a goroutine
// instead of testing: the Go program WaitReady gives up on.
const envSleeper = "GOVERBS_PROC_TEST_SLEEPER"

func TestMain(m *testing.M) {
	if os.Getenv(envSleeper) != "" {
		done := make(chan struct{})
		go func() { time.Sleep(time.Hour); close(done) }()
		fmt.Println("sleeping")
		<-done
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestWaitReady(t *testing.T) {
	p, err := Start(t, "sleep", []string{"sleep", "60"}, nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	took, err := p.WaitReady("third poll", time.Minute, func() bool { n++; return n == 3 })
	if err != nil || n != 3 || took <= 0 {
		t.Fatalf("WaitReady = %v, %v after %d polls; want nil after 3", took, err, n)
	}
}

func TestWaitReadyExited(t *testing.T) {
	p, err := Start(t, "true", []string{"true"}, nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.WaitReady("never", time.Minute, func() bool { return false })
	if err == nil || !strings.Contains(err.Error(), "never: exited first") {
		t.Fatalf("WaitReady = %v, want an exited-first error", err)
	}
}

// A C-like program that is not ready in time is killed, and the error
// holds its kernel stacks.
func TestWaitReadyTimeout(t *testing.T) {
	p, err := Start(t, "sleep", []string{"sleep", "60"}, nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.WaitReady("sleep's exec", time.Minute, func() bool {
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p.Cmd.Process.Pid))
		return string(comm) == "sleep\n"
	}); err != nil {
		t.Fatal(err)
	}
	_, err = p.WaitReady("never", 100*time.Millisecond, func() bool { return false })
	if err == nil {
		t.Fatal("WaitReady = nil, want a timeout")
	}
	for _, want := range []string{"never: not after 100ms", "(ended by its guard)", "--- kernel stacks at the guard:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if re := regexp.MustCompile(`\nthread \d+ \(sleep\) state [A-Z], CPU time \S+ user \S+ system:\n`); !re.MatchString(err.Error()) {
		t.Errorf("error lacks a thread line matching %v:\n%v", re, err)
	}
	if !p.Exited() {
		t.Error("the process still runs")
	}
}

// This binary, run through taskset as the beds pin it, prints its
// goroutines' stacks when WaitReady gives up on it.
func TestWaitReadyGoStacks(t *testing.T) {
	taskset, err := exec.LookPath("taskset") // util-linux, essential on Debian
	if err != nil {
		t.Fatal(err)
	}
	p, err := Start(t, "sleeper", []string{taskset, "-c", "0", os.Args[0]}, append(os.Environ(), envSleeper+"=1"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.WaitReady("sleeper's start", time.Minute, func() bool { return p.Stdout.String() == "sleeping\n" }); err != nil {
		t.Fatal(err)
	}
	_, err = p.WaitReady("never", 100*time.Millisecond, func() bool { return false })
	if err == nil {
		t.Fatal("WaitReady = nil, want a timeout")
	}
	for _, want := range []string{"SIGQUIT", "goroutine ", "time.Sleep", "register lines dropped", "--- kernel stacks at the guard:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if regexp.MustCompile(`(?m)^(rip|pc)\s+0x`).MatchString(err.Error()) {
		t.Errorf("error holds the register dump:\n%v", err)
	}
}

// The guard's expiry ends a hung program, and String then says so and
// shows where its threads were in the kernel.
func TestGuardExpiry(t *testing.T) {
	p, err := Start(t, "sleep", []string{"sleep", "60"}, nil, 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if p.Wait() == nil {
		t.Fatal("Wait = nil, want the guard's kill")
	}
	if !p.Guarded() {
		t.Error("Guarded = false after the guard ended the process")
	}
	s := p.String()
	for _, want := range []string{"(ended by its guard)", "--- kernel stacks at the guard:\nthread "} {
		if !strings.Contains(s, want) {
			t.Errorf("String lacks %q:\n%s", want, s)
		}
	}
	q, err := Start(t, "true", []string{"true"}, nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Wait(); err != nil || q.Guarded() || strings.Contains(q.String(), "guard") {
		t.Errorf("a program that exited by itself: Wait = %v, Guarded = %v, String:\n%s", err, q.Guarded(), q)
	}
	// The hung server's stacks end the message; otherwise the server
	// comes first.
	if m := ServerFailed(p, q); !strings.HasPrefix(m, "server failed: ended by its guard") || !strings.HasSuffix(m, p.String()) {
		t.Errorf("ServerFailed(guarded server, client):\n%s", m)
	}
	if m := ServerFailed(q, p); !strings.HasPrefix(m, "server failed: "+q.String()) || !strings.HasSuffix(m, "client "+p.String()) {
		t.Errorf("ServerFailed(server, guarded client):\n%s", m)
	}
}

func TestDropRegisters(t *testing.T) {
	in := "goroutine 1 [running]:\nmain.main()\n\t/x/main.go:5 +0x1d\n\nrax    0x1\nrflags 0x206\ncs     0x33\nfs     0x0\n"
	want := "goroutine 1 [running]:\nmain.main()\n\t/x/main.go:5 +0x1d\n\n(4 register lines dropped)\n"
	if got := dropRegisters(in); got != want {
		t.Errorf("dropRegisters:\n%q\nwant\n%q", got, want)
	}
	arm := "r0      0x4\nlr      0x1\nsp      0x2\npc      0x3\nfault   0x0\n"
	if got := dropRegisters(arm); got != "(5 register lines dropped)\n" {
		t.Errorf("dropRegisters(arm64 dump) = %q", got)
	}
	if s := "no dump here\n"; dropRegisters(s) != s {
		t.Errorf("dropRegisters changed %q", s)
	}
}

func TestThreadStat(t *testing.T) {
	for _, c := range []struct {
		stat      string
		state     string
		user, sys time.Duration
	}{
		{"268 (ibv_srq_pingpon) R 1 268 268 0 -1 4194304 120 0 0 0 2512 37 0 0 20 0 1 0 900 1000 10 18446744073709551615\n", "R", 25120 * time.Millisecond, 370 * time.Millisecond},
		{"7 (a) b) S 1 7 7 0 -1 0 0 0 0 0 3 4 0 0\n", "S", 30 * time.Millisecond, 40 * time.Millisecond},
		{"7 (cut short) S 1 7\n", "?", 0, 0},
		{"", "?", 0, 0},
	} {
		state, user, sys := threadStat([]byte(c.stat))
		if state != c.state || user != c.user || sys != c.sys {
			t.Errorf("threadStat(%q) = %s, %v, %v; want %s, %v, %v", c.stat, state, user, sys, c.state, c.user, c.sys)
		}
	}
}
