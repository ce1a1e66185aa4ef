package rdmaconn

import (
	"sync"
	"time"
)

// Waiter is one kind of blocked call of a connection (its Read, its
// Write, its Close): the call's deadline, the timer that wakes it at the
// deadline while it is blocked, and the channel it sleeps on. The
// connection's mutex guards it; nothing in it allocates once Init has
// run.
type Waiter struct {
	// Blocked is set while the call waits (Block to Unblock): only then
	// is there anyone to wake.
	Blocked bool

	wake     chan struct{} // capacity 1
	deadline time.Time
	timer    *time.Timer // fires at the deadline while blocked
}

// Init makes w's wake-up channel and its timer, which calls expire when
// the deadline passes while w is blocked; expire takes the connection's
// mutex and wakes w.
func (w *Waiter) Init(expire func()) {
	w.wake = make(chan struct{}, 1)
	w.timer = time.AfterFunc(time.Hour, expire)
	w.timer.Stop()
}

// SetDeadline sets w's deadline; the zero time means none. A blocked
// call must be woken to see it.
func (w *Waiter) SetDeadline(t time.Time) { w.deadline = t }

// Expired reports whether w's deadline has passed (as net.Conn's calls
// do, a call fails at once then, even if it could proceed). A deadline
// made from time.Now (as net.Conn users make theirs) carries a monotonic
// reading, and time.Until then reads only the monotonic clock: one vDSO
// call where time.Now makes two.
func (w *Waiter) Expired() bool {
	return !w.deadline.IsZero() && time.Until(w.deadline) <= 0
}

// Block marks w blocked and arms its timer for the deadline, if it has
// one. It reports false, and leaves w as it was, if the deadline has
// passed already.
func (w *Waiter) Block() bool {
	if !w.deadline.IsZero() {
		d := time.Until(w.deadline)
		if d <= 0 {
			return false
		}
		w.timer.Reset(d)
	}
	w.Blocked = true
	return true
}

// Sleep releases mu until w is signalled, then takes it again.
func (w *Waiter) Sleep(mu *sync.Mutex) {
	mu.Unlock()
	<-w.wake
	mu.Lock()
}

// Unblock ends what Block began.
func (w *Waiter) Unblock() {
	w.Blocked = false
	if !w.deadline.IsZero() {
		w.timer.Stop()
	}
}

// Signal wakes w from Sleep, or makes its next Sleep return at once.
func (w *Waiter) Signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}
