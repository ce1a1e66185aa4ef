package rpma

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/goverbs/goverbs/cm"
	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/verbs"
)

// ConnCfg configures connections (rpma_conn_cfg). NewConnCfg has
// librpma's defaults; a nil *ConnCfg means them too.
type ConnCfg struct {
	Timeout       time.Duration // address and route resolution (active side)
	CQSize        uint32        // main CQ
	RCQSize       uint32        // receive CQ; 0: receives complete on the main CQ
	SQSize        uint32
	RQSize        uint32
	SharedChannel bool // one completion channel for the CQ and RCQ (Conn.Wait)
	SRQ           *SRQ
}

// NewConnCfg returns the defaults: 1 s, CQ 10, no RCQ, SQ 10, RQ 10.
func NewConnCfg() *ConnCfg {
	return &ConnCfg{Timeout: time.Second, CQSize: 10, SQSize: 10, RQSize: 10}
}

func (c *ConnCfg) orDefault() (*ConnCfg, error) {
	if c == nil {
		return NewConnCfg(), nil
	}
	if c.Timeout < 0 {
		return nil, inval("rpma: negative timeout")
	}
	if c.SharedChannel && c.SRQ != nil && c.SRQ.rcq != nil {
		return nil, inval("rpma: a shared completion channel cannot serve an SRQ with its own receive CQ")
	}
	return c, nil
}

// CompletionFlags say when an operation generates a completion
// (RPMA_F_COMPLETION_*).
type CompletionFlags int

// Completion flags.
const (
	OnError CompletionFlags = 1 // unsignaled: only failures complete
	Always  CompletionFlags = 3 // signaled
)

func (f CompletionFlags) send() (verbs.SendFlags, error) {
	if f == 0 {
		return 0, ErrInval
	}
	if f&2 != 0 {
		return verbs.SendSignaled, nil
	}
	return 0, nil
}

// FlushType is what a flush guarantees (enum rpma_flush_type).
type FlushType int

// Flush types.
const (
	FlushPersistent FlushType = 0
	FlushVisibility FlushType = 1
)

// ConnEvent is a connection event (enum rpma_conn_event).
type ConnEvent int

// Connection events.
const (
	ConnUndefined   ConnEvent = -1
	ConnEstablished ConnEvent = 0
	ConnClosed      ConnEvent = 1
	ConnLost        ConnEvent = 2
	ConnRejected    ConnEvent = 3
	ConnUnreachable ConnEvent = 4
)

// String returns rpma_utils_conn_event_2str's text.
func (e ConnEvent) String() string {
	switch e {
	case ConnUndefined:
		return "Undefined connection event"
	case ConnEstablished:
		return "Connection established"
	case ConnClosed:
		return "Connection closed"
	case ConnLost:
		return "Connection lost"
	case ConnRejected:
		return "Connection rejected"
	case ConnUnreachable:
		return "Connection unreachable"
	}
	return "Unsupported connection event"
}

func connEvent(t cm.EventType) (ConnEvent, error) {
	switch t {
	case cm.EventEstablished:
		return ConnEstablished, nil
	case cm.EventDisconnected, cm.EventTimewaitExit:
		return ConnClosed, nil
	case cm.EventConnectError, cm.EventDeviceRemoval:
		return ConnLost, nil
	case cm.EventRejected:
		return ConnRejected, nil
	case cm.EventUnreachable:
		return ConnUnreachable, nil
	}
	return ConnUndefined, wrap(ErrUnknown, errors.New("rpma: unexpected event "+t.String()))
}

// firstEvent is the ConnEvent a failed connect's event stands for, as
// connEvent names it, or ConnUndefined for an event that is not one.
func firstEvent(t cm.EventType) ConnEvent {
	switch e, err := connEvent(t); {
	case err != nil, e == ConnEstablished, e == ConnClosed:
		return ConnUndefined
	default:
		return e
	}
}

func parseAddr(addr, port string) (netip.AddrPort, error) {
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return netip.AddrPort{}, inval("rpma: port %q", port)
	}
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		ips, lerr := net.DefaultResolver.LookupNetIP(context.Background(), "ip", addr)
		if lerr != nil || len(ips) == 0 {
			return netip.AddrPort{}, wrap(ErrProvider, fmt.Errorf("rpma: address %q: %w", addr, errors.Join(err, lerr)))
		}
		ip = ips[0]
	}
	return netip.AddrPortFrom(ip.Unmap(), uint16(p)), nil
}

