package mr

import (
	"fmt"
	"math"

	"github.com/goverbs/goverbs/verbs"
)

// SGE returns the scatter/gather element for n bytes at offset off of the
// region, for the SGList of a local work request: its address in the
// region's IOVA space and the region's local key. It panics, as slicing
// does, if off and n do not lie inside the region or n is more than an
// SGE can carry (4 GiB - 1 bytes).
func (m *MR) SGE(off, n int) verbs.SGE {
	if off < 0 || n < 0 || off > m.size || n > m.size-off || uint64(n) > math.MaxUint32 {
		panic(fmt.Sprintf("mr: SGE(%d, %d) outside a region of %d bytes", off, n, m.size))
	}
	return verbs.SGE{Addr: m.iova + uint64(off), Length: uint32(n), LKey: m.lkey}
}

// RemoteRegion is what a peer needs to reach part of a memory region with
// RDMA and atomic work requests: the address of its first byte in the
// region's IOVA space, the region's remote key and the length that
// follows. Send it to the peer, which sets SendWR.RemoteAddr and
// SendWR.RKey from it. The region must have been registered with the
// remote access the peer is to use (RemoteWrite, RemoteRead,
// RemoteAtomic).
type RemoteRegion struct {
	Addr uint64
	RKey uint32
	Len  uint64
}

// Remote returns the RemoteRegion from offset off to the end of the
// region. It panics, as slicing does, if off is outside the region.
func (m *MR) Remote(off int) RemoteRegion {
	if off < 0 || off > m.size {
		panic(fmt.Sprintf("mr: Remote(%d) outside a region of %d bytes", off, m.size))
	}
	return RemoteRegion{Addr: m.iova + uint64(off), RKey: m.rkey, Len: uint64(m.size - off)}
}
