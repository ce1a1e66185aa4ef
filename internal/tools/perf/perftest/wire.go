// Package perftest speaks the out-of-band exchange of linux-rdma's perftest
// tools (ib_write_bw, ib_read_lat, ...) as of perftest 6.06 (Debian 12's
// perftest 4.5+0.17), so that goverbs perf and the C tools can be either
// end of one test.
//
// The exchange is one TCP connection (port 18515 by default) on which the
// client always writes first and the server always reads first: the
// version strings, the cycle buffer and cache line sizes, the MTU, one
// fixed-size address message per QP ("LID:OUT:QPN:PSN:RKEY:VADDR[:GID]:SRQN"
// in hex) several times over as handshakes, the bandwidth reports and a
// final "done". This package holds the formats and the steps; which steps
// a test takes, and when, is the caller's (it follows the C mains).
package perftest

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Version is the perftest version goverbs perf speaks and announces.
const Version = "6.06"

// MinPeerVersion is the oldest peer perftest 6.06 accepts
// (check_version_compatibility).
const MinPeerVersion = 5.70

// DefaultPort is perftest's TCP port.
const DefaultPort = 18515

// Sizes of the messages.
const (
	VersionSize = 16  // char version[MAX_VERSION]
	DestSize    = 59  // KEY_MSG_SIZE: an address without GID (IB, no -x)
	DestSizeGID = 108 // KEY_MSG_SIZE_GID: an address with GID
	mtuSize     = 2   // sizeof(char[2]) for peers from 5.31 on
)

// Done is what each side writes last, with its NUL (ctx_close_connection).
const Done = "done\x00"

// ErrFormat reports a peer message that does not parse.
var ErrFormat = errors.New("perftest: malformed message from peer")

// ErrVersion reports a peer older than MinPeerVersion.
var ErrVersion = errors.New("perftest: peer version not supported")

// Dest is one QP's address as the tools exchange it (struct pingpong_dest).
type Dest struct {
	LID      uint32
	OutReads uint32 // RDMA reads the sender lets the peer have outstanding
	QPN      uint32
	PSN      uint32
	RKey     uint32
	VAddr    uint64 // where the peer may write or read in our buffer
	GID      [16]byte
	SRQN     uint32
}

// MarshalDest formats d as perftest's KEY_PRINT_FMT (withGID false) or
// KEY_PRINT_FMT_GID, NUL-padded to DestSize or DestSizeGID. A value too
// wide for its field would shift the message: that is an error.
func MarshalDest(d Dest, withGID bool) ([]byte, error) {
	size := DestSize
	var b strings.Builder
	fmt.Fprintf(&b, "%04x:%04x:%06x:%06x:%08x:%016x:", d.LID, d.OutReads, d.QPN, d.PSN, d.RKey, d.VAddr)
	if withGID {
		size = DestSizeGID
		for _, g := range d.GID {
			fmt.Fprintf(&b, "%02x:", g)
		}
		fmt.Fprintf(&b, "%08x:", d.SRQN)
	} else {
		fmt.Fprintf(&b, "%08x", d.SRQN)
	}
	if b.Len() != size-1 {
		return nil, fmt.Errorf("perftest: address %q does not fit the %d-byte message", b.String(), size)
	}
	msg := make([]byte, size)
	copy(msg, b.String())
	return msg, nil
}

// ParseDest parses an address message from a peer: text up to the first
// NUL (what follows it is ignored, as the C tools do), fields in hex.
func ParseDest(msg []byte, withGID bool) (Dest, error) {
	var d Dest
	if i := bytes.IndexByte(msg, 0); i >= 0 {
		msg = msg[:i]
	}
	f := strings.Split(string(msg), ":")
	want := 7
	if withGID {
		// 6 fields, 16 GID bytes, the SRQN and the empty tail after
		// the final colon.
		want = 24
		if len(f) == want && f[23] != "" {
			return d, fmt.Errorf("%w: %q: text after the SRQN", ErrFormat, msg)
		}
	}
	if len(f) != want {
		return d, fmt.Errorf("%w: %q: %d fields, want %d", ErrFormat, msg, len(f), want)
	}
	hex := func(i, bits int) uint64 {
		if f[i] == "" || f[i][0] == '+' || f[i][0] == '-' {
			want = -1
			return 0
		}
		v, err := strconv.ParseUint(f[i], 16, bits)
		if err != nil {
			want = -1
		}
		return v
	}
	d.LID = uint32(hex(0, 32))
	d.OutReads = uint32(hex(1, 32))
	d.QPN = uint32(hex(2, 32))
	d.PSN = uint32(hex(3, 32))
	d.RKey = uint32(hex(4, 32))
	d.VAddr = hex(5, 64)
	if withGID {
		for i := range d.GID {
			d.GID[i] = byte(hex(6+i, 8))
		}
		d.SRQN = uint32(hex(22, 32))
	} else {
		d.SRQN = uint32(hex(6, 32))
	}
	if want < 0 {
		return Dest{}, fmt.Errorf("%w: %q: a field is not a hex number of its size", ErrFormat, msg)
	}
	return d, nil
}

// ParseVersion reads a peer's version string as C's atof does for the
// versions perftest sends ("6.06"): the leading decimal number, the text
// up to the first NUL.
func ParseVersion(msg []byte) (float64, error) {
	if i := bytes.IndexByte(msg, 0); i >= 0 {
		msg = msg[:i]
	}
	s := string(msg)
	end := 0
	dot := false
	for end < len(s) && (s[end] >= '0' && s[end] <= '9' || s[end] == '.' && !dot) {
		dot = dot || s[end] == '.'
		end++
	}
	v, err := strconv.ParseFloat(s[:end], 64)
	if err != nil {
		return 0, fmt.Errorf("%w: version %q", ErrFormat, s)
	}
	return v, nil
}

// IsIPv4Mapped reports whether a GID is an IPv4-mapped IPv6 address
// (::ffff:a.b.c.d) or an IPv4 multicast one, as perftest's
// ipv6_addr_v4mapped decides: the GID's "IP version".
func IsIPv4Mapped(g [16]byte) bool {
	zero8 := [8]byte{}
	if bytes.Equal(g[:8], zero8[:]) && g[8] == 0 && g[9] == 0 && g[10] == 0xff && g[11] == 0xff {
		return true
	}
	return g[0] == 0xff && g[1] == 0x0e && g[2] == 0 && g[3] == 0 &&
		bytes.Equal(g[4:10], []byte{0, 0, 0, 0, 0, 0}) && g[10] == 0xff && g[11] == 0xff
}