// newChannel makes an rdma_cm channel whose IDs use the peer's context.
func (p *Peer) newChannel() (*cm.Channel, error) {
	ch, err := cm.NewChannel()
	if err != nil {
		return nil, provider(err)
	}
	if err := ch.AttachContext(p.ctx); err != nil {
		ch.Close()
		return nil, provider(err)
	}
	return ch, nil
}

// newID makes a channel of its own (as librpma gives every endpoint and
// connection) with a TCP ID on it.
func (p *Peer) newID() (*cm.Channel, *cm.ID, error) {
	ch, err := p.newChannel()
	if err != nil {
		return nil, nil, err
	}
	id, err := ch.CreateID(cm.TCP)
	if err != nil {
		ch.Close()
		return nil, nil, provider(err)
	}
	return ch, id, nil
}

// Endpoint listens for connection requests (rpma_ep).
type Endpoint struct {
	peer *Peer
	ch   *cm.Channel
	id   *cm.ID
}

// Listen starts listening on addr:port (rpma_ep_listen).
func (p *Peer) Listen(addr, port string) (*Endpoint, error) {
	if p == nil {
		return nil, ErrInval
	}
	ap, err := parseAddr(addr, port)
	if err != nil {
		return nil, err
	}
	ch, id, err := p.newID()
	if err != nil {
		return nil, err
	}
	if err = id.Bind(ap); err == nil {
		err = id.Listen(0)
	}
	if err != nil {
		ch.Close()
		return nil, provider(err)
	}
	return &Endpoint{peer: p, ch: ch, id: id}, nil
}

// NextConnReq waits for the next connection request and prepares its
// CQs and QP with cfg (rpma_ep_next_conn_req). It returns ctx's error
// when ctx ends first.
func (ep *Endpoint) NextConnReq(ctx context.Context, cfg *ConnCfg) (*ConnReq, error) {
	if ep == nil {
		return nil, ErrInval
	}
	cfg, err := cfg.orDefault()
	if err != nil {
		return nil, err
	}
	id, ev, err := ep.id.GetRequest(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, wrap(ErrProvider, err)
		}
		return nil, wrap(ErrInval, err)
	}
	// Each connection gets its own event channel, so it outlives the
	// endpoint (librpma migrates the ID the same way).
	ch, err := ep.peer.newChannel()
	if err != nil {
		id.Reject(nil)
		id.Close()
		return nil, err
	}
	if err := id.Migrate(ch); err != nil {
		id.Reject(nil)
		id.Close()
		ch.Close()
		return nil, provider(err)
	}
	r := &ConnReq{peer: ep.peer, ch: ch, id: id, cfg: cfg, pdata: ev.Conn.PrivateData}
	if err := r.build(); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// Close stops listening (librpma's rpma_ep_shutdown). Connections made
// through the endpoint stay up.
func (ep *Endpoint) Close() error {
	if ep == nil {
		return nil
	}
	return wrap(ErrProvider, ep.ch.Close())
}

// ConnReq is a connection request (rpma_conn_req): outgoing (NewConnReq)
// or incoming (Endpoint.NextConnReq), with its CQs and QP ready.
type ConnReq struct {
	peer   *Peer
	ch     *cm.Channel
	id     *cm.ID
	cfg    *ConnCfg
	active bool
	pdata  []byte

	cq, rcq  *CQ
	sharedCh *verbs.CompChannel
	q        *qp.QP
}

