package cm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/uverbs"
	"github.com/goverbs/goverbs/verbs"
)

// PortSpace is an rdma_cm port space: which transport an ID's QP uses.
// The names are rdma_cm's (RDMA_PS_TCP, RDMA_PS_UDP), after the IP
// protocols whose port numbers they mirror; no TCP or UDP is involved.
// What they select is the QP type: TCP is reliable connected (qp.RC)
// and UDP unreliable datagram (qp.UD).
type PortSpace uint16

// Port spaces.
const (
	TCP PortSpace = uverbs.RDMA_PS_TCP // reliable connected (qp.RC) QPs; Connect and Accept
	UDP PortSpace = uverbs.RDMA_PS_UDP // unreliable datagram (qp.UD) QPs; no connection, or a multicast join
)

func (ps PortSpace) datagram() bool { return ps == UDP || ps == uverbs.RDMA_PS_IPOIB }

func (ps PortSpace) qpType() qp.Type {
	if ps.datagram() {
		return qp.UD
	}
	return qp.RC
}

func (ps PortSpace) String() string {
	switch ps {
	case TCP:
		return "TCP"
	case UDP:
		return "UDP"
	}
	return "PortSpace(" + strconv.Itoa(int(ps)) + ")"
}

// ID is an rdma_cm identifier: the endpoint of one connection (or of a
// listener). Its events arrive through its Channel; Event returns them, and
// the synchronous helpers (ResolveAddr, Connect, Accept, …) consume the
// ones they wait for.
type ID struct {
	handle   uint32
	uid      uint64
	ps       PortSpace
	listener *ID

	// opMu is held for reading by every command on the ID's channel and
	// for writing by Migrate and Close, so that no command goes to the
	// file of a channel the ID is leaving or has left.
	opMu sync.RWMutex

	mu        sync.Mutex // guards ch and the fields below
	ch        *Channel
	queue     []Event
	notify    chan struct{}
	closed    bool
	delivered uint32
	dev       *verbs.Context
	devRef    bool // dev is cm's shared context: release it on Close
	port      uint8
	qp        *qp.QP
	req       ConnParam     // the connect request's parameters (passive IDs)
	done      chan struct{} // closed when the connection ends (Done); made on demand
	doneErr   error         // why it ended (Err); nil while it lasts
	mcs       []*mcGroup    // multicast groups joined (JoinMulticast)
}

// CreateID creates an ID in port space ps.
func (ch *Channel) CreateID(ps PortSpace) (*ID, error) {
	ch.mu.Lock()
	closed := ch.closed
	ch.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if ps != TCP && ps != UDP {
		return nil, fmt.Errorf("cm: create ID: unsupported port space %s", ps)
	}
	// The kernel queues no event for a uid of 0, so every ID gets one.
	uid, err := ch.reserveUID()
	if err != nil {
		return nil, fmt.Errorf("cm: create ID: %w", err)
	}
	var resp uverbs.UcmCreateIDResp
	req := uverbs.UcmCreateID{Uid: uid, Response: uverbs.Addr(unsafe.Pointer(&resp)), Ps: uint16(ps), Type: uint8(ps.qpType())}
	err = ch.raw(func(fd int) error {
		return uverbs.UcmaWrite(fd, "CREATE_ID", uverbs.RDMA_USER_CM_CMD_CREATE_ID, &req, unsafe.Pointer(&resp), unsafe.Sizeof(resp))
	})
	if err != nil {
		return nil, fmt.Errorf("cm: %w", err)
	}
	id := &ID{ch: ch, handle: resp.Id, uid: uid, ps: ps, notify: make(chan struct{}, 1)}
	ch.mu.Lock()
	if ch.closed {
		ch.mu.Unlock()
		id.destroy(ch)
		return nil, ErrClosed
	}
	ch.ids[uid] = id
	ch.mu.Unlock()
	return id, nil
}

// Channel returns the ID's event channel.
func (id *ID) Channel() *Channel {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.ch
}

// PortSpace returns the ID's port space.
func (id *ID) PortSpace() PortSpace { return id.ps }

// Listener returns the listening ID a connection request came in on, or nil.
func (id *ID) Listener() *ID { return id.listener }

func (id *ID) deliver(ev Event) {
	id.mu.Lock()
	id.queue = append(id.queue, ev)
	id.delivered++
	if ends(ev.Type) {
		id.endLocked(ev.Err())
	}
	id.mu.Unlock()
	select {
	case id.notify <- struct{}{}:
	default:
	}
}

// Event returns the ID's next event, waiting until one arrives or ctx
// ends.
func (id *ID) Event(ctx context.Context) (Event, error) {
	for {
		id.mu.Lock()
		if len(id.queue) > 0 {
			ev := id.queue[0]
			id.queue[0] = Event{}
			id.queue = id.queue[1:]
			id.mu.Unlock()
			return ev, nil
		}
		closed, ch := id.closed, id.ch
		id.mu.Unlock()
		if closed {
			return Event{}, ErrClosed
		}
		select {
		case <-id.notify:
		case <-ctx.Done():
			return Event{}, ctx.Err()
		case <-ch.done:
			id.mu.Lock()
			moved := id.ch != ch
			id.mu.Unlock()
			if !moved { // else the ID migrated away before its old channel closed
				return Event{}, ch.runErr
			}
		}
	}
}

