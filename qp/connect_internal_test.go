package qp

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The zero ConnectOptions give the documented defaults, none of them a
// wait forever (timeout code 0) and none a silent zero count.
func TestConnectDefaults(t *testing.T) {
	var a connectAttrs
	if err := (&ConnectOptions{}).rcAttrs(&a); err != nil {
		t.Fatal(err)
	}
	want := connectAttrs{rts: RTSAttr{Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRDAtomic: 1}, rtr: RTRAttr{MinRNRTimer: 12, MaxDestRDAtomic: 1}}
	if a != want {
		t.Errorf("defaults %+v, want %+v", a, want)
	}
	if got := AckTimeoutDelay(a.rts.Timeout); got != DefaultAckTimeout || got.Round(time.Millisecond) != 67*time.Millisecond {
		t.Errorf("default ACK timeout %v, want %v ≈ 67 ms", got, DefaultAckTimeout)
	}
	if got := RNRTimerDelay(a.rtr.MinRNRTimer); got != DefaultMinRNRTimer {
		t.Errorf("default RNR timer %v, want 0.64 ms", got)
	}

	// The named values and the negative ones.
	o := ConnectOptions{AckTimeout: NoAckTimeout, RetryCount: -1, RNRRetryCount: -1, MinRNRTimer: 655360 * time.Microsecond,
		MaxRDAtomic: 16, MaxDestRDAtomic: 8}
	if err := o.rcAttrs(&a); err != nil {
		t.Fatal(err)
	}
	want = connectAttrs{rts: RTSAttr{Timeout: 0, RetryCnt: 0, RNRRetry: 0, MaxRDAtomic: 16}, rtr: RTRAttr{MinRNRTimer: 0, MaxDestRDAtomic: 8}}
	if a != want {
		t.Errorf("explicit %+v, want %+v", a, want)
	}

	// Out of range is refused, not truncated.
	for _, bad := range []ConnectOptions{
		{AckTimeout: -2}, {AckTimeout: 3 * time.Hour}, {RetryCount: 8}, {RNRRetryCount: 8},
		{MinRNRTimer: -time.Millisecond}, {MinRNRTimer: time.Second}, {MaxRDAtomic: 256}, {MaxDestRDAtomic: 300},
	} {
		if err := bad.rcAttrs(&a); !errors.Is(err, unix.EINVAL) {
			t.Errorf("%+v: %v, want EINVAL", bad, err)
		}
	}
}

// The timer encodings round up to the next value of the IB tables.
func TestTimerCodes(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		code uint8
	}{
		{0, 1}, {8 * time.Microsecond, 1}, {9 * time.Microsecond, 2}, {67 * time.Millisecond, 14},
		{68 * time.Millisecond, 15}, {time.Second, 18}, {3 * time.Hour, 31},
	} {
		if got := AckTimeoutCode(tc.d); got != tc.code {
			t.Errorf("AckTimeoutCode(%v) = %d, want %d", tc.d, got, tc.code)
		}
	}
	if AckTimeoutDelay(0) != 0 || AckTimeoutDelay(1) != 8192*time.Nanosecond || AckTimeoutDelay(31) != AckTimeoutDelay(40) {
		t.Error("AckTimeoutDelay")
	}
	for _, tc := range []struct {
		d    time.Duration
		code uint8
	}{
		{0, 1}, {10 * time.Microsecond, 1}, {11 * time.Microsecond, 2}, {640 * time.Microsecond, 12},
		{641 * time.Microsecond, 13}, {2 * time.Millisecond, 16}, {491520 * time.Microsecond, 31},
		{500 * time.Millisecond, 0}, {time.Hour, 0},
	} {
		if got := RNRTimerCode(tc.d); got != tc.code {
			t.Errorf("RNRTimerCode(%v) = %d, want %d", tc.d, got, tc.code)
		}
	}
	for code := range uint8(32) {
		if got := RNRTimerCode(RNRTimerDelay(code)); got != code {
			t.Errorf("RNRTimerCode(RNRTimerDelay(%d)) = %d", code, got)
		}
	}
	if RNRTimerDelay(0) != 655360*time.Microsecond || RNRTimerDelay(32) != RNRTimerDelay(0) {
		t.Error("RNRTimerDelay")
	}
}
