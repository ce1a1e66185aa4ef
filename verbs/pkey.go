package verbs

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"

	"golang.org/x/sys/unix"
)

// DefaultPKey is the full-membership default partition key, the one entry
// of a RoCE port's P_Key table.
const DefaultPKey uint16 = 0xffff

// QueryPKey returns entry index of port's P_Key table, in host byte order
// (ibv_query_pkey returns it in network order). Like libibverbs it reads
// sysfs (ports/<port>/pkeys/<index>): the kernel has no uverbs command for
// it. iWARP ports have no P_Key table (their P_Key table length is 0): the
// call fails with ErrNotCapable there. An index past the table's end fails
// with an error wrapping unix.EINVAL.
func (c *Context) QueryPKey(port, index int) (uint16, error) {
	pa, err := c.QueryPort(port)
	if err != nil {
		return 0, fmt.Errorf("verbs: query P_Key: %w", err)
	}
	if pa.PkeyTblLen == 0 {
		return 0, fmt.Errorf("verbs: query P_Key: port %d has a P_Key table of length 0: %w", port, ErrNotCapable)
	}
	if index < 0 || index >= int(pa.PkeyTblLen) {
		return 0, fmt.Errorf("verbs: query P_Key: index %d of a %d-entry table: %w", index, pa.PkeyTblLen, unix.EINVAL)
	}
	return c.readPKey(port, index)
}

func (c *Context) readPKey(port, index int) (uint16, error) {
	s, err := readSysfs("class/infiniband", c.dev.Name, "ports", strconv.Itoa(port), "pkeys", strconv.Itoa(index))
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return 0, fmt.Errorf("verbs: query P_Key port %d index %d: %w", port, index, err)
	}
	v, err := strconv.ParseUint(s, 0, 16)
	if err != nil {
		return 0, fmt.Errorf("verbs: query P_Key port %d index %d: sysfs says %q: %w", port, index, s, unix.EINVAL)
	}
	return uint16(v), nil
}

// PKeyIndex returns the lowest index of port's P_Key table that holds pkey
// (host byte order): ibv_get_pkey_index. A P_Key not in the table fails with
// an error wrapping unix.ENOENT; iWARP ports, without a table, with
// ErrNotCapable.
func (c *Context) PKeyIndex(port int, pkey uint16) (int, error) {
	pa, err := c.QueryPort(port)
	if err != nil {
		return 0, fmt.Errorf("verbs: P_Key index: %w", err)
	}
	if pa.PkeyTblLen == 0 {
		return 0, fmt.Errorf("verbs: P_Key index: port %d has a P_Key table of length 0: %w", port, ErrNotCapable)
	}
	for i := 0; i < int(pa.PkeyTblLen); i++ {
		v, err := c.readPKey(port, i)
		if err != nil {
			return 0, err
		}
		if v == pkey {
			return i, nil
		}
	}
	return 0, fmt.Errorf("verbs: P_Key %#04x not in port %d's table: %w", pkey, port, unix.ENOENT)
}
