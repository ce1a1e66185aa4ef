package rpma

import (
	"errors"
	"fmt"
)

// Error is one of librpma's error codes (RPMA_E_*). Its text is
// rpma_err_2str's.
type Error struct {
	code int
	msg  string
}

func (e *Error) Error() string { return e.msg }

// Code returns the RPMA_E_* value.
func (e *Error) Code() int { return e.code }

// Sentinel errors, one per RPMA_E_* code. Errors returned by this package
// match them with errors.Is, and wrap the underlying error (an errno from
// the kernel, usually) where there is one.
var (
	ErrUnknown          = &Error{-100000, "Unknown error"}
	ErrNotSupported     = &Error{-100001, "Not supported"}
	ErrProvider         = &Error{-100002, "Provider error occurred"}
	ErrNoMem            = &Error{-100003, "Out of memory"}
	ErrInval            = &Error{-100004, "Invalid argument"}
	ErrNoCompletion     = &Error{-100005, "No next completion available"}
	ErrNoEvent          = &Error{-100006, "No next event available"}
	ErrAgain            = &Error{-100007, "Temporary error, try again"}
	ErrSharedChannel    = &Error{-100008, "Completion channel is shared"}
	ErrNotSharedChannel = &Error{-100009, "Completion channel is not shared"}
)

var allErrors = []*Error{ErrUnknown, ErrNotSupported, ErrProvider, ErrNoMem, ErrInval, ErrNoCompletion,
	ErrNoEvent, ErrAgain, ErrSharedChannel, ErrNotSharedChannel}

// ErrorString returns rpma_err_2str's text for a code: "Success" for 0,
// "Unknown error" for codes it does not know.
func ErrorString(code int) string {
	if code == 0 {
		return "Success"
	}
	for _, e := range allErrors {
		if e.code == code {
			return e.msg
		}
	}
	return ErrUnknown.msg
}

// Code returns the RPMA_E_* code of err: 0 for nil, the code of the
// sentinel it matches, or RPMA_E_UNKNOWN.
func Code(err error) int {
	if err == nil {
		return 0
	}
	var e *Error
	if errors.As(err, &e) {
		return e.code
	}
	return ErrUnknown.code
}

// wrapped carries a sentinel and the error behind it.
type wrapped struct {
	kind *Error
	err  error
}

func (w *wrapped) Error() string { return w.kind.msg + ": " + w.err.Error() }

// Unwrap returns the sentinel and the cause, so errors.Is matches either
// (and errors.As finds the *Error).
func (w *wrapped) Unwrap() []error { return []error{w.kind, w.err} }

func wrap(kind *Error, err error) error {
	if err == nil {
		return nil
	}
	return &wrapped{kind, err}
}

func provider(err error) error { return wrap(ErrProvider, err) }

func inval(format string, args ...any) error { return wrap(ErrInval, fmt.Errorf(format, args...)) }
