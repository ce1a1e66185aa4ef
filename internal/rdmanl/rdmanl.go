// Package rdmanl speaks RDMA netlink (NETLINK_RDMA, the NLDEV client): the
// device list, the uverbs character device and driver id of each device,
// port-to-netdev bindings, and adding or deleting software RDMA links
// (rxe, siw). It is what rdma-core's device discovery and iproute2's
// "rdma link" use. The same socket code also carries route netlink
// requests (DialRoute, Request) for package neigh.
package rdmanl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/uverbs"
)

const netlinkRDMA = 20 // NETLINK_RDMA

// nldevType is RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, op).
func nldevType(op uint16) uint16 { return uverbs.RDMA_NL_NLDEV<<10 + op }

// Error is a failure reported by the kernel for one netlink request.
type Error struct {
	Route bool // on a route netlink socket (DialRoute)
	Op    string
	Err   error
}

func (e *Error) Error() string {
	p := "rdma netlink: "
	if e.Route {
		p = "route netlink: "
	}
	return p + e.Op + ": " + e.Err.Error()
}

// Unwrap returns the errno.
func (e *Error) Unwrap() error { return e.Err }

// Conn is a NETLINK_RDMA socket (or, from DialRoute, a NETLINK_ROUTE
// one). It is safe for concurrent use.
type Conn struct {
	mu    sync.Mutex
	fd    int
	seq   uint32
	route bool
}

// Dial opens a NETLINK_RDMA socket. It fails with EPROTONOSUPPORT on
// kernels without RDMA netlink (no ib_core).
func Dial() (*Conn, error) { return dial(netlinkRDMA) }

// DialRoute opens a NETLINK_ROUTE socket, for the few route, link and
// neighbour requests that RoCE address resolution needs (package neigh);
// its requests go through Request.
func DialRoute() (*Conn, error) { return dial(unix.NETLINK_ROUTE) }

func dial(proto int) (*Conn, error) {
	route := proto == unix.NETLINK_ROUTE
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return nil, &Error{Route: route, Op: "socket", Err: err}
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, &Error{Route: route, Op: "bind", Err: err}
	}
	return &Conn{fd: fd, route: route}, nil
}

// Close closes the socket.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fd < 0 {
		return nil
	}
	err := unix.Close(c.fd)
	c.fd = -1
	return err
}

// Attrs is a decoded attribute set: the last value of each type.
type Attrs map[uint16][]byte

// U8, U32, U64 and String decode an attribute, returning the zero value
// when it is absent or short.
func (a Attrs) U8(t uint16) uint8 {
	if v := a[t]; len(v) >= 1 {
		return v[0]
	}
	return 0
}

// U32 decodes a host-order u32 attribute.
func (a Attrs) U32(t uint16) uint32 {
	if v := a[t]; len(v) >= 4 {
		return binary.NativeEndian.Uint32(v)
	}
	return 0
}

// U64 decodes a host-order u64 attribute.
func (a Attrs) U64(t uint16) uint64 {
	if v := a[t]; len(v) >= 8 {
		return binary.NativeEndian.Uint64(v)
	}
	return 0
}

// String decodes a NUL-terminated string attribute.
func (a Attrs) String(t uint16) string {
	v := a[t]
	for i, b := range v {
		if b == 0 {
			return string(v[:i])
		}
	}
	return string(v)
}

// Has reports whether attribute t is present.
func (a Attrs) Has(t uint16) bool { _, ok := a[t]; return ok }

// Encoder builds a netlink attribute payload.
type Encoder struct{ b []byte }

func (e *Encoder) put(t uint16, v []byte) {
	l := 4 + len(v)
	e.b = binary.NativeEndian.AppendUint16(e.b, uint16(l))
	e.b = binary.NativeEndian.AppendUint16(e.b, t)
	e.b = append(e.b, v...)
	for len(e.b)%4 != 0 {
		e.b = append(e.b, 0)
	}
}

// U32 appends a u32 attribute.
func (e *Encoder) U32(t uint16, v uint32) { e.put(t, binary.NativeEndian.AppendUint32(nil, v)) }

// Raw appends an attribute of the bytes v.
func (e *Encoder) Raw(t uint16, v []byte) { e.put(t, v) }

// String appends a NUL-terminated string attribute.
func (e *Encoder) String(t uint16, s string) { e.put(t, append([]byte(s), 0)) }

// Bytes returns the encoded attributes.
func (e *Encoder) Bytes() []byte { return e.b }

