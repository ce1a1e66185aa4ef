package rsocket

import (
	"context"
	"runtime"
	"time"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/rdmaconn"
)

// Blocking.
//
// A call that cannot proceed waits for the CQ, which carries both
// directions' completions, through its completion channel
// (cq.WaitChannel, the CQ armed beforehand: see wait). The
// kernel hands each channel event to one reader, so one waiting call at a
// time, the leader, waits on the channel; the others (at most two: one
// Read and one Write or CloseWrite, or Close) wait on their own wake-up
// channel, and the leader wakes them whenever its wait ends. Whoever
// processes completions (progress) wakes the followers too; the leader
// needs no such wake-up, because it arms the CQ and looks at its
// condition in one critical section before it waits, so a completion
// another call handled is in the state it looked at, and a later one
// raises a channel event.
//
// The leader waits with c.waitCtx, the same context every time, which is
// what keeps the channel wait free of allocations; a deadline, Close or a state
// change the CQ does not report (CloseWrite, the CM's disconnect) ends
// the leader's wait by cancelling that context and making a new one
// (kick). Followers wake on their channel, which their deadline timer,
// Close and the leader signal.

// Wait conditions.
const (
	condRead   = iota // data to read, or reading is over
	condWrite         // a message may be sent, or writing is over
	condCtrl          // a control slot is free, or the connection is down
	condSent          // every send has completed, or the connection is down
	condDirect        // an IOWrite chunk may be sent, or writing is over
)

// ready reports whether cond holds. The caller holds c.mu.
func (c *Conn) ready(cond int) bool {
	switch cond {
	case condRead:
		return c.s.haveData() || c.s.state&stReadable == 0
	case condWrite:
		return c.s.canSend() || c.s.state&stWritable == 0
	case condCtrl:
		return c.s.ctrlAvail() || c.s.state&stConnected == 0
	case condDirect:
		return c.s.canWriteDirect() || c.s.state&stWritable == 0
	default:
		return c.s.allSent()
	}
}

// waiter is one kind of blocked call: Read, Write (or CloseWrite),
// Close. Its wake-up channel is a follower's.
type waiter struct {
	rdmaconn.Waiter
}

// initWaiters readies the waiters; a deadline that passes while one is
// blocked wakes it.
func (c *Conn) initWaiters() {
	for _, w := range [...]*waiter{&c.rw, &c.ww, &c.cw} {
		w.Init(func() {
			c.mu.Lock()
			c.wake(w)
			c.mu.Unlock()
		})
	}
}

// wake makes w, if blocked, look at its condition again. The caller
// holds c.mu.
func (c *Conn) wake(w *waiter) {
	if !w.Blocked {
		return
	}
	if c.leader == w {
		c.kick()
		return
	}
	w.Signal()
}

// kick ends the leader's channel wait.
func (c *Conn) kick() {
	c.waitCancel()
	c.waitCtx, c.waitCancel = context.WithCancel(c.bg)
}

// wakeFollowers wakes the blocked calls that are not waiting on the
// channel (for when completions were processed, or the leader left).
func (c *Conn) wakeFollowers() {
	for _, w := range [...]*waiter{&c.rw, &c.ww, &c.cw} {
		if w.Blocked && c.leader != w {
			w.Signal()
		}
	}
}

// wakeAll wakes every blocked call, the leader too (for state changes
// the CQ does not report). except, if not nil, is left alone.
func (c *Conn) wakeAll(except *waiter) {
	for _, w := range [...]*waiter{&c.rw, &c.ww, &c.cw} {
		if w != except {
			c.wake(w)
		}
	}
}

// poll polls the CQ for c.pollTime, as rsocket.c's rs_get_comp does
// before it blocks, and reports whether it should stop waiting: cond
// holds, w's deadline passed, or the connection is closing. It lets go of
// c.mu between polls, so the other calls (and whoever wakes w) get in.
// The caller holds c.mu.
//
// The goroutine yields every pollEvery polls, and the clock is read only
// where a yield is: under emulation a clock read costs more than a poll
// of the ring, and so does a yield, which reads the clock itself now and
// then (the scheduler's latency tracking). A call with a deadline reads
// the clock at every yield. One without reads it at the first yield (the
// start of c.pollTime) and then after twice as many polls each time, up
// to clockEveryMax polls apart: a call polls for at most about twice
// c.pollTime, and a long spin (rstream's non-blocking mode, which polls
// for a second) reads the clock every clockEveryMax polls instead of every
// pollEvery. Each read is of the monotonic clock only (time.Since on
// c.epoch, one vDSO call; time.Now makes two): in rstream's 64 B
// ping-pong in the TCG bed, whose 6.1 guest reads the HPET in a system
// call, time.Now in this loop took a quarter of each end's CPU.
func (c *Conn) poll(w *waiter, cond int) bool {
	start := time.Duration(-1) // since c.epoch, at the first clock read
	next := pollEvery          // the poll of the next clock read
	for i := 1; ; i++ {
		tick := i%pollEvery == 0 // yield, poll, then perhaps read the clock
		c.mu.Unlock()
		if tick {
			runtime.Gosched()
		}
		c.mu.Lock()
		if tick {
			c.unyielded = 0
		}
		if c.closing {
			return true
		}
		c.progress()
		if c.ready(cond) {
			return true
		}
		if !tick {
			continue
		}
		if w.Expired() {
			return true
		}
		if i < next {
			continue
		}
		next = i + min(i, clockEveryMax)
		now := time.Since(c.epoch)
		if start < 0 {
			start = now
		} else if now-start > c.pollTime {
			return false
		}
	}
}