// expect waits for the next event and checks it is want with success.
func (id *ID) expect(ctx context.Context, want EventType) (Event, error) {
	ev, err := id.Event(ctx)
	if err != nil {
		return ev, err
	}
	if ev.Type != want || ev.Status != 0 {
		if err := ev.Err(); err != nil {
			return ev, err
		}
		return ev, fmt.Errorf("got %s while waiting for %s", ev.Type, want)
	}
	return ev, nil
}

// ucma issues an rdma_cm command for id on its channel's fd.
func ucma[T any](id *ID, op string, cmd uint32, req *T, resp unsafe.Pointer, respLen uintptr) error {
	id.opMu.RLock()
	defer id.opMu.RUnlock()
	id.mu.Lock()
	closed, ch := id.closed, id.ch
	id.mu.Unlock()
	if closed {
		return ErrClosed
	}
	err := ch.raw(func(fd int) error { return uverbs.UcmaWrite(fd, op, cmd, req, resp, respLen) })
	if err != nil {
		return fmt.Errorf("cm: %w", err)
	}
	return nil
}

// sockaddr encodes an address as the kernel's sockaddr_storage.
func sockaddr(a netip.AddrPort) (uverbs.SockaddrStorage, uint16, error) {
	var ss uverbs.SockaddrStorage
	b := ss.Anon0[:]
	addr := a.Addr()
	switch {
	case addr.Is4():
		binary.NativeEndian.PutUint16(b[0:], unix.AF_INET)
		binary.BigEndian.PutUint16(b[2:], a.Port())
		v4 := addr.As4()
		copy(b[4:8], v4[:])
		return ss, unix.SizeofSockaddrInet4, nil
	case addr.Is6():
		binary.NativeEndian.PutUint16(b[0:], unix.AF_INET6)
		binary.BigEndian.PutUint16(b[2:], a.Port())
		v6 := addr.As16()
		copy(b[8:24], v6[:])
		if z := addr.Zone(); z != "" {
			if n, err := strconv.Atoi(z); err == nil {
				binary.NativeEndian.PutUint32(b[24:], uint32(n))
			}
		}
		return ss, unix.SizeofSockaddrInet6, nil
	}
	return ss, 0, fmt.Errorf("cm: address %v is neither IPv4 nor IPv6", a)
}

// addrPort decodes a sockaddr_storage (IPv4 or IPv6).
func addrPort(ss *uverbs.SockaddrStorage) netip.AddrPort {
	b := ss.Anon0[:]
	port := binary.BigEndian.Uint16(b[2:])
	switch binary.NativeEndian.Uint16(b[0:]) {
	case unix.AF_INET:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), port)
	case unix.AF_INET6:
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[8:24])), port)
	}
	return netip.AddrPort{}
}

// Bind binds the ID to a local address (port 0 picks one). Binding to a
// specific address also binds the ID to that address's RDMA device.
func (id *ID) Bind(addr netip.AddrPort) error {
	if err := id.check(); err != nil {
		return err
	}
	ss, size, err := sockaddr(addr)
	if err != nil {
		return err
	}
	req := uverbs.UcmBind{Id: id.handle, Size: size, Addr: ss}
	if err := ucma(id, "BIND", uverbs.RDMA_USER_CM_CMD_BIND, &req, nil, 0); err != nil {
		return fmt.Errorf("%w (bind %v)", err, addr)
	}
	return id.learnDevice()
}

// timeoutMS turns a context's deadline into the kernel's millisecond
// timeout (def when there is none).
func timeoutMS(ctx context.Context, def time.Duration) uint32 {
	d := def
	if dl, ok := ctx.Deadline(); ok {
		d = time.Until(dl)
	}
	return uint32(max(min(d.Milliseconds(), 1<<31-1), 1))
}

// ResolveAddr resolves dst to an RDMA device and port (binding the ID to
// src, or to a local address routed to dst when src is the zero value) and
// waits for the result. The kernel's timeout is ctx's deadline, or 2 s.
func (id *ID) ResolveAddr(ctx context.Context, src, dst netip.AddrPort) error {
	if err := id.check(); err != nil {
		return err
	}
	req := uverbs.UcmResolveAddr{Id: id.handle, Timeout_ms: timeoutMS(ctx, 2*time.Second)}
	var err error
	if src.IsValid() {
		if req.Src_addr, req.Src_size, err = sockaddr(src); err != nil {
			return err
		}
	}
	if req.Dst_addr, req.Dst_size, err = sockaddr(dst); err != nil {
		return err
	}
	if err := ucma(id, "RESOLVE_ADDR", uverbs.RDMA_USER_CM_CMD_RESOLVE_ADDR, &req, nil, 0); err != nil {
		return fmt.Errorf("%w (resolve %v)", err, dst)
	}
	if _, err := id.expect(ctx, EventAddrResolved); err != nil {
		return fmt.Errorf("cm: resolve address %v: %w", dst, err)
	}
	return id.learnDevice()
}

