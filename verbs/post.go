package verbs

import (
	"errors"
	"strconv"

	"golang.org/x/sys/unix"
)

// Errors of posting work requests. Each is reported inside a *PostError
// that says which work request of the list failed; the ones before it were
// posted.
var (
	// ErrQueueFull: the work queue has no free slot (errors.Is also
	// matches unix.ENOMEM, what libibverbs returns).
	ErrQueueFull = &errnoError{"work queue full", unix.ENOMEM}
	// ErrTooManySGE: more scatter/gather elements than the queue allows.
	ErrTooManySGE = &errnoError{"too many scatter/gather elements", unix.EINVAL}
	// ErrInlineTooLarge: inline data beyond the QP's max inline size.
	ErrInlineTooLarge = &errnoError{"inline data too large", unix.EINVAL}
	// ErrBadOpcode: an opcode the QP type or provider does not support.
	ErrBadOpcode = &errnoError{"opcode not supported on this QP", unix.EINVAL}
	// ErrBadAtomic: an atomic with an unaligned remote address or a local
	// buffer other than 8 bytes.
	ErrBadAtomic = &errnoError{"atomic needs an 8-byte aligned remote address and an 8-byte local buffer", unix.EINVAL}
	// ErrBadAH: a UD send without a valid address handle of the QP's PD.
	ErrBadAH = &errnoError{"UD send needs an open address handle in the QP's PD", unix.EINVAL}
	// ErrQPState: the QP is not in a state that allows the operation.
	ErrQPState = &errnoError{"QP state does not allow this", unix.EINVAL}
)

// errnoError is a sentinel that also matches an errno.
type errnoError struct {
	msg   string
	errno unix.Errno
}

func (e *errnoError) Error() string { return e.msg }

// Is makes errors.Is(err, unix.ENOMEM) hold for ErrQueueFull, and so on.
func (e *errnoError) Is(target error) bool { return target == e.errno }

// PostError reports the first work request of a list that could not be
// posted.
type PostError struct {
	Op    string // "post send", "post recv", "post SRQ recv"
	Index int    // index of the failing work request
	Err   error
}

func (e *PostError) Error() string {
	return e.Op + ": work request " + strconv.Itoa(e.Index) + ": " + e.Err.Error()
}

// Unwrap returns the reason.
func (e *PostError) Unwrap() error { return e.Err }

// IsPostError reports whether err is a *PostError and returns it.
func IsPostError(err error) (*PostError, bool) {
	var pe *PostError
	ok := errors.As(err, &pe)
	return pe, ok
}
