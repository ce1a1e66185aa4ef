// Package providertest holds what the providers' tests share: an error
// table whose errors record what a post refused, so a provider's tests
// check its errors without package verbs (which imports the providers).
package providertest

import (
	"fmt"

	"github.com/goverbs/goverbs/internal/provider"
)

// PostError is the error of the tables Errors returns.
type PostError struct {
	Index  int
	Reason provider.Reason
}

// Error says which work request was refused and why.
func (e *PostError) Error() string {
	return fmt.Sprintf("work request %d: reason %d", e.Index, e.Reason)
}

// Errors returns an error table that builds *PostError values.
func Errors() *provider.Errors {
	return provider.NewErrors(func(i int, r provider.Reason) error { return &PostError{i, r} })
}

// Is reports whether err is a *PostError for reason r at work request i
// (any index when i is negative).
func Is(err error, i int, r provider.Reason) bool {
	pe, ok := err.(*PostError) // no errors.As: it allocates, and tests count allocations
	return ok && pe.Reason == r && (i < 0 || pe.Index == i)
}

// SendQueue is a provider.SendQueue without a device: Post runs the
// checker on each work request and counts those it accepted; no doorbell.
type SendQueue struct{ Posts int }

// Post implements provider.SendQueue.
func (s *SendQueue) Post(wrs []provider.SendWR, check provider.Checker) (int, bool, error) {
	for i := range wrs {
		if check == nil {
			s.Posts++
			continue
		}
		if _, err := check.CheckSend(i, &wrs[i]); err != nil {
			return i, false, err
		}
		s.Posts++
	}
	return len(wrs), false, nil
}

// Mark implements provider.SendQueue.
func (s *SendQueue) Mark() uint32 { return uint32(s.Posts) }

// Transmitted implements provider.SendQueue: everything is.
func (s *SendQueue) Transmitted(uint32) bool { return true }

// Reset implements provider.SendQueue.
func (s *SendQueue) Reset() {}

// RecvQueue is a provider.RecvQueue without a device: Post counts.
type RecvQueue struct{ Posts int }

// Post implements provider.RecvQueue.
func (r *RecvQueue) Post(wrs []provider.RecvWR) error { r.Posts += len(wrs); return nil }

// Posted implements provider.RecvQueue.
func (r *RecvQueue) Posted() int { return r.Posts }

// Shut implements provider.RecvQueue.
func (r *RecvQueue) Shut() {}

// CQ is a provider.CQ without a device: it holds WCs to poll.
type CQ struct {
	WCs   []provider.WC
	ready provider.Ready
	one   uint32
}

// Ready implements provider.CQ: the test always says "pending", so every
// Poll reaches the CQ.
func (c *CQ) Ready() *provider.Ready {
	c.one = 1
	c.ready = provider.Ready{Word: &c.one, Mask: 1}
	return &c.ready
}

// Udata implements provider.CQ.
func (c *CQ) Udata() provider.Udata { return provider.Udata{} }

// Start implements provider.CQ.
func (c *CQ) Start(uint32) error { return nil }

// Poll implements provider.CQ: it copies (and keeps) the first WCs.
func (c *CQ) Poll(wc []provider.WC) int { return copy(wc, c.WCs) }

// Queued implements provider.CQ.
func (c *CQ) Queued() int { return len(c.WCs) }

// Pending implements provider.CQ.
func (c *CQ) Pending() bool { return len(c.WCs) > 0 }

// Arm implements provider.CQ: the kernel command is wanted.
func (c *CQ) Arm(bool) bool { return true }

// Event implements provider.CQ.
func (c *CQ) Event() {}

// CanResize implements provider.CQ.
func (c *CQ) CanResize() bool { return false }

// Resize implements provider.CQ.
func (c *CQ) Resize(int, func(provider.Udata) error) error { return nil }

// Release implements provider.CQ.
func (c *CQ) Release() error { return nil }

var (
	_ provider.SendQueue = (*SendQueue)(nil)
	_ provider.RecvQueue = (*RecvQueue)(nil)
	_ provider.CQ        = (*CQ)(nil)
)
