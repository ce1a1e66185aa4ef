package perftest

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"time"
)

// Conn is one end of the exchange. The client writes each message before
// reading the peer's; the server reads first (ctx_xchg_data_ethernet,
// ctx_xchg_data_rdma).
type Conn struct {
	nc     net.Conn  // the TCP exchange
	msgs   messenger // the rdma_cm exchange (perftest's -R), or nil
	client bool
	// PeerVersion is the peer's version, once Versions ran.
	PeerVersion float64
}

// Dial connects to a server at host:port.
func Dial(ctx context.Context, host string, port int) (*Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp4", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("perftest: couldn't connect to %s:%d: %w", host, port, err)
	}
	return &Conn{nc: nc, client: true}, nil
}

// Listen opens the server's socket on every IPv4 address, as perftest
// binds (AI_PASSIVE, AF_INET, SO_REUSEADDR).
func Listen(ctx context.Context, port int) (net.Listener, error) {
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp4", ":"+strconv.Itoa(port))
	if err != nil {
		return nil, fmt.Errorf("perftest: couldn't listen to port %d: %w", port, err)
	}
	return l, nil
}

// Accept waits for the one client of a test on l.
func Accept(ctx context.Context, l net.Listener) (*Conn, error) {
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	nc, err := l.Accept()
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("perftest: accept: %w", err)
	}
	return &Conn{nc: nc}, nil
}

// messenger carries the exchange as messages: each write is one message
// of exactly its bytes, each read one message of exactly the size the
// reader expects (perftest's rdma_cm exchange).
type messenger interface {
	// sendMsg sends b; last marks the exchange's last message (the
	// server's answer in Finish), after which the peer leaves.
	sendMsg(ctx context.Context, b []byte, last bool) error
	// recvMsg receives the next message into b; last marks the
	// exchange's last message, after which the peer leaves.
	recvMsg(ctx context.Context, b []byte, last bool) error
	close() error
}

// RDMACM reports whether the exchange runs over rdma_cm (DialCM,
// AcceptCM) rather than TCP.
func (c *Conn) RDMACM() bool { return c.msgs != nil }

// Close closes the connection.
func (c *Conn) Close() error {
	if c.msgs != nil {
		return c.msgs.close()
	}
	return c.nc.Close()
}

// Client reports whether this is the connecting end.
func (c *Conn) Client() bool { return c.client }

