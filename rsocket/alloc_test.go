package rsocket_test

import (
	"io"
	"math"
	"testing"
	"time"

	"github.com/goverbs/goverbs/rsocket"
)

// allocs runs f as testing.AllocsPerRun does and fails unless it
// allocated nothing — in race builds, at most one allocation per arming of
// the CQ (see raceBuild). Not per wait: a wait arms first and may then find
// its condition met without waiting, more often on a loaded machine (this
// test failed so once, under CI's load, with 2 allocations per run against
// 1 wait).
func allocs(t *testing.T, what string, runs int, f func(), cs ...*rsocket.Conn) {
	t.Helper()
	waits := func() (n uint64) {
		for _, c := range cs {
			n += rsocket.Arms(c)
		}
		return n
	}
	w0 := waits()
	a := testing.AllocsPerRun(runs, f)
	want := 0.0
	if raceBuild {
		want = math.Ceil(float64(waits()-w0) / float64(runs+1))
	}
	if a > want {
		t.Errorf("%s: %v allocations per run, want at most %v", what, a, want)
	}
}

// Read and Write allocate nothing once a connection runs: in a
// request-response exchange and in a stream of 64 KiB writes read by the
// peer (credits, buffer halves and send completions cycling). Without
// polling every blocked call waits on the completion channel; with it
// (the default) a call polls first.
func TestConnAllocs(t *testing.T) {
	t.Run("channel", func(t *testing.T) { testConnAllocs(t, true, rsocket.PollTime(0)) })
	t.Run("poll", func(t *testing.T) { testConnAllocs(t, false) })
}

func testConnAllocs(t *testing.T, mustWait bool, opts ...rsocket.Option) {
	c1, c2 := pipe(t, opts...)
	guard(t, 4*time.Minute, c1, c2)

	req, resp := make([]byte, 1000), make([]byte, 1000)
	pingpong := func() {
		if _, err := c1.Write(req); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c2, resp); err != nil {
			t.Fatal(err)
		}
		if _, err := c2.Write(resp); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c1, req); err != nil {
			t.Fatal(err)
		}
	}
	for range 50 {
		pingpong() // warm-up: the wait contexts, timers, ...
	}
	allocs(t, "request-response", 300, pingpong, c1, c2)

	// With deadlines set (each wait arms its timer).
	c1.SetDeadline(time.Now().Add(time.Hour))
	c2.SetDeadline(time.Now().Add(time.Hour))
	for range 20 {
		pingpong()
	}
	allocs(t, "request-response with deadlines", 100, pingpong, c1, c2)

	big, rbig := make([]byte, 256<<10), make([]byte, 256<<10)
	start, done := make(chan struct{}), make(chan error)
	go func() {
		for range start {
			_, err := c1.Write(big)
			done <- err
		}
	}()
	defer close(start)
	stream := func() {
		start <- struct{}{}
		if _, err := io.ReadFull(c2, rbig); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	for range 10 {
		stream()
	}
	allocs(t, "stream of 256 KiB writes", 50, stream, c1, c2)
	if mustWait && rsocket.Waits(c1)+rsocket.Waits(c2) == 0 {
		t.Error("no call waited on a completion channel: the wait path was not measured")
	}
	if mustWait && rsocket.Polled(c1)+rsocket.Polled(c2) != 0 {
		t.Error("a connection with PollTime(0) polled")
	}
}
