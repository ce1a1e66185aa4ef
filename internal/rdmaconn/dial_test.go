package rdmaconn

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/goverbs/goverbs/cm"
)

// A failed connect carries the errno a socket's connect sets (ucma_complete):
// ECONNREFUSED for a rejection, the event's negative status otherwise,
// with the event still there for errors.As.
func TestConnectErrno(t *testing.T) {
	for _, tc := range []struct {
		name string
		ee   *cm.EventError
		want error
	}{
		{"siw-connect-error", &cm.EventError{Event: cm.EventConnectError, Status: -int(syscall.EINVAL)}, syscall.EINVAL},
		{"unreachable", &cm.EventError{Event: cm.EventUnreachable, Status: -int(syscall.ETIMEDOUT)}, syscall.ETIMEDOUT},
		{"rejected-ib", &cm.EventError{Event: cm.EventRejected, Status: 28}, syscall.ECONNREFUSED},
		{"rejected-iwarp", &cm.EventError{Event: cm.EventRejected, Status: -int(syscall.ECONNRESET)}, syscall.ECONNREFUSED},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ConnectErrno(fmt.Errorf("cm: connect: %w", tc.ee))
			if !errors.Is(err, tc.want) {
				t.Errorf("%v: not %v", err, tc.want)
			}
			var ee *cm.EventError
			if !errors.As(err, &ee) || ee != tc.ee {
				t.Errorf("%v: the event is gone", err)
			}
		})
	}
	plain := errors.New("cm: connect: something else")
	if err := ConnectErrno(plain); err != plain {
		t.Errorf("an error without an event became %v", err)
	}
	zero := fmt.Errorf("cm: connect: %w", &cm.EventError{Event: cm.EventConnectError})
	if err := ConnectErrno(zero); err != zero {
		t.Errorf("an event with status 0 became %v", err)
	}
}
