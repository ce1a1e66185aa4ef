package testutil

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// WaitParked waits until some goroutine whose stack contains fn (for
// example "cq.(*CQ).Wait") is parked on the netpoller, so that a test can
// act on a wait that is really waiting. It fails the test after a
// generous guard time.
func WaitParked(t testing.TB, fn string) {
	t.Helper()
	buf := make([]byte, 4<<20)
	deadline := time.Now().Add(60 * time.Second)
	for {
		n := runtime.Stack(buf, true)
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			if strings.Contains(g, fn) && strings.Contains(g, "runtime_pollWait") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no goroutine parked on the netpoller in %s", fn)
		}
		runtime.Gosched()
	}
}
