// Package cmcommon is what goverbs' ports of librdmacm's example programs
// (rping, udaddy, ucmatose; rdma-core 44's librdmacm/examples) share, as
// their common.c does: the C tools' getopt(3), address lookups,
// perror-style messages and exit statuses, rdma_accept's default
// parameters, ibv_create_ah_from_wc, and the "test" of cmatose.c and
// udaddy.c, which are one program twice: N connections ("nodes"), each
// with a PD, CQs, a QP and one message buffer that every send and receive
// uses (Test).
//
// The C programs drive all connections from one event loop; here each
// connection goes through the connection manager's steps in turn (the
// cm package's ResolveAddr, Connect and Accept wait for their events).
// The peer cannot tell: the messages on the wire are the same, and so is
// what is printed.
package cmcommon

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/goverbs/goverbs/cm"
	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/verbs"
	"golang.org/x/sys/unix"
)

// Out serializes the writes of several goroutines to one writer, as
// stdio's locking does for the C tools' threads.
type Out struct {
	mu sync.Mutex
	W  io.Writer // where to
}

// Printf prints to the writer, one goroutine at a time.
func (o *Out) Printf(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Fprintf(o.W, format, args...)
}

// Opt is one option getopt(3) returned: the option character, or '?'
// for an unknown option or a missing argument (then bad is the offending
// character and missing tells which).
type Opt struct {
	Opt     byte
	Arg     string
	Bad     byte
	Missing bool
}

// Getopt parses args like glibc's getopt(3) with optstring: clustered
// short options ("-vV"), arguments attached ("-C3") or separate ("-C 3"),
// "--" ending the options, and GNU's permutation (options may follow
// operands). It returns the options in order and the operands.
func Getopt(args []string, optstring string) (opts []Opt, operands []string) {
	takesArg := func(c byte) (known, arg bool) {
		if c == ':' {
			return false, false
		}
		i := strings.IndexByte(optstring, c)
		if i < 0 {
			return false, false
		}
		return true, i+1 < len(optstring) && optstring[i+1] == ':'
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			operands = append(operands, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			operands = append(operands, a)
			continue
		}
		for j := 1; j < len(a); j++ {
			c := a[j]
			known, hasArg := takesArg(c)
			if !known {
				opts = append(opts, Opt{Opt: '?', Bad: c})
				continue
			}
			if !hasArg {
				opts = append(opts, Opt{Opt: c})
				continue
			}
			switch {
			case j+1 < len(a):
				opts = append(opts, Opt{Opt: c, Arg: a[j+1:]})
			case i+1 < len(args):
				i++
				opts = append(opts, Opt{Opt: c, Arg: args[i]})
			default:
				opts = append(opts, Opt{Opt: '?', Bad: c, Missing: true})
			}
			break // the rest of a was the argument
		}
	}
	return opts, operands
}

// GetoptError prints what glibc's getopt prints (opterr set) for a bad
// option.
func GetoptError(w *Out, prog string, o Opt) {
	if o.Missing {
		w.Printf("%s: option requires an argument -- '%c'\n", prog, o.Bad)
	} else {
		w.Printf("%s: invalid option -- '%c'\n", prog, o.Bad)
	}
}

// Atoi is a strict atoi: a decimal int, or an error.
func Atoi(s string) (int, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("invalid number %q", s)
	}
	return int(n), nil
}

// ParsePort parses a port number (or a service name, as getaddrinfo
// would).
func ParsePort(s string) (uint16, error) {
	if n, err := strconv.ParseUint(s, 10, 16); err == nil {
		return uint16(n), nil
	}
	if s != "" && strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' }) >= 0 {
		if p, err := net.LookupPort("tcp", s); err == nil {
			return uint16(p), nil
		}
	}
	return 0, fmt.Errorf("invalid port %q", s)
}

// Lookup resolves a host name or an IP address literal to one address,
// as getaddrinfo's first answer would (IPv4 preferred).
func Lookup(host string) (netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap(), nil
	}
	if host == "" {
		return netip.Addr{}, errors.New("Name or service not known")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		var dnsErr *net.DNSError
		if errors.As(err, &dnsErr) && !dnsErr.IsNotFound {
			return netip.Addr{}, errors.New("Temporary failure in name resolution")
		}
		return netip.Addr{}, errors.New("Name or service not known")
	}
	for _, a := range addrs {
		if a.Unmap().Is4() {
			return a.Unmap(), nil
		}
	}
	return addrs[0], nil
}

