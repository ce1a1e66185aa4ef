package pingpong

// The pingpong tools' out-of-band exchange: one TCP connection on which
// each side sends "LID:QPN:PSN:GID" lines of a fixed size, then the client
// confirms with "done".

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"

	"github.com/goverbs/goverbs/verbs"
)

const (
	// ppMsgSize is the size of every address message: the C tools send
	// the whole char msg[sizeof "0000:000000:000000:" + 32 GID digits],
	// the formatted text and its terminating NUL.
	ppMsgSize = len("0000:000000:000000:00000000000000000000000000000000") + 1
	// ppDone is what the client sends last: "done" with its NUL.
	ppDone = "done\x00"
	// ppMaxQP is how many address lines ibv_srq_pingpong exchanges, whatever
	// its -q: the lines past the QPs in use are all zeros.
	ppMaxQP = 256
)

// ppDest is one QP's address as the tools exchange it.
type ppDest struct {
	LID uint16
	QPN uint32
	PSN uint32
	GID verbs.GID
}

// wire formats d as the C tools do: "%04x:%06x:%06x:" and the GID as 32 hex
// digits, its bytes in order (gid_to_wire_gid), NUL-padded to ppMsgSize.
func (d ppDest) wire() []byte {
	msg := make([]byte, ppMsgSize)
	copy(msg, fmt.Sprintf("%04x:%06x:%06x:%s", d.LID, d.QPN, d.PSN, hex.EncodeToString(d.GID[:])))
	return msg
}

// parseDest reads a message the way the C tools' sscanf("%x:%x:%x:%s")
// and wire_gid_to_gid do, but refuses a malformed one.
func parseDest(msg []byte) (ppDest, error) {
	s := string(msg)
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	f := strings.SplitN(s, ":", 4)
	if len(f) != 4 || len(f[3]) < 32 {
		return ppDest{}, fmt.Errorf("malformed address message %q", s)
	}
	var v [3]uint64
	for i := range v {
		var err error
		if v[i], err = strconv.ParseUint(strings.TrimPrefix(strings.TrimPrefix(f[i], "0x"), "0X"), 16, 32); err != nil {
			return ppDest{}, fmt.Errorf("malformed address message %q", s)
		}
	}
	d := ppDest{LID: uint16(v[0]), QPN: uint32(v[1]), PSN: uint32(v[2])}
	if _, err := hex.Decode(d.GID[:], []byte(f[3][:32])); err != nil {
		return ppDest{}, fmt.Errorf("malformed GID in address message %q", s)
	}
	return d, nil
}

// ppError is a failure already worded for stderr: the C tool's message,
// then the reason when there is one.
type ppError struct {
	msg string
	err error
}

func (e *ppError) Error() string {
	if e.err == nil {
		return e.msg
	}
	return e.msg + ": " + e.err.Error()
}

func (e *ppError) Unwrap() error { return e.err }

func ppFail(err error, format string, args ...any) error {
	return &ppError{msg: fmt.Sprintf(format, args...), err: err}
}

// ppLines is how many address lines the type exchanges.
func (t ppType) lines() int {
	if t == ppSRQ {
		return ppMaxQP
	}
	return 1
}

// readDests reads n address messages.
func readDests(c net.Conn, typ ppType, n int, who string) ([]ppDest, error) {
	buf := make([]byte, ppMsgSize)
	dests := make([]ppDest, n)
	for i := range dests {
		got, err := io.ReadFull(c, buf)
		if err != nil {
			if typ == ppSRQ {
				return nil, ppFail(err, "%d/%d: Couldn't read remote address [%d]", got, ppMsgSize, i)
			}
			if who == "client" {
				return nil, ppFail(err, "Couldn't read/write remote address")
			}
			return nil, ppFail(err, "%d/%d: Couldn't read remote address", got, ppMsgSize)
		}
		if dests[i], err = parseDest(buf); err != nil {
			return nil, ppFail(err, "Couldn't read remote address [%d]", i)
		}
	}
	return dests, nil
}

// writeDests sends the address messages of mine, padded with all-zero
// messages to lines.
func writeDests(c net.Conn, mine []ppDest, lines int) error {
	out := make([]byte, 0, lines*ppMsgSize)
	for i := 0; i < lines; i++ {
		var d ppDest
		if i < len(mine) {
			d = mine[i]
		}
		out = append(out, d.wire()...)
	}
	_, err := c.Write(out)
	return err
}

// ppClientExchange connects to the server, sends our addresses, reads the
// server's and confirms with "done".
func ppClientExchange(typ ppType, host string, port int, mine []ppDest) ([]ppDest, error) {
	c, err := net.Dial("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		var dnsErr *net.DNSError
		if errors.As(err, &dnsErr) {
			return nil, ppFail(nil, "%s for %s:%d", dnsErr.Err, host, port)
		}
		return nil, ppFail(err, "Couldn't connect to %s:%d", host, port)
	}
	defer c.Close()
	if err := writeDests(c, mine, typ.lines()); err != nil {
		return nil, ppFail(err, "Couldn't send local address")
	}
	rem, err := readDests(c, typ, typ.lines(), "client")
	if err != nil {
		return nil, err
	}
	if _, err := io.WriteString(c, ppDone); err != nil {
		if typ == ppSRQ {
			return nil, ppFail(err, "client write")
		}
		return nil, ppFail(err, "Couldn't read/write remote address")
	}
	return rem, nil
}

// ppListen opens the server's socket; the C tools bind before anything
// else of the exchange, so a busy port fails before any client shows up.
func ppListen(port int) (net.Listener, error) {
	l, err := net.Listen("tcp", ":"+strconv.Itoa(port))
	if err != nil {
		return nil, ppFail(err, "Couldn't listen to port %d", port)
	}
	return l, nil
}

// ppServerExchange accepts one client, reads its addresses, connects our
// QPs to them (connect), sends our addresses and waits for "done".
func ppServerExchange(typ ppType, l net.Listener, mine []ppDest, connect func([]ppDest) error) ([]ppDest, error) {
	c, err := l.Accept()
	l.Close()
	if err != nil {
		return nil, ppFail(err, "accept() failed")
	}
	defer c.Close()
	rem, err := readDests(c, typ, typ.lines(), "server")
	if err != nil {
		return nil, err
	}
	if err := connect(rem); err != nil {
		return nil, fmt.Errorf("%w\nCouldn't connect to remote QP", err)
	}
	if err := writeDests(c, mine, typ.lines()); err != nil {
		if typ == ppSRQ {
			return nil, ppFail(err, "Couldn't send local address")
		}
		return nil, ppFail(err, "Couldn't send/recv local address")
	}
	done := make([]byte, len(ppDone))
	if _, err := io.ReadFull(c, done); err != nil {
		if typ == ppSRQ {
			return nil, ppFail(err, "client write")
		}
		return nil, ppFail(err, "Couldn't send/recv local address")
	}
	return rem, nil
}
