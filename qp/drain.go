package qp

import (
	"context"
	"fmt"
	"time"

	"github.com/goverbs/goverbs/verbs"
)

// WaitSent waits until the provider has transmitted every send work
// request posted on the QP so far: sent all its packets (an RC request
// may still wait for its acknowledgement), or retired it. It returns
// ctx's error if that takes longer than ctx allows, and at once when the
// QP is not in RTS or SQD (nothing more will be sent).
//
// Call it before moving a QP to ERR when the last requests must reach
// the peer, as a disconnect does: rxe on Linux 6.1 sends in the doorbell
// (PostSend returns after the packets left), later kernels (6.12) only
// schedule the sender there, and a QP moved to ERR before the sender ran
// flushes what it had not sent yet (WR_FLUSH_ERR) instead of sending it.
// The kernel gives no notification for this, so WaitSent checks the send
// queue, yielding and then backing off (up to 1 ms) between checks.
func (q *QP) WaitSent(ctx context.Context) error {
	if !q.sqLock.Lock() {
		return fmt.Errorf("qp: wait sent: %w", verbs.ErrClosed)
	}
	p := q.sq.Mark()
	q.sqLock.Unlock()
	backoff := time.Duration(0)
	for {
		switch State(q.postState.Load()) {
		case RTS, SQD:
		default:
			return nil
		}
		if !q.sqLock.Lock() {
			return fmt.Errorf("qp: wait sent: %w", verbs.ErrClosed)
		}
		done := q.sq.Transmitted(p)
		q.sqLock.Unlock()
		if done {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("qp: wait sent: %w", err)
		}
		if backoff == 0 {
			backoff = time.Microsecond
		} else {
			backoff = min(2*backoff, time.Millisecond)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("qp: wait sent: %w", ctx.Err())
		case <-t.C:
		}
	}
}
