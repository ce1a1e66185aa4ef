package proc

import (
	"fmt"
	"sync"
	"time"

	"github.com/goverbs/goverbs/internal/testutil"
)

// MaxRuns bounds the runs of a pair that fails in a way the tests know
// to come from outside goverbs: a test that sees the evidence runs the
// pair again, at most this many times in all. Its users: siw's
// first-message failures (docs/providers.md, "siw: who sends first") and
// stalls (StallWatch), and a C scch example's completion order
// (rpmaex.cCompletionOrder).
const MaxRuns = 5

// StallSamples is how many samples, a second apart, must find the same
// bytes unread in the same socket to call it a stall.
const StallSamples = 5

// StallWatch watches a pair on iWARP for siw's failures: bytes TCP
// delivered to a socket of the pair's connections (local or remote port:
// the server's) that stay unread (siw reads its sockets in the kernel as
// data arrives, so unread bytes that do not move are a receive siw
// dropped), and whatever else the caller's check finds (WatchSiw). It
// then kills the pair's processes and keeps the evidence.
type StallWatch struct {
	port int
	done chan struct{}
	wg   sync.WaitGroup

	mu       sync.Mutex
	procs    []*Proc // the server first
	evidence string
}

// WatchSiw starts watching the pair whose server listens on port. check
// (nil: none), called every second for each client with the server,
// returns evidence of another of siw's failures, or "".
func WatchSiw(port int, server *Proc, check func(server, client *Proc) string) *StallWatch {
	w := &StallWatch{port: port, done: make(chan struct{}), procs: []*Proc{server}}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		seen := map[string]int{} // socket and unread count -> samples
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-w.done:
				return
			case <-tick.C:
			}
			why := ""
			w.mu.Lock()
			for _, c := range w.procs[1:] {
				if why == "" && check != nil {
					why = check(w.procs[0], c)
				}
			}
			w.mu.Unlock()
			now := map[string]int{}
			for _, s := range testutil.UnreadTCP(port) {
				now[s] = seen[s] + 1
				if now[s] >= StallSamples && why == "" {
					why = fmt.Sprintf("siw left %s unread for %d s while both ends waited", s, StallSamples-1)
				}
			}
			seen = now
			if why != "" {
				w.mu.Lock()
				w.evidence = why
				for _, p := range w.procs {
					p.Cmd.Process.Kill()
				}
				w.mu.Unlock()
				return
			}
		}
	}()
	return w
}

// Add adds a client of the pair (killed at once if the watch has already
// found a failure). A nil watch ignores it.
func (w *StallWatch) Add(p *Proc) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.evidence != "" {
		p.Cmd.Process.Kill()
	}
	w.procs = append(w.procs, p)
}

// Stop ends the watch. A nil watch (none started) has nothing to stop.
func (w *StallWatch) Stop() {
	if w == nil {
		return
	}
	select {
	case <-w.done:
	default:
		close(w.done)
	}
	w.wg.Wait()
}

// Stalled returns the evidence of a failure, or "" (also for a nil watch).
func (w *StallWatch) Stalled() string {
	if w == nil {
		return ""
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.evidence
}