// Strerror is strerror(3)'s text for the errno inside err, or err's own
// text.
func Strerror(err error) string {
	var errno unix.Errno
	if errors.As(err, &errno) {
		s := errno.Error()
		if s != "" {
			return strings.ToUpper(s[:1]) + s[1:]
		}
	}
	if errors.Is(err, context.Canceled) {
		return "Interrupted"
	}
	return err.Error()
}

// EventError returns the failure event inside err, if any.
func EventError(err error) (*cm.EventError, bool) {
	var ee *cm.EventError
	if errors.As(err, &ee) {
		return ee, true
	}
	return nil, false
}

// Exit turns a C tool's return value into its exit status (the low
// byte), keeping failures non-zero.
func Exit(ret int) int {
	if ret == 0 {
		return 0
	}
	if s := ret & 0xff; s != 0 {
		return s
	}
	return 1
}

// AcceptParam is what rdma_accept(id, NULL) accepts with: the RDMA read
// depths the request asked for, capped by the device, and 7 retries.
func AcceptParam(id *cm.ID, req cm.Event) cm.ConnParam {
	p := cm.ConnParam{ResponderResources: req.Conn.ResponderResources, InitiatorDepth: req.Conn.InitiatorDepth,
		RetryCount: 7, RNRRetryCount: 7}
	if dev := id.Context(); dev != nil {
		if a, err := dev.QueryDevice(); err == nil {
			p.ResponderResources = uint8(min(int(p.ResponderResources), a.MaxQPRDAtomic))
			p.InitiatorDepth = uint8(min(int(p.InitiatorDepth), a.MaxQPInitRDAtomic))
		}
	}
	return p
}

// GRHSize is the size of the global route header a UD receive buffer
// starts with (struct ibv_grh).
const GRHSize = 40

// AHFromWC does what ibv_init_ah_from_wc does: the address handle
// attributes that answer the sender of a UD receive completion, from the
// completion and the GRH at the start of its buffer. On RoCEv2 over IPv4
// the last 20 bytes of the GRH hold the packet's IPv4 header.
func AHFromWC(dev *verbs.Context, port uint8, wc *verbs.WorkCompletion, grh []byte) (verbs.AHAttr, error) {
	var a verbs.AHAttr
	if len(grh) < GRHSize {
		return a, errors.New("short GRH")
	}
	flow := binary.BigEndian.Uint32(grh[0:4])
	a.GRH.FlowLabel = flow & 0xfffff
	a.DLID = wc.SLID
	a.SL = wc.SL
	a.SrcPathBits = wc.DLIDPathBits
	a.Port = port
	if wc.Flags&verbs.WCGRH == 0 {
		return a, nil
	}
	a.IsGlobal = true
	ip4 := grh[20:40]
	v4mapped := func(b []byte) verbs.GID {
		var g verbs.GID
		g[10], g[11] = 0xff, 0xff
		copy(g[12:], b)
		return g
	}
	switch GRHVersion(grh) {
	case 4:
		if ip4[16]&0xf0 == 0xe0 {
			return a, errors.New("multicast destination")
		}
		idx, err := FindGID(dev, port, v4mapped(ip4[16:20]), verbs.GIDTypeRoCEv2)
		if err != nil {
			return a, err
		}
		a.GRH.DGID = v4mapped(ip4[12:16])
		a.GRH.SGIDIndex = uint8(idx)
		a.GRH.HopLimit = ip4[8]
		a.GRH.TrafficClass = ip4[1]
	case 6:
		var sgid, dgid verbs.GID
		copy(sgid[:], grh[8:24])
		copy(dgid[:], grh[24:40])
		if dgid[0] == 0xff {
			return a, errors.New("multicast destination")
		}
		var typ verbs.GIDType
		switch grh[6] {
		case unix.IPPROTO_UDP:
			typ = verbs.GIDTypeRoCEv2
		case 0x1b:
			typ = verbs.GIDTypeRoCEv1
		default:
			return a, errors.New("unknown next header in GRH")
		}
		idx, err := FindGID(dev, port, dgid, typ)
		if err != nil {
			return a, err
		}
		a.GRH.DGID = sgid
		a.GRH.SGIDIndex = uint8(idx)
		a.GRH.HopLimit = grh[7]
		a.GRH.TrafficClass = uint8(flow >> 20)
	default:
		return a, errors.New("unknown GRH version")
	}
	return a, nil
}