// ResolveRoute resolves the path to the address ResolveAddr found and
// waits for the result.
func (id *ID) ResolveRoute(ctx context.Context) error {
	req := uverbs.UcmResolveRoute{Id: id.handle, Ms: timeoutMS(ctx, 2*time.Second)}
	if err := ucma(id, "RESOLVE_ROUTE", uverbs.RDMA_USER_CM_CMD_RESOLVE_ROUTE, &req, nil, 0); err != nil {
		return err
	}
	if _, err := id.expect(ctx, EventRouteResolved); err != nil {
		return fmt.Errorf("cm: resolve route: %w", err)
	}
	return nil
}

// AddrInfo is what the kernel knows of an ID's addressing.
type AddrInfo struct {
	Src, Dst    netip.AddrPort
	NodeGUID    verbs.GUID // of the bound device (zero when unbound)
	DeviceIndex uint32
	Port        uint8
	Pkey        uint16
}

// Query returns the ID's addresses and device binding (QUERY ADDR).
func (id *ID) Query() (AddrInfo, error) {
	resp := new(uverbs.UcmQueryAddrResp)
	req := uverbs.UcmQuery{Response: uverbs.Addr(unsafe.Pointer(resp)), Id: id.handle, Option: uverbs.RDMA_USER_CM_QUERY_ADDR}
	if err := ucma(id, "QUERY", uverbs.RDMA_USER_CM_CMD_QUERY, &req, unsafe.Pointer(resp), unsafe.Sizeof(*resp)); err != nil {
		return AddrInfo{}, err
	}
	info := AddrInfo{Src: addrPort(&resp.Src_addr), Dst: addrPort(&resp.Dst_addr),
		DeviceIndex: resp.Ibdev_index, Port: resp.Port_num, Pkey: resp.Pkey}
	// node_guid is raw wire bytes (fact sheet §7.3).
	binary.NativeEndian.PutUint64(info.NodeGUID[:], resp.Node_guid)
	return info, nil
}

// learnDevice binds the ID to the verbs Context of the device the kernel
// chose, if it chose one.
func (id *ID) learnDevice() error {
	id.mu.Lock()
	known := id.dev != nil
	id.mu.Unlock()
	if known {
		return nil
	}
	info, err := id.Query()
	if err != nil {
		return err
	}
	if info.NodeGUID == (verbs.GUID{}) {
		return nil // wildcard bind: no device yet
	}
	id.mu.Lock()
	ch := id.ch
	id.mu.Unlock()
	dev, owned, err := ch.device(info.DeviceIndex)
	if err != nil {
		return err
	}
	id.mu.Lock()
	id.dev, id.devRef, id.port = dev, owned, info.Port
	id.mu.Unlock()
	return nil
}

// Context returns the verbs Context of the device the ID is bound to (nil
// before Bind to a device address, ResolveAddr, or a connect request).
// Create the PD, CQs and QP of the connection on it.
func (id *ID) Context() *verbs.Context {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.dev
}

// Port returns the device port the ID is bound to.
func (id *ID) Port() uint8 {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.port
}

// Listen starts listening for connection requests; each arrives as an
// EventConnectRequest on this ID carrying a new ID (see GetRequest).
// backlog bounds the requests not yet taken with GetRequest; the kernel
// (rdma_ucm) uses its maximum, the sysctl net.rdma_ucm.max_backlog (1024
// unless changed), for a backlog <= 0 or above that maximum.
func (id *ID) Listen(backlog int) error {
	req := uverbs.UcmListen{Id: id.handle, Backlog: uint32(max(backlog, 0))}
	return ucma(id, "LISTEN", uverbs.RDMA_USER_CM_CMD_LISTEN, &req, nil, 0)
}

// GetRequest waits for the next connection request on a listening ID and
// returns the new ID with the request event (the peer's parameters and
// private data). The new ID must be accepted, rejected or closed.
func (id *ID) GetRequest(ctx context.Context) (*ID, Event, error) {
	for {
		ev, err := id.Event(ctx)
		if err != nil {
			return nil, ev, err
		}
		if ev.Type != EventConnectRequest {
			if err := ev.Err(); err != nil {
				return nil, ev, fmt.Errorf("cm: waiting for a connection request: %w", err)
			}
			continue
		}
		if err := ev.ID.learnDevice(); err != nil {
			ev.ID.Close()
			return nil, ev, err
		}
		ev.ID.mu.Lock()
		ev.ID.req = ev.Conn
		ev.ID.mu.Unlock()
		return ev.ID, ev, nil
	}
}

