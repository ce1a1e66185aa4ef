package verbs

import (
	"github.com/goverbs/goverbs/internal/kobj"
	"github.com/goverbs/goverbs/internal/provider"
)

// The plumbing the object packages (cq, qp, srq, mr, rpma) need and
// applications must not reach: see package internal/kobj.
func init() {
	kobj.ContextOf = func(c any) *kobj.Context { return &c.(*Context).k }
	kobj.ChannelOf = func(ch any) *kobj.Channel { return &ch.(*CompChannel).k }
	kobj.CheckPD = func(pd any) error { return pd.(*PD).check() }
	kobj.AH = func(ah any) (provider.AH, error) { return ah.(*AH).providerAH() }
	kobj.PostErrors = postErrors
}

// postErrors returns the error table of the post operation op: its
// errors are *PostError values wrapping the sentinel of each reason.
func postErrors(op string) *provider.Errors {
	return provider.NewErrors(func(i int, r provider.Reason) error {
		return &PostError{Op: op, Index: i, Err: reasonErrors[r]}
	})
}

// reasonErrors are the sentinels of the providers' reasons for refusing a
// work request.
var reasonErrors = [...]error{
	provider.ReasonClosed:         ErrClosed,
	provider.ReasonState:          ErrQPState,
	provider.ReasonFull:           ErrQueueFull,
	provider.ReasonTooManySGE:     ErrTooManySGE,
	provider.ReasonInlineTooLarge: ErrInlineTooLarge,
	provider.ReasonBadOpcode:      ErrBadOpcode,
	provider.ReasonNotCapable:     ErrNotCapable,
}
