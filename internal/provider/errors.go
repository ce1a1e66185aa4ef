package provider

import "sync/atomic"

// Reason says why a post refused a work request; the generic code turns
// it into verbs' sentinel error.
type Reason uint8

// Reasons.
const (
	ReasonClosed         Reason = iota + 1 // the queue is closed (verbs.ErrClosed)
	ReasonState                            // the QP's state does not allow the post (verbs.ErrQPState)
	ReasonFull                             // no free slot (verbs.ErrQueueFull)
	ReasonTooManySGE                       // verbs.ErrTooManySGE
	ReasonInlineTooLarge                   // verbs.ErrInlineTooLarge
	ReasonBadOpcode                        // verbs.ErrBadOpcode
	ReasonNotCapable                       // the provider cannot carry the operation (verbs.ErrNotCapable)
)

// fullCached is how many queue-full indices an Errors table keeps. A list
// can only fill a queue after as many work requests as the queue holds,
// and lists longer than this are rare.
const fullCached = 1024

// Errors hands out the errors of one post operation (say "qp: post
// send") without allocating on the paths a caller retries or hits in a
// loop: a full queue, a closed queue, a QP in the wrong state. Those
// values are shared and must not be modified: each is built once (the
// queue-full error of index i the first time a post stops at i) and then
// returned to every caller that fails the same way. Other errors (bad
// input: a programming error, not retried) are built per call.
//
// The generic code makes the table (kobj.PostErrors); a provider only
// calls its methods.
type Errors struct {
	mk     func(index int, r Reason) error
	closed error
	state  error
	full   [fullCached]atomic.Pointer[shared]
}

type shared struct{ err error }

// NewErrors returns the error table whose errors mk builds: the error of
// the index-th work request of a list, refused for reason r.
func NewErrors(mk func(index int, r Reason) error) *Errors {
	return &Errors{mk: mk, closed: mk(0, ReasonClosed), state: mk(0, ReasonState)}
}

// Closed is the error of a post to a closed queue.
func (e *Errors) Closed() error { return e.closed }

// State is the error of a post in a QP state that does not allow it.
func (e *Errors) State() error { return e.state }

// Full is the error of a post that found the queue full at work request i:
// the i before it were posted.
func (e *Errors) Full(i int) error {
	if uint(i) >= fullCached {
		return e.mk(i, ReasonFull)
	}
	if s := e.full[i].Load(); s != nil {
		return s.err
	}
	s := &shared{e.mk(i, ReasonFull)}
	if !e.full[i].CompareAndSwap(nil, s) {
		s = e.full[i].Load()
	}
	return s.err
}

// At is the error of work request i, refused for reason r (built per
// call: bad input).
func (e *Errors) At(i int, r Reason) error { return e.mk(i, r) }