// GRHVersion tells an IPv6 GRH from an IPv4 header in the GRH's last 20
// bytes, the way libibverbs does: by the IPv6 version field, then the
// IPv4 header length and checksum.
func GRHVersion(grh []byte) int {
	ip4 := grh[20:40]
	if grh[0]>>4 != 6 {
		if ip4[0]>>4 == 4 {
			return 4
		}
		return -1
	}
	if ip4[0]&0xf != 5 {
		return 6
	}
	var sum uint32
	for i := 0; i < 20; i += 2 {
		if i == 10 {
			continue // the checksum itself
		}
		sum += uint32(binary.NativeEndian.Uint16(ip4[i:]))
	}
	sum = sum&0xffff + sum>>16
	if uint16(^sum) == binary.NativeEndian.Uint16(ip4[10:]) {
		return 4
	}
	return 6
}

// FindGID returns the index of gid, of type typ, in port's GID table.
func FindGID(dev *verbs.Context, port uint8, gid verbs.GID, typ verbs.GIDType) (int, error) {
	tbl, err := dev.QueryGIDTable()
	if err != nil {
		return 0, err
	}
	for _, e := range tbl {
		if e.Port == int(port) && e.GID == gid && e.Type == typ {
			return e.Index, nil
		}
	}
	return 0, fmt.Errorf("GID %v not in the table of port %d", netip.AddrFrom16(gid), port)
}

// NewChannel opens an event channel, failing as
// create_first_event_channel does.
func NewChannel(errw *Out) (*cm.Channel, int) {
	ch, err := cm.NewChannel()
	if err != nil {
		if errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENOENT) {
			errw.Printf("No RDMA devices were detected\n")
		} else {
			errw.Printf("failed to create RDMA CM event channel: %s\n", Strerror(err))
		}
		var errno unix.Errno
		if errors.As(err, &errno) {
			return nil, int(errno)
		}
		return nil, 1
	}
	return ch, 0
}

// Test is one run of udaddy or ucmatose.
type Test struct {
	Prog      string // message prefix: "udaddy", "cmatose"
	Out, Errw *Out
	UD        bool // udaddy: PS_UDP, UD QPs, a GRH before each receive

	Connections int
	Count       int // messages per connection
	Size        int // bytes per message
	Port        string
	Dst, Src    string // -s, -b
	SetTOS      bool
	TOS         uint8
	SetTimeout  bool
	Timeout     uint8 // ACK timeout
	Migrate     bool

	Ch       *cm.Channel
	Channels []*cm.Channel // every channel opened; closed at the end
	Nodes    []*Node

	ConnIndex       int
	ConnectsLeft    int
	DisconnectsLeft int
}

// Node is one connection (struct cmatest_node).
type Node struct {
	ID          *cm.ID
	Connected   bool
	Established bool // an ESTABLISHED event came: a DISCONNECTED is due
	PD          *verbs.PD
	CCh         [2]*verbs.CompChannel
	CQ          [2]*cq.CQ // send, receive; udaddy: one CQ for both
	QP          *qp.QP
	MR          *mr.MR
	AH          *verbs.AH
	RemoteQPN   uint32
	RemoteQKey  uint32
}

// The indices of a node's CQs (Node.CQ): udaddy's one CQ is both.
const (
	SendCQ = 0
	RecvCQ = 1
)

func (t *Test) portSpace() cm.PortSpace {
	if t.UD {
		return cm.UDP
	}
	return cm.TCP
}

// bufSize is the size of a node's message buffer: a UD receive also
// takes the 40-byte GRH.
func (t *Test) bufSize() int {
	if t.UD {
		return t.Size + GRHSize
	}
	return t.Size
}