// CreateQP creates the ID's QP on the ID's device (RC for TCP, UD for UDP;
// opts.Type is set accordingly) and moves it to INIT with the attributes
// the connection manager dictates; a UD QP goes on to RTS, since it needs
// no peer. The ID owns the QP: Close destroys it.
func (id *ID) CreateQP(pd *verbs.PD, opts qp.Options) (*qp.QP, error) {
	if err := id.check(); err != nil {
		return nil, err
	}
	if pd == nil {
		return nil, fmt.Errorf("cm: create QP: nil PD: %w", unix.EINVAL)
	}
	dev := id.Context()
	if dev == nil {
		return nil, errors.New("cm: create QP: the ID is not bound to a device yet")
	}
	if pd.Context() != dev {
		return nil, errors.New("cm: create QP: the PD belongs to another device context than the ID's (use ID.Context)")
	}
	opts.Type = id.ps.qpType()
	q, err := qp.New(pd, opts)
	if err != nil {
		return nil, err
	}
	id.mu.Lock()
	id.qp = q
	id.mu.Unlock()
	err = id.modifyQP(qp.Init, nil)
	if err == nil && id.ps.datagram() {
		// A UD QP needs no peer: ready it now, as librdmacm does.
		if err = q.ToRTR(qp.RTRAttr{}); err == nil {
			err = q.ToRTS(qp.RTSAttr{})
		}
	}
	if err != nil {
		id.mu.Lock()
		id.qp = nil
		id.mu.Unlock()
		q.Close()
		return nil, err
	}
	return q, nil
}

// QP returns the QP created with CreateQP, or nil.
func (id *ID) QP() *qp.QP {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.qp
}

// InitQPAttr asks the connection manager for the attributes that move the
// ID's QP to state (INIT_QP_ATTR).
func (id *ID) InitQPAttr(state qp.State) (*qp.Attr, qp.AttrMask, error) {
	resp := new(uverbs.QpAttr)
	req := uverbs.UcmInitQpAttr{Response: uverbs.Addr(unsafe.Pointer(resp)), Id: id.handle, State: uint32(state)}
	if err := ucma(id, "INIT_QP_ATTR", uverbs.RDMA_USER_CM_CMD_INIT_QP_ATTR, &req, unsafe.Pointer(resp), unsafe.Sizeof(*resp)); err != nil {
		return nil, 0, err
	}
	a := &qp.Attr{
		State: qp.State(resp.Qp_state), CurState: qp.State(resp.Cur_qp_state), PathMTU: verbs.MTU(resp.Path_mtu),
		QKey: resp.Qkey, RQPSN: resp.Rq_psn, SQPSN: resp.Sq_psn, DestQPN: resp.Dest_qp_num,
		PkeyIndex: resp.Pkey_index, Port: resp.Port_num, Path: ahAttr(&resp.Ah_attr),
		Timeout: resp.Timeout, RetryCnt: resp.Retry_cnt, RNRRetry: resp.Rnr_retry, MinRNRTimer: resp.Min_rnr_timer,
		MaxRDAtomic: resp.Max_rd_atomic, MaxDestRDAtomic: resp.Max_dest_rd_atomic,
	}
	a.Access = mr.Access(resp.Qp_access_flags)
	return a, qp.AttrMask(resp.Qp_attr_mask), nil
}

// modifyQP moves the ID's QP to state with the kernel's attributes,
// applied with overrides (nil for none).
func (id *ID) modifyQP(state qp.State, override func(*qp.Attr, *qp.AttrMask)) error {
	q := id.QP()
	if q == nil {
		return nil
	}
	attr, mask, err := id.InitQPAttr(state)
	if err != nil {
		return fmt.Errorf("%w (the QP's %s attributes)", err, state)
	}
	if override != nil {
		override(attr, &mask)
	}
	return q.Modify(attr, mask)
}

// readyQP moves the ID's QP to RTS once the connection manager knows the
// peer. Like librdmacm it first re-applies the INIT attributes: before a
// connection exists the kernel grants no remote access, and only now does
// it know what to grant.
func (id *ID) readyQP(p *ConnParam) error {
	if err := id.modifyQP(qp.Init, nil); err != nil {
		return err
	}
	if err := id.modifyQP(qp.RTR, func(a *qp.Attr, m *qp.AttrMask) {
		if p.ResponderResources != 0 {
			a.MaxDestRDAtomic = p.ResponderResources
		}
		// The kernel's CM hands out min_rnr_timer 0, 655.36 ms, and
		// rdma_ucm has no option to change it (rdma_set_min_rnr_timer
		// is for kernel users): override it here, where librdmacm
		// programs would have to modify the QP themselves.
		if *m&qp.MaskMinRNRTimer != 0 {
			a.MinRNRTimer = qp.RNRTimerCode(p.MinRNRTimer)
		}
	}); err != nil {
		return err
	}
	return id.modifyQP(qp.RTS, func(a *qp.Attr, m *qp.AttrMask) {
		if p.InitiatorDepth != 0 {
			a.MaxRDAtomic = p.InitiatorDepth
		}
	})
}

