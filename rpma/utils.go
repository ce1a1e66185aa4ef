package rpma

import (
	"context"
	"errors"
	"net/netip"
	"time"

	"github.com/goverbs/goverbs/cm"
	"github.com/goverbs/goverbs/verbs"
)

// IBVContextType says how GetIBVContext finds a device (enum
// rpma_util_ibv_context_type).
type IBVContextType int

// Device lookup types.
const (
	IBVContextLocal  IBVContextType = 0 // the device holding a local address
	IBVContextRemote IBVContextType = 1 // the device that reaches a remote address
)

// GetIBVContext opens the device of a local address, or of the route to a
// remote one (rpma_utils_get_ibv_context). The caller owns the returned
// context: close it after the peer built on it.
func GetIBVContext(ctx context.Context, addr string, typ IBVContextType) (*verbs.Context, error) {
	if typ != IBVContextLocal && typ != IBVContextRemote {
		return nil, ErrInval
	}
	ap, err := parseAddr(addr, "0")
	if err != nil {
		return nil, err
	}
	ch, err := cm.NewChannel()
	if err != nil {
		return nil, provider(err)
	}
	defer ch.Close()
	id, err := ch.CreateID(cm.TCP)
	if err != nil {
		return nil, provider(err)
	}
	if typ == IBVContextLocal {
		err = id.Bind(ap)
	} else {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		err = id.ResolveAddr(rctx, netip.AddrPort{}, ap)
		cancel()
	}
	if err != nil {
		return nil, provider(err)
	}
	info, err := id.Query()
	if err != nil {
		return nil, provider(err)
	}
	devs, err := verbs.Devices()
	if err != nil {
		return nil, provider(err)
	}
	for _, d := range devs {
		if d.IndexKnown && d.Index == info.DeviceIndex {
			c, err := verbs.OpenDevice(d)
			return c, provider(err)
		}
	}
	return nil, provider(errors.New("rpma: no device for " + addr))
}

// IBVContextIsODPCapable reports whether the device supports on-demand
// paging for RC reads and writes (rpma_utils_ibv_context_is_odp_capable).
// rxe does not.
func IBVContextIsODPCapable(c *verbs.Context) (bool, error) {
	if c == nil {
		return false, ErrInval
	}
	a, err := c.QueryDevice()
	if err != nil {
		return false, provider(err)
	}
	const odpSupport, odpWrite, odpRead = 1 << 0, 1 << 2, 1 << 3
	return a.ODPGeneralCaps&odpSupport != 0 && a.RCODPCaps&odpWrite != 0 && a.RCODPCaps&odpRead != 0, nil
}
