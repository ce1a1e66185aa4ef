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
	for _, want := range []string{"never: not after 100ms", "--- kernel stacks then:"} {
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
	for _, want := range []string{"SIGQUIT", "goroutine ", "time.Sleep"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
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