// Addrs resolves the addresses as get_rdma_addr does: the server's bind
// address (the wildcard without -b), or the client's destination and
// source. On failure it returns getaddrinfo's error code and message.
func (t *Test) Addrs(passive bool) (src, dst netip.AddrPort, code int, msg string) {
	port, err := ParsePort(t.Port)
	if err != nil {
		return src, dst, -8, "Servname not supported for ai_socktype" // EAI_SERVICE
	}
	if t.Src != "" {
		a, err := Lookup(t.Src)
		if err != nil {
			return src, dst, -2, err.Error() // EAI_NONAME
		}
		src = netip.AddrPortFrom(a, 0)
	}
	if passive {
		if !src.IsValid() {
			src = netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
		}
		return netip.AddrPortFrom(src.Addr(), port), dst, 0, ""
	}
	a, err := Lookup(t.Dst)
	if err != nil {
		return src, dst, -2, err.Error()
	}
	if src.IsValid() && src.Addr().Is4() != a.Is4() {
		return src, dst, -9, "Address family for hostname not supported" // EAI_ADDRFAMILY
	}
	return src, netip.AddrPortFrom(a, port), 0, ""
}

// EventError prints a failure event as the C programs' cma_handler does
// and returns its status.
func (t *Test) EventError(ee *cm.EventError) int {
	t.Out.Printf("%s: event: %s, error: %d\n", t.Prog, ee.Event, ee.Status)
	t.ConnectsLeft--
	return ee.Status
}

// InitNode creates a node's PD, CQs, QP and message buffer (init_node).
func (t *Test) InitNode(n *Node) int {
	dev := n.ID.Context()
	var err error
	if n.PD, err = dev.AllocPD(); err != nil {
		t.Out.Printf("%s: unable to allocate PD\n", t.Prog)
		return -12 // -ENOMEM
	}
	cqe := max(t.Count, 1)
	ncq := 2
	if t.UD {
		cqe = max(t.Count*2, 2)
		ncq = 1
	}
	for i := range ncq {
		if n.CCh[i], err = dev.NewCompChannel(); err == nil {
			n.CQ[i], err = cq.New(dev, cq.Options{CQE: cqe, Channel: n.CCh[i]})
		}
		if err != nil {
			t.Out.Printf("%s: unable to create CQ\n", t.Prog)
			return -12
		}
	}
	if t.UD {
		n.CQ[RecvCQ] = n.CQ[SendCQ]
	}
	wrs := max(t.Count, 1)
	n.QP, err = n.ID.CreateQP(n.PD, qp.Options{SendCQ: n.CQ[SendCQ], RecvCQ: n.CQ[RecvCQ],
		Caps: qp.Caps{MaxSendWR: wrs, MaxRecvWR: wrs, MaxSendSGE: 1, MaxRecvSGE: 1}, SigAll: !t.UD})
	if err != nil {
		t.Errw.Printf("%s: unable to create QP: %s\n", t.Prog, Strerror(err))
		return -1
	}
	// create_message
	if t.Count == 0 {
		return 0
	}
	if n.MR, err = mr.New(n.PD, t.bufSize(), mr.LocalWrite); err != nil {
		t.Out.Printf("failed to reg MR\n")
		t.Out.Printf("%s: failed to create messages: %d\n", t.Prog, -1)
		return -1
	}
	return 0
}

// PostRecvs posts count receives of the node's buffer.
func (t *Test) PostRecvs(n *Node) int {
	if t.Count == 0 {
		return 0
	}
	wr := []verbs.RecvWR{{SGList: []verbs.SGE{{Addr: n.MR.IOVA(), Length: uint32(t.bufSize()), LKey: n.MR.LKey()}}}}
	for range t.Count {
		if err := n.QP.PostRecv(wr); err != nil {
			t.Out.Printf("failed to post receives: %d\n", -1)
			return -1
		}
	}
	return 0
}

// PostSends sends count messages from the node's buffer: SEND_WITH_IMM
// of the QP number to the peer's QP (UD), or SEND (RC).
func (t *Test) PostSends(n *Node, flags verbs.SendFlags) int {
	if !n.Connected || t.Count == 0 {
		return 0
	}
	wr := []verbs.SendWR{{Opcode: verbs.WRSend, Flags: flags,
		SGList: []verbs.SGE{{Addr: n.MR.IOVA(), Length: uint32(t.Size), LKey: n.MR.LKey()}}}}
	if t.UD {
		wr[0].Opcode = verbs.WRSendWithImm
		wr[0].Imm = n.QP.QPN()
		wr[0].AH, wr[0].RemoteQPN, wr[0].RemoteQKey = n.AH, n.RemoteQPN, n.RemoteQKey
	}
	for range t.Count {
		if err := n.QP.PostSend(wr); err != nil {
			t.Out.Printf("failed to post sends: %d\n", -1)
			return -1
		}
	}
	return 0
}

