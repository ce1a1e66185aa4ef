package perftest

// The exchange over rdma_cm, perftest's -R (--rdma_cm): -R also turns on
// use_rdma_cm, so the tools carry their whole out-of-band exchange over a
// connection of their own made with rdma_cm (establish_connection,
// rdma_client_connect and rdma_server_connect in perftest_communication.c)
// instead of TCP: an RC QP on the same port, one receive of
// sizeof(struct pingpong_dest) posted before CONNECT or ACCEPT and again
// after each message, each message one signaled SEND of exactly the bytes
// the TCP exchange would write (ctx_xchg_data_rdma), except the
// handshakes, which send struct pingpong_dest itself in network byte
// order (rdma_write_keys), and the end, which writes no "done"
// (ctx_close_connection).

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/goverbs/goverbs/cm"
	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/verbs"
)

// DestCMSize is sizeof(struct pingpong_dest) on 64-bit Linux: the
// handshake message of the rdma_cm exchange, and the size of the one
// receive buffer each end keeps posted.
const DestCMSize = 56

// Offsets in struct pingpong_dest: five 32-bit fields, 4 bytes of padding
// before the 64-bit vaddr, the GID, srqn, gid_index.
const (
	destCMVAddr    = 24
	destCMGID      = 32
	destCMSRQN     = 48
	destCMGIDIndex = 52
)

// MarshalDestCM formats d as rdma_write_keys sends it: struct
// pingpong_dest with every field big-endian but the raw GID. gid_index,
// which no reader uses, is 0.
func MarshalDestCM(d Dest) []byte {
	b := make([]byte, DestCMSize)
	for i, v := range []uint32{d.LID, d.OutReads, d.QPN, d.PSN, d.RKey} {
		binary.BigEndian.PutUint32(b[4*i:], v)
	}
	binary.BigEndian.PutUint64(b[destCMVAddr:], d.VAddr)
	copy(b[destCMGID:], d.GID[:])
	binary.BigEndian.PutUint32(b[destCMSRQN:], d.SRQN)
	binary.BigEndian.PutUint32(b[destCMGIDIndex:], 0)
	return b
}

// ParseDestCM reads a peer's handshake message as rdma_read_keys does
// (LID to GID; the SRQN too, which the C reader leaves alone).
func ParseDestCM(b []byte) (Dest, error) {
	if len(b) != DestCMSize {
		return Dest{}, fmt.Errorf("%w: a %d-byte address, want %d", ErrFormat, len(b), DestCMSize)
	}
	var d Dest
	d.LID = binary.BigEndian.Uint32(b[0:])
	d.OutReads = binary.BigEndian.Uint32(b[4:])
	d.QPN = binary.BigEndian.Uint32(b[8:])
	d.PSN = binary.BigEndian.Uint32(b[12:])
	d.RKey = binary.BigEndian.Uint32(b[16:])
	d.VAddr = binary.BigEndian.Uint64(b[destCMVAddr:])
	copy(d.GID[:], b[destCMGID:destCMSRQN])
	d.SRQN = binary.BigEndian.Uint32(b[destCMSRQN:])
	return d, nil
}

// syncSpecID is the wr_id of every exchange message (SYNC_SPEC_ID).
const syncSpecID = 5

// RetryCount is perftest's default retry count (DEF_RETRY_COUNT), which
// its rdma_cm connections ask for, RNR retries included for the test's.
const RetryCount = 7

// lingerMax bounds the client's wait for the server's disconnect in
// close. Measured on 6.1 (rxe, TestPerfInterop's -R cases, C and Go
// servers): 0.8-21 ms. Past it the client leaves as before.
const lingerMax = 5 * time.Second

// spinCheck is how many empty polls pass between looks at the context.
const spinCheck = 4096

// cmMessenger carries the exchange over an rdma_cm connection.
type cmMessenger struct {
	id   *cm.ID
	ep   *cm.Queues
	mr   *mr.MR
	send []byte // our message
	recv []byte // the posted receive
	wc   [1]verbs.WorkCompletion
	// linger: the exchange's last message came in (the client's end);
	// close waits for the server's disconnect first.
	linger bool
}

// newCMMessenger creates the exchange QP on id (bound to a device) and
// posts its receive.
func newCMMessenger(id *cm.ID) (*cmMessenger, error) {
	ep, err := id.NewQueues(nil, qp.Caps{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1})
	if err != nil {
		return nil, fmt.Errorf("perftest: rdma_cm exchange QP: %w", err)
	}
	m := &cmMessenger{id: id, ep: ep}
	if m.mr, err = mr.New(ep.PD(), 2*DestCMSize, mr.LocalWrite); err != nil {
		ep.Close()
		return nil, fmt.Errorf("perftest: rdma_cm exchange buffer: %w", err)
	}
	mem := m.mr.Bytes()
	m.send, m.recv = mem[:DestCMSize], mem[DestCMSize:]
	if err := m.postRecv(); err != nil {
		m.mr.Close()
		ep.Close()
		return nil, err
	}
	return m, nil
}