// exchange sends mine and receives len(rem) bytes of the peer's, in the
// order of the end's role. last marks the exchange's last step (Finish),
// whose server message is the last of all.
func (c *Conn) exchange(ctx context.Context, mine, rem []byte, last bool) error {
	if c.msgs != nil {
		var err error
		if c.client {
			if err = c.msgs.sendMsg(ctx, mine, false); err == nil {
				err = c.msgs.recvMsg(ctx, rem, last)
			}
		} else {
			if err = c.msgs.recvMsg(ctx, rem, false); err == nil {
				err = c.msgs.sendMsg(ctx, mine, last)
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return fmt.Errorf("perftest: exchange with peer over rdma_cm: %w", err)
		}
		return nil
	}
	stop := context.AfterFunc(ctx, func() { c.nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	var err error
	if c.client {
		if _, err = c.nc.Write(mine); err == nil {
			_, err = io.ReadFull(c.nc, rem)
		}
	} else {
		if _, err = io.ReadFull(c.nc, rem); err == nil {
			_, err = c.nc.Write(mine)
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return fmt.Errorf("perftest: exchange with peer: %w", err)
	}
	return nil
}

// Versions exchanges the version strings (exchange_versions) and refuses a
// peer older than MinPeerVersion (check_version_compatibility).
func (c *Conn) Versions(ctx context.Context) error {
	var mine, rem [VersionSize]byte
	copy(mine[:], Version)
	if err := c.exchange(ctx, mine[:], rem[:], false); err != nil {
		return err
	}
	v, err := ParseVersion(rem[:])
	if err != nil {
		return err
	}
	if v < MinPeerVersion {
		return fmt.Errorf("%w: %.2f (at least %.2f)", ErrVersion, v, MinPeerVersion)
	}
	c.PeerVersion = v
	return nil
}

// SysData exchanges the cycle buffer and cache line sizes
// (check_sys_data) and returns the larger of each, which both ends use.
func (c *Conn) SysData(ctx context.Context, cycleBuffer, cacheLine int) (int, int, error) {
	got := [2]int{cycleBuffer, cacheLine}
	for i := range got {
		var mine, rem [4]byte
		binary.BigEndian.PutUint32(mine[:], uint32(int32(got[i])))
		if err := c.exchange(ctx, mine[:], rem[:], false); err != nil {
			return 0, 0, err
		}
		if r := int(int32(binary.BigEndian.Uint32(rem[:]))); r > got[i] {
			got[i] = r
		}
	}
	if got[0] <= 0 || got[1] <= 0 || got[0] > 1<<30 || got[1] > got[0] {
		return 0, 0, fmt.Errorf("%w: cycle buffer %d, cache line %d", ErrFormat, got[0], got[1])
	}
	return got[0], got[1], nil
}

// MTU exchanges the MTUs (enum ibv_mtu values, 1 for 256 to 5 for 4096)
// as check_mtu does and returns the one to use: the peer's when valid and
// smaller than ours.
func (c *Conn) MTU(ctx context.Context, mtu int) (int, error) {
	var mine, rem [mtuSize]byte
	copy(mine[:], strconv.Itoa(mtu))
	if err := c.exchange(ctx, mine[:], rem[:], false); err != nil {
		return 0, err
	}
	r := 0
	if rem[0] >= '0' && rem[0] <= '9' {
		r = int(rem[0] - '0')
		if rem[1] >= '0' && rem[1] <= '9' {
			r = r*10 + int(rem[1]-'0')
		}
	}
	if r >= 1 && r <= 5 && r < mtu {
		return r, nil
	}
	return mtu, nil
}

// HandShake sends our address and receives the peer's (ctx_hand_shake).
// withGID picks the message with the GID: perftest uses it whenever a GID
// index is in use, which is always on Ethernet (RoCE). Over rdma_cm the
// message is struct pingpong_dest itself (MarshalDestCM), GID included.
func (c *Conn) HandShake(ctx context.Context, my Dest, withGID bool) (Dest, error) {
	if c.msgs != nil {
		rem := make([]byte, DestCMSize)
		if err := c.exchange(ctx, MarshalDestCM(my), rem, false); err != nil {
			return Dest{}, err
		}
		return ParseDestCM(rem)
	}
	mine, err := MarshalDest(my, withGID)
	if err != nil {
		return Dest{}, err
	}
	rem := make([]byte, len(mine))
	if err := c.exchange(ctx, mine, rem, false); err != nil {
		return Dest{}, err
	}
	return ParseDest(rem, withGID)
}

// BWReport is one end's bandwidth result (struct bw_report_data, the
// exchanged fields).
type BWReport struct {
	Size    uint64
	Iters   uint64
	BWPeak  float64 // MB/s (2^20 bytes) or Gb/s
	BWAvg   float64
	MsgRate float64 // Mpps
}

// ExchangeBWReports exchanges the reports as xchg_bw_reports does: each
// field on its own, in network byte order, the doubles byte-swapped as
// 64-bit words; iters is 64-bit for peers from 5.33 on.
func (c *Conn) ExchangeBWReports(ctx context.Context, my BWReport) (BWReport, error) {
	var r BWReport
	u64 := func(v uint64, size int) (uint64, error) {
		var mine, rem [8]byte
		if size == 8 {
			binary.BigEndian.PutUint64(mine[:], v)
		} else {
			binary.BigEndian.PutUint32(mine[:], uint32(v))
		}
		if err := c.exchange(ctx, mine[:size], rem[:size], false); err != nil {
			return 0, err
		}
		if size == 8 {
			return binary.BigEndian.Uint64(rem[:]), nil
		}
		return uint64(binary.BigEndian.Uint32(rem[:])), nil
	}
	var err error
	if r.Size, err = u64(my.Size, 8); err != nil {
		return r, err
	}
	itersSize := 4
	if c.PeerVersion >= 5.33 {
		itersSize = 8
	}
	if r.Iters, err = u64(my.Iters, itersSize); err != nil {
		return r, err
	}
	for _, f := range []struct {
		mine float64
		rem  *float64
	}{{my.BWPeak, &r.BWPeak}, {my.BWAvg, &r.BWAvg}, {my.MsgRate, &r.MsgRate}} {
		v, err := u64(math.Float64bits(f.mine), 8)
		if err != nil {
			return r, err
		}
		*f.rem = math.Float64frombits(v)
	}
	return r, nil
}

// Finish is ctx_close_connection: a last handshake, then "done", then the
// socket is closed. The peer's "done" is never read, as in C. Over
// rdma_cm it is the handshake alone; Close ends the connection. The
// server's message in it is the exchange's last, and the client leaves
// once it has it: a server whose SEND is still unacknowledged when the
// client disconnects takes it as delivered (see cmMessenger.sendMsg).
func (c *Conn) Finish(ctx context.Context, my Dest, withGID bool) error {
	if c.msgs != nil {
		// The peer's address is not used: C does not read it either.
		rem := make([]byte, DestCMSize)
		return c.exchange(ctx, MarshalDestCM(my), rem, true)
	}
	if _, err := c.HandShake(ctx, my, withGID); err != nil {
		return err
	}
	if _, err := c.nc.Write([]byte(Done)); err != nil {
		return fmt.Errorf("perftest: write done: %w", err)
	}
	return c.nc.Close()
}
