package rsocket_test

import (
	"io"
	"testing"
	"time"
)

// Read and Write allocate nothing once a connection runs: in a
// request-response exchange (every Read waits on the completion channel)
// and in a stream of 64 KiB writes read by the peer (credits, buffer
// halves and send completions cycling).
func TestConnAllocs(t *testing.T) {
	c1, c2 := pipe(t)
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
	if a := testing.AllocsPerRun(300, pingpong); a != 0 {
		t.Errorf("request-response: %v allocations per round, want 0", a)
	}

	// With deadlines set (each wait arms its timer).
	c1.SetDeadline(time.Now().Add(time.Hour))
	c2.SetDeadline(time.Now().Add(time.Hour))
	for range 20 {
		pingpong()
	}
	if a := testing.AllocsPerRun(100, pingpong); a != 0 {
		t.Errorf("request-response with deadlines: %v allocations per round, want 0", a)
	}

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
	if a := testing.AllocsPerRun(50, stream); a != 0 {
		t.Errorf("stream of 256 KiB writes: %v allocations per write, want 0", a)
	}
}