func (m *cmMessenger) postRecv() error {
	if err := m.ep.PostRecv(syncSpecID, m.recv, m.mr); err != nil {
		return fmt.Errorf("perftest: post the exchange's receive: %w", err)
	}
	return nil
}

// sendMsg is rdma_write_data: one signaled SEND, waited for.
//
// The exchange's last message (last: the server's in Finish) differs in
// one case. The client leaves as soon as it has that message, and its
// teardown can move its QP to the error state before its responder has
// acknowledged the SEND: rxe's acknowledgement goes out after the receive
// completion (rxe_resp.c: the COMPLETE state before ACKNOWLEDGE) and is
// dropped by a QP no longer ready. The SEND is then retried with no end,
// since rxe takes the retry count perftest asks for, 7, as unlimited
// (rxe_comp.c, COMPST_ERROR_RETRY): ib_read_lat's server waits forever.
// So for the last message the wait also ends when the client disconnects
// (the ID's Done), and the SEND counts as delivered: the client
// disconnects once it has it, or after failing on its own. Seen once in
// CI on 6.1 (read-lat -R, Go server and client); the test is
// TestFinishCMPeerGone.
func (m *cmMessenger) sendMsg(ctx context.Context, b []byte, last bool) error {
	if len(b) > len(m.send) {
		return fmt.Errorf("perftest: a %d-byte message, more than the peer's %d-byte receive", len(b), len(m.send))
	}
	n := copy(m.send, b)
	if err := m.ep.PostSend(syncSpecID, m.send[:n], m.mr, verbs.SendSignaled); err != nil {
		return fmt.Errorf("perftest: post the exchange's send: %w", err)
	}
	var peer <-chan struct{}
	if last {
		peer = m.id.Done()
	}
	wc, err := m.spin(ctx, m.ep.SendCQ(), peer)
	if errors.Is(err, errPeerGone) {
		return nil
	}
	if err != nil {
		return err
	}
	if wc.Status != verbs.WCSuccess || wc.Opcode != verbs.WCSend || wc.WRID != syncSpecID {
		return fmt.Errorf("perftest: exchange send completion: %v (opcode %v, wr_id %d)", wc.Status, wc.Opcode, wc.WRID)
	}
	return nil
}

// recvMsg is rdma_read_data: the next receive, which must hold len(b)
// bytes, then the receive posted again.
func (m *cmMessenger) recvMsg(ctx context.Context, b []byte, last bool) error {
	wc, err := m.spin(ctx, m.ep.RecvCQ(), nil)
	if err != nil {
		return err
	}
	if wc.Status != verbs.WCSuccess || wc.Opcode != verbs.WCRecv || wc.WRID != syncSpecID {
		return fmt.Errorf("perftest: exchange receive completion: %v (opcode %v, wr_id %d)", wc.Status, wc.Opcode, wc.WRID)
	}
	if int(wc.ByteLen) != len(b) {
		return fmt.Errorf("%w: a %d-byte message, want %d", ErrFormat, wc.ByteLen, len(b))
	}
	copy(b, m.recv)
	m.linger = last
	return m.postRecv()
}

// errPeerGone ends spin's wait when its peer channel closes.
var errPeerGone = errors.New("perftest: the peer disconnected")

// spin polls c until it has a completion, as rdma_read_data and
// rdma_write_data do (ibv_poll_cq in a loop, never a completion event).
// The busy wait is part of what the peer measures: ib_read_lat's and
// ib_atomic_lat's server, passive, spends the whole measurement here
// waiting for the end, and whether its CPU spins or sleeps changes how
// fast the kernel serves the client's READs. Measured under TCG on 6.12,
// read-lat -R, 2 bytes, typical: on siw a sleeping server made them
// about twice as slow (125-143 µs against 63-75), on rxe about three
// times faster (18 µs against 63). Spinning like perftest keeps a Go
// end's numbers comparable with the C tool's.
//
// The wait also ends, with errPeerGone, once peer (if not nil) is closed
// and a last poll finds nothing.
func (m *cmMessenger) spin(ctx context.Context, c *cq.CQ, peer <-chan struct{}) (verbs.WorkCompletion, error) {
	gone := false
	for spins := 1; ; spins++ {
		n, err := c.Poll(m.wc[:])
		if err != nil {
			return verbs.WorkCompletion{}, fmt.Errorf("perftest: poll the exchange's CQ: %w", err)
		}
		if n == 1 {
			return m.wc[0], nil
		}
		if gone {
			return verbs.WorkCompletion{}, errPeerGone
		}
		if spins%spinCheck == 0 {
			if ctx.Err() != nil {
				return verbs.WorkCompletion{}, ctx.Err()
			}
			select {
			case <-peer: // polled once more first
				gone = true
			default:
			}
		}
	}
}

