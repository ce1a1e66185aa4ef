package verbs

import (
	"sort"
	"strings"

	"github.com/goverbs/goverbs/internal/provider/registry"
)

// Which drivers goverbs has a provider for, and each provider's code, is
// the registry's (internal/provider/registry). Open takes the device's
// provider from it by driver id and keeps the provider's context (its ops
// table) with the Context, where the object packages call through it; see
// package internal/provider and docs/providers.md.

// Supported reports whether goverbs has a provider for driver d.
func (d Driver) Supported() bool { _, ok := registry.Lookup(uint32(d)); return ok }

func supportedDrivers() string {
	var names []string
	for _, d := range registry.Drivers() {
		names = append(names, Driver(d).String())
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
