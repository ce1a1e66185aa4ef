package rdmanl

import (
	"encoding/binary"
	"fmt"

	"github.com/goverbs/goverbs/uverbs"
)

// RawAttr is one attribute of an attribute stream, in order, for nested
// attributes whose entries repeat a type.
type RawAttr struct {
	Type  uint16
	Value []byte
}

// ParseAttrList decodes an attribute stream keeping order and repeats.
func ParseAttrList(b []byte) ([]RawAttr, error) {
	var out []RawAttr
	for len(b) > 0 {
		if len(b) < 4 {
			return nil, fmt.Errorf("rdma netlink: truncated attribute header (%d bytes)", len(b))
		}
		l := int(binary.NativeEndian.Uint16(b))
		t := binary.NativeEndian.Uint16(b[2:]) & 0x3fff
		if l < 4 || l > len(b) {
			return nil, fmt.Errorf("rdma netlink: attribute %d has length %d of %d bytes", t, l, len(b))
		}
		out = append(out, RawAttr{t, b[4:l]})
		pad := min((l+3)&^3, len(b))
		b = b[pad:]
	}
	return out, nil
}

// Resources returns the kernel's count of live objects of each kind on the
// device with index dev ("pd", "cq", "qp", "cm_id", "mr", "ctx", "srq"), as
// "rdma resource show" prints them.
func (c *Conn) Resources(dev uint32) (map[string]uint64, error) {
	var e Encoder
	e.U32(uverbs.RDMA_NLDEV_ATTR_DEV_INDEX, dev)
	msgs, err := c.Execute("RES_GET", uverbs.RDMA_NLDEV_CMD_RES_GET, false, e.Bytes())
	if err != nil {
		return nil, err
	}
	counts := make(map[string]uint64)
	for _, m := range msgs {
		summary, ok := m[uverbs.RDMA_NLDEV_ATTR_RES_SUMMARY]
		if !ok {
			continue
		}
		entries, err := ParseAttrList(summary)
		if err != nil {
			return nil, &Error{Op: "RES_GET", Err: err}
		}
		for _, ent := range entries {
			a, err := ParseAttrs(ent.Value)
			if err != nil {
				return nil, &Error{Op: "RES_GET", Err: err}
			}
			counts[a.String(uverbs.RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_NAME)] = a.U64(uverbs.RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_CURR)
		}
	}
	return counts, nil
}
