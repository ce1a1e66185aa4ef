package uverbs

import (
	"errors"
	"fmt"
	"testing"

	"golang.org/x/sys/unix"
)

// A command the kernel refused with EOPNOTSUPP matches ErrNotCapable,
// however deeply wrapped; other errnos do not, and ErrNotCapable itself
// still matches EOPNOTSUPP.
func TestOpErrorNotCapable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&OpError{Op: "CREATE_AH", Err: unix.EOPNOTSUPP}, true},
		{fmt.Errorf("qp: create UC QP: %w", &OpError{Op: "QP.CREATE", Err: unix.EOPNOTSUPP}), true},
		{&OpError{Op: "CREATE_AH", Err: unix.EINVAL}, false},
		{&OpError{Op: "CREATE_AH", Err: ErrClosed}, false},
		{unix.EOPNOTSUPP, false},
	} {
		if got := errors.Is(tc.err, ErrNotCapable); got != tc.want {
			t.Errorf("errors.Is(%v, ErrNotCapable) = %v, want %v", tc.err, got, tc.want)
		}
	}
	if !errors.Is(ErrNotCapable, unix.EOPNOTSUPP) {
		t.Error("ErrNotCapable does not match EOPNOTSUPP")
	}
	if err := (&OpError{Op: "CREATE_AH", Err: unix.EOPNOTSUPP}); !errors.Is(err, unix.EOPNOTSUPP) {
		t.Errorf("%v does not match EOPNOTSUPP", err)
	}
}