// MaxRDAtomic in ConnParam.ResponderResources or InitiatorDepth asks for
// the device's maximum (librdmacm's RDMA_MAX_RESP_RES and
// RDMA_MAX_INIT_DEPTH, which librpma passes).
const MaxRDAtomic = 255

// defaults fills the zero fields of p the way librdmacm treats a NULL
// conn_param (unless p.Exact): read depths from the peer's request when
// accepting, the device's maximum when connecting; 7 retries and
// infinite RNR retries. It then caps the read depths so filled, and
// MaxRDAtomic, at what the device supports, as librdmacm does. A depth
// the caller gave explicitly that exceeds the device's maximum fails with
// EINVAL on a TCP (RC) ID, as librdmacm's ucma_valid_param refuses it. A
// zero MinRNRTimer becomes qp.DefaultMinRNRTimer, Exact or not (it is not
// sent to the peer).
func (id *ID) defaults(p *ConnParam, accept bool) error {
	// Depths the caller chose: neither left zero for defaults nor
	// MaxRDAtomic ("the device's maximum").
	givenResp := p.ResponderResources != MaxRDAtomic && (p.Exact || p.ResponderResources != 0)
	givenInit := p.InitiatorDepth != MaxRDAtomic && (p.Exact || p.InitiatorDepth != 0)
	if p.MinRNRTimer == 0 {
		p.MinRNRTimer = qp.DefaultMinRNRTimer
	}
	if p.MinRNRTimer < 0 || p.MinRNRTimer > qp.RNRTimerDelay(0) {
		return fmt.Errorf("cm: MinRNRTimer %v: the IB table runs from 10µs to %v: %w", p.MinRNRTimer, qp.RNRTimerDelay(0), unix.EINVAL)
	}
	if !p.Exact {
		if p.RetryCount == 0 {
			p.RetryCount = 7
		}
		if p.RNRRetryCount == 0 {
			p.RNRRetryCount = 7
		}
		id.mu.Lock()
		req := id.req
		id.mu.Unlock()
		if p.ResponderResources == 0 {
			p.ResponderResources = MaxRDAtomic
			if accept {
				p.ResponderResources = req.ResponderResources
			}
		}
		if p.InitiatorDepth == 0 {
			p.InitiatorDepth = MaxRDAtomic
			if accept {
				p.InitiatorDepth = req.InitiatorDepth
			}
		}
	}
	if p.ResponderResources == 0 && p.InitiatorDepth == 0 {
		return nil
	}
	dev := id.Context()
	if dev == nil {
		return nil
	}
	a, err := dev.QueryDevice()
	if err != nil {
		return err
	}
	if id.ps == TCP {
		if givenResp && int(p.ResponderResources) > a.MaxQPRDAtomic {
			return fmt.Errorf("cm: %d responder resources, above the device's %d: %w", p.ResponderResources, a.MaxQPRDAtomic, unix.EINVAL)
		}
		if givenInit && int(p.InitiatorDepth) > a.MaxQPInitRDAtomic {
			return fmt.Errorf("cm: initiator depth %d, above the device's %d: %w", p.InitiatorDepth, a.MaxQPInitRDAtomic, unix.EINVAL)
		}
	}
	p.ResponderResources = uint8(min(int(p.ResponderResources), a.MaxQPRDAtomic, 255))
	p.InitiatorDepth = uint8(min(int(p.InitiatorDepth), a.MaxQPInitRDAtomic, 255))
	return nil
}

func connParam(p *ConnParam, qpn uint32, srq bool) (uverbs.UcmConnParam, error) {
	var c uverbs.UcmConnParam
	if len(p.PrivateData) > len(c.Private_data) {
		return c, fmt.Errorf("cm: %d bytes of private data", len(p.PrivateData))
	}
	copy(c.Private_data[:], p.PrivateData)
	c.Private_data_len = uint8(len(p.PrivateData))
	c.Qp_num = qpn
	if p.QPNum != 0 {
		c.Qp_num = p.QPNum
	}
	c.Qkey = p.QKey
	c.Responder_resources, c.Initiator_depth = p.ResponderResources, p.InitiatorDepth
	c.Flow_control, c.Retry_count, c.Rnr_retry_count = p.FlowControl, p.RetryCount, p.RNRRetryCount
	if srq || p.SRQ {
		c.Srq = 1
	}
	c.Valid = 1
	return c, nil
}

func (id *ID) qpInfo() (uint32, bool) {
	q := id.QP()
	if q == nil {
		return 0, false
	}
	return q.QPN(), q.SRQ() != nil
}