// ParseAttrs decodes a netlink attribute stream. Malformed input is an
// error, never a panic.
func ParseAttrs(b []byte) (Attrs, error) {
	a := make(Attrs)
	for len(b) > 0 {
		if len(b) < 4 {
			return nil, fmt.Errorf("rdma netlink: truncated attribute header (%d bytes)", len(b))
		}
		l := int(binary.NativeEndian.Uint16(b))
		t := binary.NativeEndian.Uint16(b[2:]) &^ (unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)
		if l < 4 || l > len(b) {
			return nil, fmt.Errorf("rdma netlink: attribute %d has length %d of %d bytes", t, l, len(b))
		}
		a[t] = b[4:l]
		pad := (l + 3) &^ 3
		if pad > len(b) {
			pad = len(b)
		}
		b = b[pad:]
	}
	return a, nil
}

// parseMessages splits a datagram into netlink messages, returning the
// payloads of data messages and whether the stream is done (NLMSG_DONE or
// an ack). A NLMSG_ERROR with a non-zero errno is returned as that errno.
func parseMessages(b []byte, seq uint32) (payloads [][]byte, done bool, err error) {
	for len(b) > 0 {
		if len(b) < unix.NLMSG_HDRLEN {
			return nil, false, errors.New("rdma netlink: truncated message header")
		}
		l := int(binary.NativeEndian.Uint32(b))
		typ := binary.NativeEndian.Uint16(b[4:])
		mseq := binary.NativeEndian.Uint32(b[8:])
		if l < unix.NLMSG_HDRLEN || l > len(b) {
			return nil, false, fmt.Errorf("rdma netlink: message length %d of %d bytes", l, len(b))
		}
		body := b[unix.NLMSG_HDRLEN:l]
		next := (l + 3) &^ 3
		if next > len(b) {
			next = len(b)
		}
		b = b[next:]
		if mseq != seq {
			continue // a stale reply to an earlier, abandoned request
		}
		switch typ {
		case unix.NLMSG_DONE:
			// A dump that fails carries the errno in its DONE message.
			if len(body) >= 4 {
				if errno := -int32(binary.NativeEndian.Uint32(body)); errno > 0 {
					return nil, true, unix.Errno(errno)
				}
			}
			return payloads, true, nil
		case unix.NLMSG_ERROR:
			if len(body) < 4 {
				return nil, false, errors.New("rdma netlink: truncated error message")
			}
			if errno := -int32(binary.NativeEndian.Uint32(body)); errno != 0 {
				return nil, true, unix.Errno(errno)
			}
			return payloads, true, nil
		case unix.NLMSG_NOOP:
		default:
			payloads = append(payloads, body)
		}
	}
	return payloads, false, nil
}

// Execute sends one request (op is an RDMA_NLDEV_CMD_*) and collects the
// attribute sets of the replies. dump selects NLM_F_DUMP; otherwise an ack
// is requested and the call returns after the reply or ack.
func (c *Conn) Execute(name string, op uint16, dump bool, attrs []byte) ([]Attrs, error) {
	payloads, err := c.Request(name, nldevType(op), dump, attrs)
	if err != nil {
		return nil, err
	}
	out := make([]Attrs, 0, len(payloads))
	for _, p := range payloads {
		a, err := ParseAttrs(p)
		if err != nil {
			return nil, &Error{Op: name, Err: err}
		}
		out = append(out, a)
	}
	return out, nil
}

// Request sends one message of type typ with body (the family header
// and attributes that follow the netlink header) and returns the bodies
// of the replies, which the caller decodes. dump selects NLM_F_DUMP;
// otherwise an ack is requested and the call returns after the reply or
// ack.
func (c *Conn) Request(name string, typ uint16, dump bool, body []byte) ([][]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fd < 0 {
		return nil, &Error{Route: c.route, Op: name, Err: os.ErrClosed}
	}
	c.seq++
	flags := uint16(unix.NLM_F_REQUEST | unix.NLM_F_ACK)
	if dump {
		flags = unix.NLM_F_REQUEST | unix.NLM_F_DUMP
	}
	msg := make([]byte, unix.NLMSG_HDRLEN, unix.NLMSG_HDRLEN+len(body))
	binary.NativeEndian.PutUint32(msg[0:], uint32(unix.NLMSG_HDRLEN+len(body)))
	binary.NativeEndian.PutUint16(msg[4:], typ)
	binary.NativeEndian.PutUint16(msg[6:], flags)
	binary.NativeEndian.PutUint32(msg[8:], c.seq)
	msg = append(msg, body...)
	if err := unix.Sendto(c.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, &Error{Route: c.route, Op: name, Err: err}
	}
	var out [][]byte
	buf := make([]byte, 64*1024)
	for {
		n, _, err := unix.Recvfrom(c.fd, buf, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &Error{Route: c.route, Op: name, Err: err}
		}
		// Payloads are slices of the datagram: copy it out of the
		// receive buffer, which the next datagram overwrites.
		payloads, done, err := parseMessages(append([]byte(nil), buf[:n]...), c.seq)
		if err != nil {
			return nil, &Error{Route: c.route, Op: name, Err: err}
		}
		out = append(out, payloads...)
		if done {
			return out, nil
		}
	}
}