// close disconnects (on iWARP a graceful close: the peer still gets what
// was sent; best effort, the peer may have gone first) and frees the ID,
// the QP and the buffer.
//
// The client's end, once it has the exchange's last message, first waits
// up to lingerMax for the server to disconnect. Its QP stays ready
// meanwhile, so its responder still acknowledges the server's last SEND:
// rxe sends that acknowledgement after the receive completion, and drops
// it from a QP in the error state; the SEND is then retried with no end
// at perftest's retry count (see sendMsg). A C server (ib_read_lat -R,
// ib_send_lat -R, ...) cannot see the client leave, waits for that
// SEND's completion forever, and never disconnects. The server
// disconnects once its SEND has completed (destroy_ctx).
func (m *cmMessenger) close() error {
	if m.linger {
		t := time.NewTimer(lingerMax)
		select {
		case <-m.id.Done():
		case <-t.C:
		}
		t.Stop()
	}
	m.id.Disconnect()
	// The MR before the endpoint: the endpoint's PD cannot go while a
	// region of it is registered (EBUSY, and the PD would stay).
	return errors.Join(m.id.Close(), m.mr.Close(), m.ep.Close())
}

// ResolveIPv4 looks host up as perftest does (getaddrinfo, AF_INET).
func ResolveIPv4(ctx context.Context, host string) (netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		if !a.Is4() {
			return netip.Addr{}, fmt.Errorf("perftest: %s is not an IPv4 address", host)
		}
		return a, nil
	}
	as, err := net.DefaultResolver.LookupNetIP(ctx, "ip4", host)
	if err != nil || len(as) == 0 {
		return netip.Addr{}, fmt.Errorf("perftest: problem in resolving basic address and port: %s: %w", host, err)
	}
	return as[0].Unmap(), nil
}

// DialCM connects the exchange to a server at host:port over rdma_cm
// (rdma_client_connect) with an ID of ch.
func DialCM(ctx context.Context, ch *cm.Channel, host string, port int) (*Conn, error) {
	a, err := ResolveIPv4(ctx, host)
	if err != nil {
		return nil, err
	}
	id, err := ch.CreateID(cm.TCP)
	if err != nil {
		return nil, fmt.Errorf("perftest: rdma_cm ID: %w", err)
	}
	dst := netip.AddrPortFrom(a, uint16(port))
	if err := id.ResolveAddr(ctx, netip.AddrPort{}, dst); err != nil {
		id.Close()
		return nil, fmt.Errorf("perftest: rdma_resolve_addr: %w", err)
	}
	if err := id.ResolveRoute(ctx); err != nil {
		id.Close()
		return nil, fmt.Errorf("perftest: rdma_resolve_route: %w", err)
	}
	m, err := newCMMessenger(id)
	if err != nil {
		id.Close()
		return nil, err
	}
	p := cm.ConnParam{RetryCount: RetryCount, RNRRetryCount: 7, Exact: true}
	if _, err := id.Connect(ctx, p); err != nil {
		m.close()
		return nil, fmt.Errorf("perftest: couldn't connect to %v over rdma_cm: %w", dst, err)
	}
	return &Conn{msgs: m, client: true}, nil
}

// ListenCM binds an ID of ch to port on every IPv4 address and listens,
// as rdma_server_connect does (backlog: the one QP).
func ListenCM(ch *cm.Channel, port int) (*cm.ID, error) {
	id, err := ch.CreateID(cm.TCP)
	if err != nil {
		return nil, fmt.Errorf("perftest: rdma_cm ID: %w", err)
	}
	if err := id.Bind(netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(port))); err != nil {
		id.Close()
		return nil, fmt.Errorf("perftest: rdma_bind_addr: %w", err)
	}
	if err := id.Listen(1); err != nil {
		id.Close()
		return nil, fmt.Errorf("perftest: rdma_listen: %w", err)
	}
	return id, nil
}

// AcceptCM waits for the exchange's connection request on l and accepts
// it (rdma_server_connect). The caller closes l, as perftest destroys its
// listening ID once connected.
func AcceptCM(ctx context.Context, l *cm.ID) (*Conn, error) {
	id, _, err := l.GetRequest(ctx)
	if err != nil {
		return nil, fmt.Errorf("perftest: waiting for the rdma_cm connect request: %w", err)
	}
	m, err := newCMMessenger(id)
	if err != nil {
		id.Reject(nil)
		id.Close()
		return nil, err
	}
	p := cm.ConnParam{RetryCount: RetryCount, RNRRetryCount: 7, Exact: true}
	if err := id.Accept(ctx, p); err != nil {
		m.close()
		return nil, fmt.Errorf("perftest: rdma_accept: %w", err)
	}
	return &Conn{msgs: m}, nil
}