// Connect sends a connection request to the peer resolved with
// ResolveAddr and ResolveRoute, and waits until the connection is
// established. For TCP IDs it then moves the QP to RTR and RTS and sends
// the CM's RTU; the returned event is the peer's response (its private
// data in Conn). For UDP IDs the returned event's UD names the peer's QP,
// Q_Key and address.
func (id *ID) Connect(ctx context.Context, p ConnParam) (Event, error) {
	if len(p.PrivateData) > MaxConnectPrivateData && !id.ps.datagram() {
		return Event{}, fmt.Errorf("cm: connect: %d bytes of private data, at most %d", len(p.PrivateData), MaxConnectPrivateData)
	}
	if err := id.defaults(&p, false); err != nil {
		return Event{}, err
	}
	qpn, srq := id.qpInfo()
	cp, err := connParam(&p, qpn, srq)
	if err != nil {
		return Event{}, err
	}
	req := uverbs.UcmConnect{Param: cp, Id: id.handle}
	if err := ucma(id, "CONNECT", uverbs.RDMA_USER_CM_CMD_CONNECT, &req, nil, 0); err != nil {
		return Event{}, err
	}
	if id.ps.datagram() {
		ev, err := id.expect(ctx, EventEstablished)
		if err != nil {
			return ev, fmt.Errorf("cm: connect: %w", err)
		}
		return ev, nil
	}
	if id.iWARP() {
		// The kernel (iw_cm and the provider) moves the QP to RTS as
		// the connection is established: no CONNECT_RESPONSE, no RTU.
		ev, err := id.expect(ctx, EventEstablished)
		if err != nil {
			return ev, fmt.Errorf("cm: connect: %w", err)
		}
		return ev, id.syncQP()
	}
	ev, err := id.expect(ctx, EventConnectResponse)
	if err != nil {
		return ev, fmt.Errorf("cm: connect: %w", err)
	}
	if err := id.readyQP(&p); err != nil {
		id.reject(nil)
		return ev, err
	}
	// ACCEPT on the active side sends the RTU (conn_param not valid).
	acc := uverbs.UcmAccept{Uid: id.uid, Id: id.handle}
	if err := ucma(id, "ACCEPT", uverbs.RDMA_USER_CM_CMD_ACCEPT, &acc, nil, 0); err != nil {
		return ev, err
	}
	ev.Type = EventEstablished
	return ev, nil
}

// Accept accepts a connection request on an ID from GetRequest, moving its
// QP to RTR and RTS first, and waits until the connection is established
// (TCP). A UDP accept answers the request and returns at once.
func (id *ID) Accept(ctx context.Context, p ConnParam) error {
	if len(p.PrivateData) > MaxAcceptPrivateData {
		return fmt.Errorf("cm: accept: %d bytes of private data, at most %d", len(p.PrivateData), MaxAcceptPrivateData)
	}
	if err := id.defaults(&p, true); err != nil {
		return err
	}
	if !id.ps.datagram() {
		if err := id.readyQP(&p); err != nil {
			return err
		}
	}
	qpn, srq := id.qpInfo()
	cp, err := connParam(&p, qpn, srq)
	if err != nil {
		return err
	}
	if id.ps.datagram() && cp.Qkey == 0 {
		if q := id.QP(); q != nil {
			if a, err := q.Query(); err == nil {
				cp.Qkey = a.QKey
			}
		}
	}
	// The uid set here is what the kernel tags this ID's events with.
	req := uverbs.UcmAccept{Uid: id.uid, Param: cp, Id: id.handle}
	if err := ucma(id, "ACCEPT", uverbs.RDMA_USER_CM_CMD_ACCEPT, &req, nil, 0); err != nil {
		if q := id.QP(); q != nil {
			q.ToError()
		}
		return err
	}
	if id.ps.datagram() {
		return nil
	}
	if _, err := id.expect(ctx, EventEstablished); err != nil {
		return fmt.Errorf("cm: accept: %w", err)
	}
	if id.iWARP() {
		return id.syncQP()
	}
	return nil
}

// iWARP reports whether the ID's device is an iWARP device (node type
// RNIC), whose QPs the kernel moves to RTS when the connection is
// established.
func (id *ID) iWARP() bool {
	dev := id.Context()
	return dev != nil && dev.Device().NodeType.Transport() == verbs.TransportIWARP
}

// syncQP adopts the QP state the kernel set (iWARP: RTS once
// established; qp.QP.SyncEstablished).
func (id *ID) syncQP() error {
	q := id.QP()
	if q == nil {
		return nil
	}
	if _, err := q.SyncEstablished(); err != nil {
		return fmt.Errorf("cm: QP state after connecting: %w", err)
	}
	return nil
}

// Reject refuses a connection request, sending privateData (at most 148
// bytes) to the peer, which sees EventRejected with reason 28
// (consumer-defined).
func (id *ID) Reject(privateData []byte) error {
	if len(privateData) > MaxRejectPrivateData {
		return fmt.Errorf("cm: reject: %d bytes of private data, at most %d", len(privateData), MaxRejectPrivateData)
	}
	return id.reject(privateData)
}

func (id *ID) reject(privateData []byte) error {
	req := uverbs.UcmReject{Id: id.handle, Data_len: uint8(len(privateData))}
	copy(req.Data[:], privateData)
	return ucma(id, "REJECT", uverbs.RDMA_USER_CM_CMD_REJECT, &req, nil, 0)
}

