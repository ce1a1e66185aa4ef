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
	if re := regexp.MustCompile(`\nthread \d+ \(sleep\) state [A-Z]:\n`); !re.MatchString(err.Error()) {
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