// PollCQs waits until each connected node's CQ (send or receive) has
// given count completions, of any status, as poll_cqs does (sleeping on
// the completion channel instead of spinning). A udaddy server answers
// the sender of its first receive.
func (t *Test) PollCQs(index int) int {
	var wc [8]verbs.WorkCompletion
	for _, n := range t.Nodes {
		if !n.Connected {
			continue
		}
		c := n.CQ[index]
		for done := 0; done < t.Count; {
			got, err := c.Poll(wc[:])
			if err != nil {
				t.Out.Printf("%s: failed polling CQ: %d\n", t.Prog, -1)
				return -1
			}
			if got == 0 {
				if err := c.Wait(context.Background()); err != nil {
					t.Out.Printf("%s: failed polling CQ: %d\n", t.Prog, -1)
					return -1
				}
				continue
			}
			done += got
			if t.UD && n.AH == nil {
				if err := t.createReplyAH(n, &wc[0]); err != nil {
					t.Out.Printf("%s: failed to create reply AH\n", t.Prog)
					return -1
				}
			}
		}
	}
	return 0
}

// createReplyAH addresses the sender of a UD receive: the address from the
// GRH, the QP from the immediate data, and our own Q_Key.
func (t *Test) createReplyAH(n *Node, wc *verbs.WorkCompletion) error {
	attr, err := AHFromWC(n.ID.Context(), n.ID.Port(), wc, n.MR.Bytes()[:GRHSize])
	if err != nil {
		return err
	}
	if n.AH, err = n.PD.CreateAH(&attr); err != nil {
		return err
	}
	n.RemoteQPN = wc.Imm()
	a, err := n.QP.Query()
	if err != nil {
		return err
	}
	n.RemoteQKey = a.QKey
	return nil
}

// AllocNodes creates the nodes, with their IDs on the client.
func (t *Test) AllocNodes(client bool) error {
	t.Nodes = make([]*Node, t.Connections)
	for i := range t.Nodes {
		t.Nodes[i] = &Node{}
		if client {
			id, err := t.Ch.CreateID(t.portSpace())
			if err != nil {
				return err
			}
			t.Nodes[i].ID = id
		}
	}
	return nil
}

// DestroyNodes frees what each node holds, the ID last.
func (t *Test) DestroyNodes() {
	for _, n := range t.Nodes {
		if n.ID == nil {
			continue
		}
		if n.AH != nil {
			n.AH.Close()
		}
		if n.QP != nil {
			n.QP.Close()
		}
		for i := range n.CQ {
			if n.CQ[i] != nil && (i == SendCQ || n.CQ[i] != n.CQ[SendCQ]) {
				n.CQ[i].Close()
			}
			if n.CCh[i] != nil {
				n.CCh[i].Close()
			}
		}
		if n.MR != nil {
			n.MR.Close()
		}
		if n.PD != nil {
			n.PD.Close()
		}
		n.ID.Close()
	}
}

// CloseChannels closes every channel the run opened. Migrated IDs keep
// using the verbs contexts of the channel they were bound on, which
// closes them, so the old channels stay open until the end.
func (t *Test) CloseChannels() {
	for i := len(t.Channels) - 1; i >= 0; i-- {
		t.Channels[i].Close()
	}
}

// MigrateChannel moves the listener (if any) and every node's ID to a new
// event channel (cmatose -m).
func (t *Test) MigrateChannel(listen *cm.ID) int {
	t.Out.Printf("migrating to new event channel\n")
	ch, err := cm.NewChannel()
	if err != nil {
		t.Errw.Printf("%s: failed to create event channel: %s\n", t.Prog, Strerror(err))
		return -1
	}
	t.Channels = append(t.Channels, ch)
	if listen != nil {
		err = listen.Migrate(ch)
	}
	for _, n := range t.Nodes {
		if err != nil {
			break
		}
		if n.ID != nil {
			err = n.ID.Migrate(ch)
		}
	}
	if err != nil {
		t.Errw.Printf("%s: failure migrating to channel: %s\n", t.Prog, Strerror(err))
		return -1
	}
	t.Ch = ch
	return 0
}