// Disconnect tears the connection down without waiting for the peer: it
// waits (up to 2 s) until the device has sent the send work requests
// already posted, moves the QP to the error state (InfiniBand and RoCE;
// SQD on iWARP), which flushes what is still outstanding, and sends the
// CM's DREQ. The peer sees EventDisconnected and answers with its own
// DisconnectContext, Disconnect or Close; then this side sees
// EventDisconnected too, and Done is closed. DisconnectContext also waits
// for that, and is the one to answer a peer's disconnect with.
func (id *ID) Disconnect() error {
	ctx, cancel := context.WithTimeout(context.Background(), sendDrainTimeout)
	defer cancel()
	return id.disconnect(ctx)
}

// disconnect is Disconnect with drain bounding the wait for posted sends.
// After a disconnect has ended the connection, a QP that no longer takes
// the move (iWARP's, which the peer's close took out of RTS) is no error:
// the reply to the peer still goes out.
func (id *ID) disconnect(drain context.Context) error {
	if q := id.QP(); q != nil {
		// Sends posted just before may not have left yet: 6.12's rxe
		// transmits from a workqueue after the doorbell returns, and the
		// QP's move to ERR below would flush them (docs/kernels.md, 1).
		// Best effort, bounded: a dead peer must not hold Disconnect.
		_ = q.WaitSent(drain)
		var err error
		if dev := id.Context(); dev != nil && dev.Device().NodeType.Transport() == verbs.TransportIWARP {
			err = q.Modify(&qp.Attr{State: qp.SQD}, qp.MaskState)
		} else {
			err = q.ToError()
		}
		if err != nil && !id.disconnected() {
			return fmt.Errorf("cm: disconnect: %w", err)
		}
	}
	req := uverbs.UcmDisconnect{Id: id.handle}
	return ucma(id, "DISCONNECT", uverbs.RDMA_USER_CM_CMD_DISCONNECT, &req, nil, 0)
}

// disconnected reports whether the ID's connection ended in a disconnect.
func (id *ID) disconnected() bool {
	id.mu.Lock()
	defer id.mu.Unlock()
	return errors.Is(id.doneErr, ErrDisconnected)
}

// sendDrainTimeout bounds Disconnect's wait for posted sends to leave.
const sendDrainTimeout = 2 * time.Second

// Notify forwards a QP event (verbs.EventCommEst) to the connection
// manager.
func (id *ID) Notify(ev verbs.EventType) error {
	req := uverbs.UcmNotify{Id: id.handle, Event: uint32(ev)}
	return ucma(id, "NOTIFY", uverbs.RDMA_USER_CM_CMD_NOTIFY, &req, nil, 0)
}

// Options of SetOption (level RDMA_OPTION_ID).
const (
	OptionTOS        = uverbs.RDMA_OPTION_ID_TOS         // u8 type of service
	OptionReuseAddr  = uverbs.RDMA_OPTION_ID_REUSEADDR   // int, boolean
	OptionAFOnly     = uverbs.RDMA_OPTION_ID_AFONLY      // int, boolean
	OptionACKTimeout = uverbs.RDMA_OPTION_ID_ACK_TIMEOUT // u8, 4.096 µs × 2^n
)

// SetOption sets an ID option (level RDMA_OPTION_ID) to val, its raw
// value as the kernel expects it.
func (id *ID) SetOption(name int, val []byte) error {
	if err := id.check(); err != nil {
		return err
	}
	if len(val) == 0 {
		return errors.New("cm: set option: empty value")
	}
	v := append([]byte(nil), val...)
	req := uverbs.UcmSetOption{Optval: uverbs.Addr(unsafe.Pointer(&v[0])), Id: id.handle,
		Level: uverbs.RDMA_OPTION_ID, Optname: uint32(name), Optlen: uint32(len(v))}
	return ucma(id, "SET_OPTION", uverbs.RDMA_USER_CM_CMD_SET_OPTION, &req, unsafe.Pointer(&v[0]), 0)
}

// SetReuseAddr lets the ID bind to an address still in use by IDs in
// time-wait.
func (id *ID) SetReuseAddr(on bool) error {
	var v [4]byte
	if on {
		binary.NativeEndian.PutUint32(v[:], 1)
	}
	return id.SetOption(OptionReuseAddr, v[:])
}

// SetTOS sets the type of service of the ID's traffic.
func (id *ID) SetTOS(tos uint8) error { return id.SetOption(OptionTOS, []byte{tos}) }

