// Package registry lists goverbs' providers: verbs.Open looks the device's
// driver id up here and opens the provider's context (see package
// internal/provider). Adding a provider is its folder below
// internal/provider and one line in the list below; nothing registers
// itself.
package registry

import (
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/provider/mlx5"
	"github.com/goverbs/goverbs/internal/provider/pvrdma"
	"github.com/goverbs/goverbs/internal/provider/rxe"
	"github.com/goverbs/goverbs/internal/provider/siw"
)

// providers are the providers goverbs has, one per driver.
var providers = []provider.Provider{
	rxe.Provider,
	siw.Provider,
	pvrdma.Provider,
	mlx5.Provider,
}

// Lookup returns the provider of the driver with id driver (enum
// rdma_driver_id).
func Lookup(driver uint32) (provider.Provider, bool) {
	for _, p := range providers {
		if p.Driver == driver {
			return p, true
		}
	}
	return provider.Provider{}, false
}

// Drivers returns the driver ids goverbs has a provider for, in the
// list's order.
func Drivers() []uint32 {
	ids := make([]uint32, len(providers))
	for i, p := range providers {
		ids[i] = p.Driver
	}
	return ids
}