// ConnectNode takes one client node through address and route resolution
// to the connection (addr_handler, route_handler, and the ESTABLISHED
// event). It returns non-zero to stop the event loop, and stop when the C
// program would return at once.
func (t *Test) ConnectNode(n *Node, src, dst netip.AddrPort, route func(*Node) int) (ret int, stop bool) {
	ctx := context.Background()
	if err := n.ID.ResolveAddr(ctx, src, dst); err != nil {
		if ee, ok := EventError(err); ok {
			return t.EventError(ee), false
		}
		t.Errw.Printf("%s: failure getting addr: %s\n", t.Prog, Strerror(err))
		t.ConnectsLeft--
		return -1, true
	}
	// addr_handler
	if t.SetTOS {
		if err := n.ID.SetTOS(t.TOS); err != nil {
			t.Errw.Printf("%s: set TOS option failed: %s\n", t.Prog, Strerror(err))
		}
	}
	if t.SetTimeout {
		if err := n.ID.SetOption(cm.OptionACKTimeout, []byte{t.Timeout}); err != nil {
			t.Errw.Printf("%s: set ack timeout option failed: %s\n", t.Prog, Strerror(err))
		}
	}
	if err := n.ID.ResolveRoute(ctx); err != nil {
		if ee, ok := EventError(err); ok {
			return t.EventError(ee), false
		}
		t.Errw.Printf("%s: resolve route failed: %s\n", t.Prog, Strerror(err))
		t.ConnectsLeft--
		return -1, false
	}
	// route_handler
	if ret := route(n); ret != 0 {
		t.ConnectsLeft--
		return ret, false
	}
	return 0, false
}

// Connect sends the connection request of a node whose QP is ready and
// waits for the connection: the ESTABLISHED event.
func (t *Test) Connect(n *Node, p cm.ConnParam) (cm.Event, int) {
	ev, err := n.ID.Connect(context.Background(), p)
	if err != nil {
		if ee, ok := EventError(err); ok {
			t.Out.Printf("%s: event: %s, error: %d\n", t.Prog, ee.Event, ee.Status)
			return ev, ee.Status
		}
		t.Errw.Printf("%s: failure connecting: %s\n", t.Prog, Strerror(err))
		return ev, -1
	}
	return ev, 0
}

// Request waits for the next connection request on the listener. It
// returns the new ID, or the status of a failure event.
func (t *Test) Request(listen *cm.ID) (*cm.ID, cm.Event, int) {
	id, ev, err := listen.GetRequest(context.Background())
	if err != nil {
		if ee, ok := EventError(err); ok {
			return nil, ev, t.EventError(ee)
		}
		t.Errw.Printf("%s: failure in rdma_get_cm_event in connect events: %s\n", t.Prog, Strerror(err))
		return nil, ev, -1
	}
	return id, ev, 0
}

// TakeNode gives a connection request a node (connect_handler's start),
// or rejects it when all are taken.
func (t *Test) TakeNode(id *cm.ID) *Node {
	if t.ConnIndex == len(t.Nodes) {
		t.Out.Printf("%s: failing connection request\n", t.Prog)
		id.Reject(nil)
		id.Close()
		return nil
	}
	n := t.Nodes[t.ConnIndex]
	t.ConnIndex++
	n.ID = id
	return n
}

// FailNode undoes takeNode after a failure: the request is rejected.
func (t *Test) FailNode(n *Node) {
	id := n.ID
	t.ConnectsLeft--
	t.Out.Printf("%s: failing connection request\n", t.Prog)
	id.Reject(nil)
	t.destroyNode(n)
}

func (t *Test) destroyNode(n *Node) {
	saved := t.Nodes
	t.Nodes = []*Node{n}
	t.DestroyNodes()
	t.Nodes = saved
	*n = Node{}
}

// Port spaces (enum rdma_port_space) that udaddy's usage names.
const (
	PSIPoIB = 0x0002
	PSUDP   = 0x0111
)

