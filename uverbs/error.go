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

// Is makes errors.Is(err, ErrNotCapable) hold for an operation the kernel
// refused with EOPNOTSUPP: the kernel driver has no such command or no
// such kind of object (vmw_pvrdma's CREATE_AH and UC QPs, REREG_MR on
// rxe and siw). Deciding it here keeps the object packages from each
// testing the errno by hand.
func (e *OpError) Is(target error) bool {
	return target == ErrNotCapable && errors.Is(e.Err, unix.EOPNOTSUPP)
}

// ErrNotCapable is what an operation fails with when the device or its
// kernel driver lacks what it needs: a capability the device does not
// report, checked before anything reaches the kernel, or a command the
// kernel refused with EOPNOTSUPP. errors.Is(ErrNotCapable,
// unix.EOPNOTSUPP) holds. verbs.ErrNotCapable is this value.
var ErrNotCapable error = &errnoSentinel{"the device does not report the capability", unix.EOPNOTSUPP}

// errnoSentinel is a sentinel error that errors.Is also matches to its
// errno.
type errnoSentinel struct {
	msg   string
	errno unix.Errno
}

func (e *errnoSentinel) Error() string { return e.msg }

func (e *errnoSentinel) Is(target error) bool { return target == e.errno }

// ErrClosed is returned when an operation is attempted on a closed file
// descriptor or object.
var ErrClosed = errors.New("use of closed uverbs object")

// ErrForeignCredentials wraps the EACCES the kernel answers a write(2)
// command (the POST_SEND doorbell among them) with when the calling OS
// thread's credentials are not those the device file was opened with:
// uverbs refuses writes from a thread that changed its credentials
// (setuid, setgroups, capset) since, as it cannot trust such a thread.
// Change credentials only on threads that never post, or for the whole
// process before opening devices.
var ErrForeignCredentials = errors.New("the calling thread's credentials differ from the opener's")

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
