package uverbs

import (
	"errors"

	"golang.org/x/sys/unix"
)

// OpError is the error returned by a failing kernel operation. Op names the
// operation the way the UAPI headers do (for example "CQ.CREATE" for an
// ioctl method or "REG_MR" for a write command); Err is usually a
// unix.Errno, so errors.Is(err, unix.EINVAL) works through it.
type OpError struct {
	Op  string
	Err error
}

func (e *OpError) Error() string { return "uverbs: " + e.Op + ": " + e.Err.Error() }

// Unwrap returns the underlying error.
func (e *OpError) Unwrap() error { return e.Err }

// ErrClosed is returned when an operation is attempted on a closed file
// descriptor or object.
var ErrClosed = errors.New("use of closed uverbs object")

// ErrMissingOutput is returned by Ioctl.Do when the kernel accepted a
// request but did not mark a mandatory output attribute as written
// (UVERBS_ATTR_F_VALID_OUTPUT), so its buffer must not be trusted.
var ErrMissingOutput = errors.New("kernel did not write a mandatory output attribute")

// errnoErr converts a zero errno into nil.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if errno, ok := err.(unix.Errno); ok && errno == 0 {
		return nil
	}
	return &OpError{Op: op, Err: err}
}
