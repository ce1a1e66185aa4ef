package verbs

import (
	"fmt"
	"sort"
	"strings"
)

// providerInfo is what verbs itself needs to know about a provider. The
// data path of each provider (queue formats, doorbells) lives in its own
// package under internal/provider; this table only says which drivers have
// one and how they report firmware versions.
type providerInfo struct {
	// fwVersion formats the 64-bit fw_ver of QUERY_DEVICE the way the
	// provider's rdma-core counterpart does.
	fwVersion func(raw uint64) string
}

var providers = map[Driver]providerInfo{
	// rdma-core's librxe prints the three 16-bit fields major.minor.sub.
	DriverRXE: {fwVersion: func(raw uint64) string {
		return fmt.Sprintf("%d.%d.%d", (raw>>32)&0xffff, (raw>>16)&0xffff, raw&0xffff)
	}},
}

// Supported reports whether goverbs has a provider for driver d.
func (d Driver) Supported() bool { _, ok := providers[d]; return ok }

func supportedDrivers() string {
	var names []string
	for d := range providers {
		names = append(names, d.String())
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
