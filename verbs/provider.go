package verbs

import (
	"fmt"
	"sort"
	"strings"
	"unsafe"

	"github.com/goverbs/goverbs/uverbs"
)

// providerInfo is what verbs itself needs to know about a provider. The
// data path of each provider (queue formats, doorbells) lives in its own
// package (internal/rxe, internal/siw), which the object packages (cq, qp,
// srq) pick at creation from the device's driver id; this table only says
// which drivers have one and how they report firmware versions. See
// docs/providers.md.
type providerInfo struct {
	// fwVersion formats the 64-bit fw_ver of QUERY_DEVICE the way the
	// provider's rdma-core counterpart does.
	fwVersion func(raw uint64) string
	// contextResp is the size of the provider's GET_CONTEXT response
	// (UHW_OUT); 0 when it has none.
	contextResp uintptr
}

var providers = map[Driver]providerInfo{
	// rdma-core's librxe and libsiw both print the three 16-bit fields
	// major.minor.sub.
	DriverRXE: {fwVersion: fwVersion3},
	// siw refuses a context without room for struct siw_uresp_alloc_ctx.
	DriverSIW: {fwVersion: fwVersion3, contextResp: unsafe.Sizeof(uverbs.SiwUrespAllocCtx{})},
}

func fwVersion3(raw uint64) string {
	return fmt.Sprintf("%d.%d.%d", (raw>>32)&0xffff, (raw>>16)&0xffff, raw&0xffff)
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
