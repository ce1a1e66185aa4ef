package verbs

import "github.com/goverbs/goverbs/internal/kobj"

// The plumbing the object packages (cq, qp, srq, mr, rpma) need and
// applications must not reach: see package internal/kobj.
func init() {
	kobj.ContextOf = func(c any) *kobj.Context { return &c.(*Context).k }
	kobj.ChannelOf = func(ch any) *kobj.Channel { return &ch.(*CompChannel).k }
	kobj.CheckPD = func(pd any) error { return pd.(*PD).check() }
	kobj.AHNum = func(ah any) (uint32, error) { return ah.(*AH).providerNum() }
}
