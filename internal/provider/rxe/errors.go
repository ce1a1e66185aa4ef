package rxe

import (
	"sync/atomic"

	"github.com/goverbs/goverbs/verbs"
)

// fullCached is how many queue-full indices an Errors table keeps. A list
// can only fill a queue after as many work requests as the queue holds,
// and lists longer than this are rare.
const fullCached = 1024

// Errors hands out the *verbs.PostError values of one post operation
// (say "qp: post send") without allocating on the paths a caller retries
// or hits in a loop: a full queue, a closed ring, a QP in the wrong state.
// The values are shared and must not be modified: each is built once (the
// queue-full error of index i the first time a post stops at i) and then
// returned to every caller that fails the same way. Other errors (bad
// input: a programming error, not retried) are allocated per call.
type Errors struct {
	op     string
	closed *verbs.PostError
	state  *verbs.PostError
	full   [fullCached]atomic.Pointer[verbs.PostError]
}

// NewErrors returns the error table of the operation op.
func NewErrors(op string) *Errors {
	return &Errors{
		op:     op,
		closed: &verbs.PostError{Op: op, Err: verbs.ErrClosed},
		state:  &verbs.PostError{Op: op, Err: verbs.ErrQPState},
	}
}

// Closed is the error of a post to a closed queue.
func (e *Errors) Closed() error { return e.closed }

// State is the error of a post in a QP state that does not allow it.
func (e *Errors) State() error { return e.state }

// Full is the error of a post that found the queue full at work request i:
// the i before it were posted.
func (e *Errors) Full(i int) error {
	if uint(i) >= fullCached {
		return &verbs.PostError{Op: e.op, Index: i, Err: verbs.ErrQueueFull}
	}
	if pe := e.full[i].Load(); pe != nil {
		return pe
	}
	pe := &verbs.PostError{Op: e.op, Index: i, Err: verbs.ErrQueueFull}
	if !e.full[i].CompareAndSwap(nil, pe) {
		pe = e.full[i].Load()
	}
	return pe
}

// At is the error err of work request i (allocated: bad input).
func (e *Errors) At(i int, err error) error {
	return &verbs.PostError{Op: e.op, Index: i, Err: err}
}