// ParseTestArgs parses the command line of udaddy or cmatose; a status
// >= 0 means stop with it.
func ParseTestArgs(t *Test, args []string, optstring, cmd, usage string) int {
	usageOut := func() int {
		if t.UD {
			t.Out.Printf(usage, "goverbs "+cmd, PSUDP, PSIPoIB)
		} else {
			t.Out.Printf(usage, "goverbs "+cmd)
		}
		return 1
	}
	atoi := func(what, s string, min int) (int, bool) {
		n, err := Atoi(s)
		if err != nil || n < min {
			t.Errw.Printf("goverbs %s: invalid %s %q\n", cmd, what, s)
			return 0, false
		}
		return n, true
	}
	opts, _ := Getopt(args, optstring)
	for _, op := range opts {
		var ok = true
		switch op.Opt {
		case 's':
			t.Dst = op.Arg
		case 'b':
			t.Src = op.Arg
		case 'c':
			t.Connections, ok = atoi("connection count", op.Arg, 0)
		case 'C':
			t.Count, ok = atoi("message count", op.Arg, 0)
		case 'S':
			t.Size, ok = atoi("message size", op.Arg, 0)
		case 't':
			v, err := strconv.ParseUint(op.Arg, 0, 8)
			if err != nil {
				t.Errw.Printf("goverbs %s: invalid type of service %q\n", cmd, op.Arg)
				return 1
			}
			t.SetTOS, t.TOS = true, uint8(v)
		case 'f':
			switch a := strings.ToLower(op.Arg); {
			case strings.HasPrefix(a, "ip"), strings.HasPrefix(a, "name"):
			case strings.HasPrefix(a, "gid"):
				t.Errw.Printf("goverbs %s: -f gid: AF_IB addresses are not supported\n", cmd)
				return 1
			default:
				t.Errw.Printf("Warning: unknown address format\n")
			}
		case 'P':
			a := strings.ToLower(op.Arg)
			switch {
			case t.UD && strings.HasPrefix(a, "udp"), !t.UD && strings.HasPrefix(a, "tcp"):
			case t.UD && strings.HasPrefix(a, "ipoib"), !t.UD && strings.HasPrefix(a, "ib"):
				t.Errw.Printf("goverbs %s: -P %s: port space not supported\n", cmd, op.Arg)
				return 1
			default:
				t.Errw.Printf("Warning: unknown port space format\n")
			}
		case 'p':
			if !t.UD {
				t.Port = op.Arg
				break
			}
			// udaddy: the port space, for backwards compatibility.
			v, err := strconv.ParseInt(op.Arg, 0, 32)
			if err != nil || v != PSUDP {
				t.Errw.Printf("goverbs %s: -p %s: port space not supported (only %#x, UDP)\n", cmd, op.Arg, PSUDP)
				return 1
			}
		case 'm':
			t.Migrate = true
		case 'a':
			v, err := strconv.ParseUint(op.Arg, 0, 8)
			if err != nil {
				t.Errw.Printf("goverbs %s: invalid ACK timeout %q\n", cmd, op.Arg)
				return 1
			}
			t.SetTimeout, t.Timeout = true, uint8(v)
		default:
			GetoptError(t.Errw, "goverbs "+cmd, op)
			return usageOut()
		}
		if !ok {
			return 1
		}
	}
	if t.Size == 0 {
		t.Count = 0 // create_message: nothing to send
	}
	return -1
}

// Run is the main of udaddy and cmatose.
func (t *Test) Run(server, client func() int) int {
	t.ConnectsLeft = t.Connections
	ch, _ := NewChannel(t.Errw)
	if ch == nil {
		return 1
	}
	t.Ch = ch
	t.Channels = append(t.Channels, ch)
	if err := t.AllocNodes(t.Dst != ""); err != nil {
		t.Errw.Printf("goverbs %s: %v\n", t.Prog, err)
		t.CloseChannels()
		return 1
	}
	var ret int
	if t.Dst != "" {
		ret = client()
	} else {
		ret = server()
	}
	t.Out.Printf("test complete\n")
	t.DestroyNodes()
	t.CloseChannels()
	t.Out.Printf("return status %d\n", ret)
	return Exit(ret)
}