// Migrate moves the ID, with its queued events, to another channel.
// Commands on the ID wait for it; Close of the ID too.
func (id *ID) Migrate(to *Channel) error {
	id.opMu.Lock()
	defer id.opMu.Unlock()
	id.mu.Lock()
	closed, from := id.closed, id.ch
	id.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if to == nil {
		return fmt.Errorf("cm: migrate to a nil channel: %w", unix.EINVAL)
	}
	if to == from {
		return nil
	}
	// While from's reader is kept out (evMu), an event it took before the
	// move has been delivered, and none of the ID's can reach it after.
	from.evMu.Lock()
	defer from.evMu.Unlock()
	// Register the ID with the new channel first: its reader may see the
	// ID's next event as soon as the kernel has moved it.
	to.mu.Lock()
	if to.closed {
		to.mu.Unlock()
		return ErrClosed
	}
	to.ids[id.uid] = id
	id.mu.Lock()
	mcs := append([]*mcGroup(nil), id.mcs...)
	id.mu.Unlock()
	for _, m := range mcs {
		to.mcs[m.uid] = m
	}
	to.mu.Unlock()
	var resp uverbs.UcmMigrateResp
	// The command goes to the new file and names the old one: both must
	// be open for its whole duration, and a failure of either (a closed
	// channel among them) is Migrate's.
	err := from.raw(func(oldfd int) error {
		req := uverbs.UcmMigrateID{Response: uverbs.Addr(unsafe.Pointer(&resp)), Id: id.handle, Fd: uint32(oldfd)}
		return to.raw(func(newfd int) error {
			return uverbs.UcmaWrite(newfd, "MIGRATE_ID", uverbs.RDMA_USER_CM_CMD_MIGRATE_ID, &req, unsafe.Pointer(&resp), unsafe.Sizeof(resp))
		})
	})
	if err != nil {
		to.mu.Lock()
		delete(to.ids, id.uid)
		for _, m := range mcs {
			delete(to.mcs, m.uid)
		}
		to.mu.Unlock()
		return fmt.Errorf("cm: migrate: %w", err)
	}
	from.mu.Lock()
	delete(from.ids, id.uid)
	for _, m := range mcs {
		delete(from.mcs, m.uid)
	}
	from.mu.Unlock()
	// The kernel moved the ID's pending events to the new file without
	// waking its readers: make the new channel's reader look.
	to.fd.Kick()
	id.mu.Lock()
	id.ch = to
	id.mu.Unlock()
	return nil
}

// destroy destroys the kernel's ID through ch, the ID's channel.
func (id *ID) destroy(ch *Channel) (uint32, error) {
	var resp uverbs.UcmDestroyIDResp
	req := uverbs.UcmDestroyID{Response: uverbs.Addr(unsafe.Pointer(&resp)), Id: id.handle}
	err := ch.raw(func(fd int) error {
		return uverbs.UcmaWrite(fd, "DESTROY_ID", uverbs.RDMA_USER_CM_CMD_DESTROY_ID, &req, unsafe.Pointer(&resp), unsafe.Sizeof(resp))
	})
	return resp.Reported, err
}

// check returns ErrClosed once Close has begun, for the operations that
// look at their arguments before they reach the kernel.
func (id *ID) check() error {
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.closed {
		return ErrClosed
	}
	return nil
}

// Close destroys the ID and the QP CreateQP made for it, and drops the
// events still queued for it. Done is closed; Err returns ErrClosed, or
// the reason the connection had ended before. Close does not wait for the
// peer. The QP goes first (work requests still queued on it complete
// nowhere); then the kernel's connection manager, destroying the ID,
// sends the peer a disconnect request if the connection is established
// (the peer sees EventDisconnected), rejects a connection request the ID
// received and did not accept (InfiniBand and RoCE: the peer sees
// EventRejected, reason 28) and withdraws one it sent that is still
// unanswered. A listening ID stops listening; the IDs its requests made
// live on. A device context cm opened for the ID is closed with the last
// ID that uses it, and with it everything created on it (the PD and CQs
// of a NewQueues among them). Call DisconnectContext first to let the
// sends already posted leave and the peer answer.
func (id *ID) Close() error {
	id.opMu.Lock()
	defer id.opMu.Unlock()
	id.mu.Lock()
	if id.closed {
		id.mu.Unlock()
		return nil
	}
	id.closed = true
	q, ch := id.qp, id.ch
	id.qp = nil
	id.queue = nil
	id.endLocked(ErrClosed)
	id.mu.Unlock()
	var errs []error
	if q != nil {
		errs = append(errs, q.Close())
	}
	if _, err := id.destroy(ch); err != nil {
		errs = append(errs, fmt.Errorf("cm: %w", err))
	}
	id.mu.Lock()
	dev, ref := id.dev, id.devRef
	id.devRef = false
	id.mu.Unlock()
	if ref {
		errs = append(errs, releaseDevice(dev))
	}
	// Destroying the ID left its multicast groups (the kernel's
	// ucma_destroy_private_ctx); the QP, destroyed first, was detached.
	id.mu.Lock()
	mcs := id.mcs
	id.mcs = nil
	id.mu.Unlock()
	ch.mu.Lock()
	delete(ch.ids, id.uid)
	for _, m := range mcs {
		delete(ch.mcs, m.uid)
	}
	ch.mu.Unlock()
	select {
	case id.notify <- struct{}{}: // wake a waiter
	default:
	}
	return errors.Join(errs...)
}
