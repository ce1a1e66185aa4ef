package verbs

import (
	"errors"
	"fmt"

	"github.com/goverbs/goverbs/uverbs"
)

var (
	// ErrClosed is returned by every operation on a closed Context or on an
	// object after its Close, and by a wait that a Close ends (on a CQ, a
	// completion channel, the async events, an rdma_cm channel or ID):
	// errors.Is(err, ErrClosed) holds for every closed-object error of
	// goverbs. It is the same value as uverbs.ErrClosed.
	ErrClosed = uverbs.ErrClosed

	// ErrNoDevice is returned when a named RDMA device does not exist.
	ErrNoDevice = errors.New("no such RDMA device")

	// ErrNotUverbs is returned when a path is not a uverbs character device.
	ErrNotUverbs = errors.New("not a uverbs character device")

	// ErrProviderNotSupported is returned when a device's driver has no
	// goverbs provider (the code that knows its queue formats).
	ErrProviderNotSupported = errors.New("provider not supported")

	// ErrBadCompletion is returned by a poll that found a completion entry
	// it could not attribute to a work request (a hardware CQ's entry
	// naming no QP of the context, or of an unknown kind): the entry is
	// consumed, the completions before it are returned with the error.
	ErrBadCompletion = errors.New("the device wrote a completion entry that names no work request")
)

// ProviderError reports a device whose driver goverbs cannot drive.
// errors.Is(err, ErrProviderNotSupported) is true for it.
type ProviderError struct {
	Device string
	Driver Driver
}

func (e *ProviderError) Error() string {
	return fmt.Sprintf("verbs: device %s: driver %s (id %d): %v (goverbs supports: %s)",
		e.Device, e.Driver, uint32(e.Driver), ErrProviderNotSupported, supportedDrivers())
}

// Is makes errors.Is(err, ErrProviderNotSupported) hold.
func (e *ProviderError) Is(target error) bool { return target == ErrProviderNotSupported }