// NewConnReq resolves addr:port and prepares an outgoing connection
// request (rpma_conn_req_new).
func (p *Peer) NewConnReq(ctx context.Context, addr, port string, cfg *ConnCfg) (*ConnReq, error) {
	if p == nil {
		return nil, ErrInval
	}
	cfg, err := cfg.orDefault()
	if err != nil {
		return nil, err
	}
	ap, err := parseAddr(addr, port)
	if err != nil {
		return nil, err
	}
	ch, id, err := p.newID()
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	err = id.ResolveAddr(rctx, netip.AddrPort{}, ap)
	if err == nil {
		err = id.ResolveRoute(rctx)
	}
	cancel()
	if err != nil {
		ch.Close()
		return nil, provider(err)
	}
	if id.Context() != p.ctx {
		ch.Close()
		return nil, inval("rpma: %v is not reachable through the peer's device", ap)
	}
	r := &ConnReq{peer: p, ch: ch, id: id, cfg: cfg, active: true}
	if err := r.build(); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// build creates the CQs and the QP: the receive CQ is the SRQ's, else the
// connection's RCQ, else the main CQ.
func (r *ConnReq) build() error {
	ctx := r.peer.ctx
	cfg := r.cfg
	var err error
	if cfg.SharedChannel {
		if r.sharedCh, err = ctx.NewCompChannel(); err != nil {
			return provider(err)
		}
	}
	if r.cq, err = newCQ(ctx, cfg.CQSize, r.sharedCh, cfg.SharedChannel); err != nil {
		return err
	}
	recv := r.cq
	if cfg.SRQ != nil && cfg.SRQ.rcq != nil {
		recv = cfg.SRQ.rcq
	} else if cfg.RCQSize > 0 {
		if r.rcq, err = newCQ(ctx, cfg.RCQSize, r.sharedCh, cfg.SharedChannel); err != nil {
			return err
		}
		recv = r.rcq
	}
	opts := qp.Options{SendCQ: r.cq.cq, RecvCQ: recv.cq,
		Caps: qp.Caps{MaxSendWR: int(max(cfg.SQSize, 1)), MaxRecvWR: int(max(cfg.RQSize, 1)), MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 8}}
	if cfg.SRQ != nil {
		opts.SRQ = cfg.SRQ.srq
		opts.Caps.MaxRecvWR, opts.Caps.MaxRecvSGE = 0, 0
	}
	if r.q, err = r.id.CreateQP(r.peer.pd, opts); err != nil {
		return provider(err)
	}
	return nil
}

// Recv posts a receive buffer before the connection is established
// (rpma_conn_req_recv); dst is required.
func (r *ConnReq) Recv(dst *LocalMR, off, length uint64, opContext uint64) error {
	if r == nil || dst == nil {
		return ErrInval
	}
	var sge [1]verbs.SGE
	sgl, err := recvSGE(dst, off, length, &sge)
	if err != nil {
		return err
	}
	if err := r.q.PostRecv([]verbs.RecvWR{{WRID: opContext, SGList: sgl}}); err != nil {
		return provider(err)
	}
	return nil
}

// PrivateData returns the private data of an incoming request (56 bytes,
// zero-padded by the kernel); nil for an outgoing one.
func (r *ConnReq) PrivateData() []byte { return r.pdata }

// Connect connects: it accepts an incoming request or sends an outgoing
// one, with pdata as private data (nil for none; empty is invalid), and
// returns the connection (rpma_conn_req_connect). The request is consumed
// whatever the outcome. Whether the connection came up is the first
// Conn.NextEvent: ConnEstablished, or ConnRejected / ConnUnreachable.
func (r *ConnReq) Connect(ctx context.Context, pdata []byte) (*Conn, error) {
	if r == nil {
		return nil, ErrInval
	}
	if pdata != nil && len(pdata) == 0 {
		r.Close()
		return nil, inval("rpma: empty private data")
	}
	param := cm.ConnParam{PrivateData: pdata, ResponderResources: cm.MaxRDAtomic, InitiatorDepth: cm.MaxRDAtomic,
		FlowControl: 1, RetryCount: 7, RNRRetryCount: 7}
	c := &Conn{peer: r.peer, ch: r.ch, id: r.id, q: r.q, cq: r.cq, rcq: r.rcq, sharedCh: r.sharedCh, srq: r.cfg.SRQ,
		nativeFlush: r.peer.useNativeFlush, nativeAtomicWrite: r.peer.nativeAtomicWrite}
	raw, err := mr.New(r.peer.pd, 8, mr.LocalWrite)
	if err != nil {
		r.Close()
		return nil, provider(err)
	}
	c.raw = raw
	// From here the connection's waits end with it; the failures below
	// close c, which ends its life too.
	c.life = newLife(r.id)
	c.cq.life = c.life
	if c.rcq != nil {
		c.rcq.life = c.life
	}
	if r.active {
		ev, err := r.id.Connect(ctx, param)
		var evErr *cm.EventError
		first := ConnUndefined
		if errors.As(err, &evErr) {
			first = firstEvent(evErr.Event)
		}
		switch {
		case err == nil:
			c.pdata = ev.Conn.PrivateData
			c.first = ConnEstablished
		case first != ConnUndefined:
			// The failure is the connection's first event, named as
			// librpma's rpma_conn_next_event names it: REJECTED,
			// UNREACHABLE, and CONNECT_ERROR as ConnLost.
			c.first = first
		default:
			c.Close()
			return nil, provider(err)
		}
	} else {
		if err := r.id.Accept(ctx, param); err != nil {
			c.Close()
			return nil, provider(err)
		}
		c.pdata = r.pdata
		c.first = ConnEstablished
	}
	return c, nil
}

// Close drops the request (librpma's rpma_conn_req_delete): an incoming
// one is rejected.
func (r *ConnReq) Close() error {
	if r == nil {
		return nil
	}
	var errs []error
	if !r.active && r.id != nil {
		r.id.Reject(nil)
	}
	errs = append(errs, r.ch.Close()) // destroys the ID and its QP
	errs = append(errs, r.rcq.close(), r.cq.close())
	if r.sharedCh != nil {
		errs = append(errs, r.sharedCh.Close())
	}
	return wrap(ErrProvider, errors.Join(errs...))
}

// Conn is an RDMA connection (rpma_conn).
type Conn struct {
	peer     *Peer
	ch       *cm.Channel
	id       *cm.ID
	q        *qp.QP
	cq, rcq  *CQ
	sharedCh *verbs.CompChannel
	srq      *SRQ
	raw      *mr.MR // flush target
	pdata    []byte
	life     *life   // ends the completion waits when the connection ends
	wait     waitCtx // Wait's context

	evMu  sync.Mutex
	first ConnEvent // delivered before the ID's events
	sent  bool

	// How flushes and atomic writes go out, fixed at creation (librpma
	// decides per QP when it creates it).
	nativeFlush, nativeAtomicWrite bool

	mu          sync.Mutex
	directWrite bool
	swr         [1]verbs.SendWR
	rwr         [1]verbs.RecvWR
	sge         [1]verbs.SGE
	inline      [8]byte
}

// NextEvent returns the connection's next event (rpma_conn_next_event).
func (c *Conn) NextEvent(ctx context.Context) (ConnEvent, error) {
	if c == nil {
		return ConnUndefined, ErrInval
	}
	c.evMu.Lock()
	if !c.sent {
		c.sent = true
		c.evMu.Unlock()
		return c.first, nil
	}
	c.evMu.Unlock()
	ev, err := c.id.Event(ctx)
	if err != nil {
		return ConnUndefined, provider(err)
	}
	return connEvent(ev.Type)
}

// PrivateData returns what the peer sent when connecting: the server sees
// the client's request (56 bytes), the client the server's accept (196
// bytes), zero-padded.
func (c *Conn) PrivateData() []byte { return c.pdata }

// ApplyRemotePeerCfg takes the remote peer's configuration into account
// (rpma_conn_apply_remote_peer_cfg): whether it supports direct write to
// PMem, which persistent flushes need.
func (c *Conn) ApplyRemotePeerCfg(cfg *PeerCfg) error {
	if c == nil || cfg == nil {
		return ErrInval
	}
	c.mu.Lock()
	c.directWrite = cfg.DirectWriteToPMem
	c.mu.Unlock()
	return nil
}

// QPNum returns the local QP number (rpma_conn_get_qp_num).
func (c *Conn) QPNum() uint32 { return c.q.QPN() }

// QP returns the connection's verbs QP.
func (c *Conn) QP() *qp.QP { return c.q }

// CQ returns the main CQ (rpma_conn_get_cq).
func (c *Conn) CQ() *CQ { return c.cq }

// RCQ returns the receive CQ, or nil (rpma_conn_get_rcq).
func (c *Conn) RCQ() *CQ { return c.rcq }

// ComplFD returns the shared completion channel's fd
// (rpma_conn_get_compl_fd), or ErrNotSharedChannel.
func (c *Conn) ComplFD() (int, error) {
	if c == nil {
		return -1, ErrInval
	}
	if c.sharedCh == nil {
		return -1, ErrNotSharedChannel
	}
	return c.sharedCh.FD(), nil
}

// Wait waits on the shared completion channel and returns the CQ that got
// a completion event and whether it is the receive CQ (rpma_conn_wait).
// The event is acknowledged and the CQ re-armed before Wait returns; take
// the completions with the CQ's GetWC. A wake-up with nothing to collect
// is normal (the event of a completion an earlier GetWC already took).
//
// Wait ends with the connection. Once the connection is over (the peer
// disconnected, our own Disconnect was answered, the device went away, or
// Close), a Wait that is blocked returns at once, and a later one does not
// block: each still returns a CQ that holds completions, and when neither
// does, fails with ErrNoCompletion wrapping why the connection ended
// (errors.Is(err, cm.ErrDisconnected) after a disconnect). A message the
// peer will never send, such as one a librpma peer flushed by
// disconnecting right after posting it, thus ends the wait for it instead
// of blocking it for ever (librpma's rpma_conn_wait blocks). The
// connection's end takes precedence over ctx's: a wait that both end
// reports the connection's.
//
// Wait from one goroutine at a time. It fails with ErrNotSharedChannel
// without a shared channel (ConnCfg.SharedChannel; use CQ.Wait), and with
// ErrNoCompletion wrapping ctx's error when ctx ends the wait.
func (c *Conn) Wait(ctx context.Context) (*CQ, bool, error) {
	if c == nil {
		return nil, false, ErrInval
	}
	if c.sharedCh == nil {
		return nil, false, ErrNotSharedChannel
	}
	var got *cq.CQ
	if !c.life.over() {
		var err error
		got, err = cq.WaitChannel(c.wait.with(ctx, c.life), c.sharedCh)
		if err != nil && !c.life.over() {
			return nil, false, wrap(ErrNoCompletion, err)
		}
	}
	if got == nil {
		// The connection is over: what its CQs hold, then the end.
		switch {
		case c.cq.cq.Pending():
			got = c.cq.cq
		case c.rcq != nil && c.rcq.cq.Pending():
			got = c.rcq.cq
		default:
			return nil, false, c.life.err()
		}
	}
	var which *CQ
	switch {
	case got == c.cq.cq:
		which = c.cq
	case c.rcq != nil && got == c.rcq.cq:
		which = c.rcq
	default:
		return nil, false, ErrUnknown
	}
	if err := which.cq.ReqNotify(false); err != nil {
		return nil, false, provider(err)
	}
	return which, which == c.rcq, nil
}

// Disconnect starts tearing the connection down (rpma_conn_disconnect);
// both sides then see ConnClosed. Operations posted before it go out
// first: it waits (up to 2 s) until the device has sent them, then moves
// the QP to the error state and disconnects. Without that wait, rxe on
// kernels that send from a workqueue (6.12; 6.1 sends in the post) would
// flush a SEND posted just before instead of delivering it, and a peer
// waiting for that message would wait forever (C librpma's
// rpma_conn_disconnect loses such a message there).
func (c *Conn) Disconnect() error {
	if c == nil {
		return ErrInval
	}
	// cm.ID.Disconnect first waits (bounded) for posted sends to leave.
	return wrap(ErrProvider, c.id.Disconnect())
}

// Close frees the connection (librpma's rpma_conn_delete). Disconnect
// first for an orderly shutdown.
func (c *Conn) Close() error {
	if c == nil {
		return nil
	}
	var errs []error
	errs = append(errs, c.ch.Close()) // the ID and its QP
	if c.raw != nil {
		errs = append(errs, c.raw.Close())
	}
	errs = append(errs, c.rcq.close(), c.cq.close())
	if c.sharedCh != nil {
		errs = append(errs, c.sharedCh.Close())
	}
	return wrap(ErrProvider, errors.Join(errs...))
}

// Port returns the port the endpoint listens on (useful after listening on
// port "0").
func (ep *Endpoint) Port() string {
	info, err := ep.id.Query()
	if err != nil {
		return ""
	}
	return strconv.Itoa(int(info.Src.Port()))
}
