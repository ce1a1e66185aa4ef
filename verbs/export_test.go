package verbs

import "golang.org/x/sys/unix"

// DevicesFromSysfs exposes the sysfs fallback to the tests.
var DevicesFromSysfs = devicesFromSysfs

// InitAHFromWCTable is Context.InitAHFromWC over a given GID table.
func InitAHFromWCTable(port int, wc *WorkCompletion, grh []byte, table []GIDEntry) (AHAttr, error) {
	r, err := routeFromWC(port, wc, grh)
	if err != nil || !r.attr.IsGlobal {
		return r.attr, err
	}
	idx, ok := r.sgidIndex(table)
	if !ok {
		return AHAttr{}, unix.ENOENT
	}
	r.attr.GRH.SGIDIndex = uint8(idx)
	return r.attr, nil
}