// pollEvery is how many polls pass between yields in poll. 32 measured
// best of 8, 32 and 128 for rstream's 64 B ping-pong in the TCG bed
// (medians 19.1, 16.9 and 17.4 µs per transfer; C 14.5), and no worse
// than the others at 4 KiB.
const pollEvery = 32

// maybeYield yields (runtime.Gosched, c.mu released) once the calls
// since the last yield reach yieldEvery, counting each Read and each
// post's wait for room (awaitPost) as one, whether or not it then waits,
// and one more for each yieldBytes it moved (Read, post); a wait that
// polls yields itself and starts the count again. The caller holds c.mu.
//
// Without it, a Read or Write loop that never waits (a sender whose
// credits keep up, a reader whose data is always there) runs with no
// scheduling point, and every 10 ms the runtime's sysmon preempts it
// with a signal instead: in rstream's bandwidth tests in the TCG bed,
// about 25 signals a second on each sender, each a signal delivery, a
// return through the kernel and a reschedule. A yield costs a function
// call when nothing else is runnable. Measured with rstream in one boot
// (6.1, 15 rounds, against the build without it): 0.96-0.98 of the time
// per transfer on bandwidth from 4 KiB up (11-12 rounds of 15 faster),
// 0.98-0.99 elsewhere (docs/performance.md, rstream).
func (c *Conn) maybeYield() {
	c.unyielded++
	if c.unyielded < yieldEvery {
		return
	}
	c.unyielded = 0
	c.yields++
	c.mu.Unlock()
	runtime.Gosched()
	c.mu.Lock()
}

// yieldEvery is the count at which maybeYield yields, and yieldBytes the
// data that counts as one call. In the TCG bed 64 small messages, 32 of
// 4 KiB (2 each) or 4 of 64 KiB (17 each) take 2-4 ms: well inside
// the 10 ms after which the runtime preempts a goroutine by signal. By
// calls alone, 64 messages of 64 KiB took about 50 ms, and the sender
// was still preempted by signal (62 in 2 s at 64 KiB bandwidth, against
// 96 with no yield and 0 at 4 KiB).
const (
	yieldEvery = 64
	yieldBytes = 4 << 10
)

// clockEveryMax is the most polls poll makes between two clock reads
// when the call has no deadline (a multiple of pollEvery).
const clockEveryMax = 1024

// wait blocks the call w until cond may hold: until completions arrive,
// w's deadline passes (errTimeout, also when it has passed already),
// Close or another state change wakes it. It may return early; callers
// look at their condition again and loop. The caller holds c.mu, which
// wait releases while blocked.
func (c *Conn) wait(w *waiter, cond int) error {
	if w.Expired() {
		return errTimeout
	}
	// The deadline timer is armed only for the blocking wait: poll reads
	// the deadline itself, and a timer pending while it polls makes
	// every runtime.Gosched read the clock.
	if c.leader == nil && c.pollTime > 0 && c.poll(w, cond) {
		c.polled++
		return nil
	}
	if !w.Block() {
		return nil // the caller finds it expired
	}
	var err error
	if c.leader == nil {
		// Armed here, not by cq.Wait (which arms again itself): one
		// REQ_NOTIFY per wait, and cq.WaitChannel only waits.
		c.arms++
		if err = c.cq.ReqNotify(false); err == nil && !c.ready(cond) && !c.cq.Pending() {
			c.leader = w
			c.waits++
			ctx := c.waitCtx
			c.mu.Unlock()
			_, err = cq.WaitChannel(ctx, c.cch)
			c.mu.Lock()
			c.leader = nil
			if err != nil && ctx.Err() != nil {
				err = nil // kicked, or closing: the caller looks
			}
			c.wakeFollowers() // one of them may take over
		}
	} else {
		w.Sleep(&c.mu)
	}
	w.Unblock()
	if err != nil {
		c.s.fail(err)
	}
	return err
}
