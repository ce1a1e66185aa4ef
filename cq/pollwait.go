package cq

import (
	"context"
	"errors"
	"runtime"
	"time"

	"github.com/goverbs/goverbs/verbs"
)

// PollWait is Poll that waits: it moves up to len(wc) completions into wc,
// oldest first, waiting until there is at least one, and returns how many.
// It fails only with ctx's error, verbs.ErrClosed or an error of Wait; the
// completions themselves may have failed (WorkCompletion.Err).
//
// How it waits depends on the CQ: one bound to a completion channel
// (Options.Channel) sleeps in Wait, parked on Go's netpoller until the
// device signals, and the rule of Wait holds (one waiting goroutine per
// channel). One without a channel is polled, yielding the processor
// between polls and, once a wait has lasted a while, sleeping between
// them, up to 1 ms: low latency at the price of a busy CPU for short
// waits, a millisecond of latency for long ones. Bind a channel to wait
// without spending CPU.
func (c *CQ) PollWait(ctx context.Context, wc []verbs.WorkCompletion) (int, error) {
	ch := c.Channel()
	for spins := 0; ; spins++ {
		n, err := c.Poll(wc)
		if n > 0 || err != nil {
			return n, err
		}
		if len(wc) == 0 {
			return 0, errEmptyPoll
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if ch != nil {
			if err := c.Wait(ctx); err != nil {
				return 0, err
			}
			continue
		}
		pause(spins)
	}
}

// Next returns the next completion, waiting for it as PollWait does. Its
// error is the wait's (ctx's, verbs.ErrClosed), or for a completion that
// failed, the completion's own (a *verbs.WCError from
// WorkCompletion.Err), returned together with the completion: one check
// covers both.
func (c *CQ) Next(ctx context.Context) (verbs.WorkCompletion, error) {
	var wc [1]verbs.WorkCompletion
	if _, err := c.PollWait(ctx, wc[:]); err != nil {
		return verbs.WorkCompletion{}, err
	}
	return wc[0], wc[0].Err()
}

// errEmptyPoll is PollWait's error for a slice with no room.
var errEmptyPoll = errors.New("cq: PollWait into an empty slice")

// spinPolls is how many polls a channel-less PollWait makes, yielding in
// between, before it starts to sleep; maxPause bounds the sleep.
const (
	spinPolls = 1000
	maxPause  = time.Millisecond
)

// pause waits between two polls of a CQ without a channel: a yield for the
// first spinPolls, then sleeps that double from 1 µs up to maxPause.
func pause(spins int) {
	if spins < spinPolls {
		runtime.Gosched()
		return
	}
	d := time.Microsecond << min(spins-spinPolls, 10)
	time.Sleep(min(d, maxPause))
}
