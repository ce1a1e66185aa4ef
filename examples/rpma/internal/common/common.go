// Package common is what librpma's examples share (examples/common in
// pmem/rpma), ported to Go: the program's frame (Main: arguments, usage,
// exit status), the resources an example acquires and releases in order
// (Env), the connection steps every example repeats, the private-data
// layout struct common_data (CommonData), the greeting of 03, 04, 05 and
// 09 (hello_t), the messages of the ping-pongs (08, 08srq, 12, 13) and of
// GPSPM (09), and the C library functions whose behaviour the examples'
// output depends on (strtoul, atoi, glibc's rand).
//
// An example is a program with a server and a client:
//
//	func main() {
//		common.Main(common.Example{Name: "01-connection", Server: server, Client: client})
//	}
//
// run as
//
//	01-connection server <server_address> <port> [ARGS]
//	01-connection client <server_address> <port> [ARGS]
//
// Like the C examples, each prints what they print and exits with what
// they return, so that a Go server talks to a C client and the other way
// round. The examples that would use PMem run in DRAM mode, as the C ones
// built without libpmem do.
package common

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/rpma"
	"github.com/goverbs/goverbs/verbs"
)

// Example is one of librpma's examples: its two programs, and the
// arguments each takes after <server_address> <port>.
type Example struct {
	Name                     string // librpma's directory name, "01-connection"
	Server, Client           func(e *Env) error
	ServerArgs, ClientArgs   string // the usage text of the arguments after the port
	ServerNeeds, ClientNeeds int    // how many of them are required
}

// Main runs the example with the process's arguments and exits with its
// status.
func Main(ex Example) {
	os.Exit(Run(ex, os.Args[1:], os.Stdout, os.Stderr))
}

// Run runs the example: args are "server|client <server_address> <port>
// [ARGS]". It returns the exit status: 0, an RPMA_E_* code or 255 (C's
// -1) as the C example's return value comes out, and 2 for a role that
// is neither server nor client.
func Run(ex Example, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "server" && args[0] != "client") {
		fmt.Fprintf(stderr, "usage: %s server|client <server_address> <port> [ARGS]\n", ex.Name)
		return 2
	}
	role := args[0]
	prog, synopsis, need, main := ex.Name+" "+role, ex.ServerArgs, ex.ServerNeeds, ex.Server
	if role == "client" {
		synopsis, need, main = ex.ClientArgs, ex.ClientNeeds, ex.Client
	}
	rest := args[1:]
	if len(rest) < 2+need {
		// The C programs' usage line, and their exit(-1).
		fmt.Fprintf(stderr, "usage: %s <server_address> <port>%s\n", prog, strings.TrimRight(" "+synopsis, " "))
		return 255
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	e := &Env{Ctx: ctx, Stdout: stdout, Stderr: stderr, Prog: prog, Addr: rest[0], Port: rest[1], Args: rest[2:]}
	return ExitCode(e.run(main))
}

// OpTimeout bounds every wait once a connection is being set up: for
// the connection, its events and completions. (Waiting for a client to
// come is not bounded, as in C; SIGINT and SIGTERM end it.)
const OpTimeout = 2 * time.Minute

// ErrFailed is the error of a failure the example already reported.
var ErrFailed = errors.New("failed")

// Exit is an exit status the example chose, as C's return/exit.
type Exit int

// Error returns "exit status N".
func (x Exit) Error() string { return fmt.Sprintf("exit status %d", int(x)) }

// ExitCode maps an example's outcome to an exit status the way the C
// programs' return values come out: 0, an RPMA_E_* code or -1 (255).
func ExitCode(err error) int {
	var x Exit
	switch {
	case err == nil:
		return 0
	case errors.As(err, &x):
		return int(x) & 0xff
	case rpma.Code(err) != rpma.Code(rpma.ErrUnknown) || errors.Is(err, rpma.ErrUnknown):
		return rpma.Code(err) & 0xff
	}
	return 255
}

// Env is what an example program runs with: its arguments, output and
// the resources to release when it ends.
type Env struct {
	Ctx            context.Context // ends on SIGINT or SIGTERM
	Stdout, Stderr io.Writer
	Prog           string   // the program's name in messages: "NN-name server" or "NN-name client"
	Addr, Port     string   // <server_address> <port>
	Args           []string // the arguments after the port

	mu       sync.Mutex // serializes the output of goroutines
	cleanups []func()
	deleted  map[*rpma.Conn]bool
	early    []verbs.WorkCompletion // see WaitAndValidate
}

// run runs main, then releases what it left, last acquired first.
func (e *Env) run(main func(*Env) error) (err error) {
	defer func() {
		for i := len(e.cleanups) - 1; i >= 0; i-- {
			e.cleanups[i]()
		}
	}()
	return main(e)
}

// AtExit registers a release to run when the example ends.
func (e *Env) AtExit(f func()) { e.cleanups = append(e.cleanups, f) }

// Printf prints to the example's standard output, one goroutine at a
// time.
func (e *Env) Printf(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	fmt.Fprintf(e.Stdout, format, args...)
}

// Eprintf prints to the example's standard error, one goroutine at a
// time.
func (e *Env) Eprintf(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	fmt.Fprintf(e.Stderr, format, args...)
}

// Fail reports a failed librpma call (the C examples leave that to
// librpma's log) and returns err.
func (e *Env) Fail(call string, err error) error {
	e.Eprintf("%s: %s: %v\n", e.Prog, call, err)
	return err
}

// Op returns a context for one bounded wait.
func (e *Env) Op() (context.Context, context.CancelFunc) {
	return context.WithTimeout(e.Ctx, OpTimeout)
}

// NoPMem is what the C examples print on stderr when built without
// libpmem, as these ports are: they always use DRAM.
const NoPMem = "The example is unable to use libpmem. If unintended please check the build log. Using DRAM instead.\n"

// peer opens the device of the example's address (local for a server,
// remote for a client) and creates a peer on it (common_peer_via_address).
func (e *Env) peer(typ rpma.IBVContextType) (*rpma.Peer, error) {
	ibv, err := rpma.GetIBVContext(e.Ctx, e.Addr, typ)
	if err != nil {
		return nil, e.Fail("rpma_utils_get_ibv_context", err)
	}
	p, err := rpma.NewPeer(ibv)
	if err != nil {
		ibv.Close()
		return nil, e.Fail("rpma_peer_new", err)
	}
	e.AtExit(func() { p.Close(); ibv.Close() })
	return p, nil
}

// ServerPeer opens the device of the server's address and creates a peer
// on it.
func (e *Env) ServerPeer() (*rpma.Peer, error) { return e.peer(rpma.IBVContextLocal) }

// ClientPeer opens the device through which the server's address is
// reached and creates a peer on it.
func (e *Env) ClientPeer() (*rpma.Peer, error) { return e.peer(rpma.IBVContextRemote) }

// Mem allocates size bytes of zeroed, page-aligned memory
// (malloc_aligned).
func (e *Env) Mem(size int) ([]byte, error) {
	b, err := mr.Alloc(size)
	if err != nil {
		return nil, e.Fail("malloc_aligned", err)
	}
	e.AtExit(func() { b.Close() })
	return b.Bytes()[:size], nil
}

// Reg registers buf (rpma_mr_reg).
func (e *Env) Reg(p *rpma.Peer, buf []byte, usage rpma.Usage) (*rpma.LocalMR, error) {
	m, err := p.RegisterMR(buf, usage)
	if err != nil {
		return nil, e.Fail("rpma_mr_reg", err)
	}
	e.AtExit(func() { m.Close() })
	return m, nil
}

// Listen starts the example's endpoint (rpma_ep_listen).
func (e *Env) Listen(p *rpma.Peer) (*rpma.Endpoint, error) {
	ep, err := p.Listen(e.Addr, e.Port)
	if err != nil {
		return nil, e.Fail("rpma_ep_listen", err)
	}
	e.AtExit(func() { ep.Close() })
	return ep, nil
}

// Keep makes sure conn is deleted when the example ends, unless
// deleteConn did it before.
func (e *Env) Keep(conn *rpma.Conn) {
	e.AtExit(func() {
		e.mu.Lock()
		done := e.deleted[conn]
		e.mu.Unlock()
		if !done {
			conn.Disconnect()
			conn.Close()
		}
	})
}

// DeleteConn deletes conn (rpma_conn_delete).
func (e *Env) DeleteConn(conn *rpma.Conn) error {
	e.mu.Lock()
	if e.deleted == nil {
		e.deleted = map[*rpma.Conn]bool{}
	}
	done := e.deleted[conn]
	e.deleted[conn] = true
	e.mu.Unlock()
	if done {
		return nil
	}
	return conn.Close()
}

// NextEvent waits for the connection's next event (rpma_conn_next_event).
func (e *Env) NextEvent(conn *rpma.Conn) (rpma.ConnEvent, error) {
	ctx, cancel := e.Op()
	defer cancel()
	ev, err := conn.NextEvent(ctx)
	if err != nil {
		return ev, e.Fail("rpma_conn_next_event", err)
	}
	return ev, nil
}

// Established checks the first event of a new connection.
func (e *Env) Established(conn *rpma.Conn) error {
	ev, err := e.NextEvent(conn)
	if err != nil {
		return err
	}
	if ev != rpma.ConnEstablished {
		e.Eprintf("rpma_conn_next_event returned an unexpected event: %s\n", ev)
		return Exit(-1)
	}
	return nil
}

// Connect connects a request and waits for the connection
// (rpma_conn_req_connect and the ESTABLISHED event).
func (e *Env) Connect(req *rpma.ConnReq, pdata []byte) (*rpma.Conn, error) {
	ctx, cancel := e.Op()
	conn, err := req.Connect(ctx, pdata)
	cancel()
	if err != nil {
		return nil, e.Fail("rpma_conn_req_connect", err)
	}
	e.Keep(conn)
	if err := e.Established(conn); err != nil {
		e.DeleteConn(conn)
		return nil, err
	}
	return conn, nil
}

// ClientConnect connects to the server (client_connect).
func (e *Env) ClientConnect(p *rpma.Peer, cfg *rpma.ConnCfg, pdata []byte) (*rpma.Conn, error) {
	req, err := p.NewConnReq(e.Ctx, e.Addr, e.Port, cfg)
	if err != nil {
		return nil, e.Fail("rpma_conn_req_new", err)
	}
	return e.Connect(req, pdata)
}

// NextConnReq waits for a client (rpma_ep_next_conn_req).
func (e *Env) NextConnReq(ep *rpma.Endpoint, cfg *rpma.ConnCfg) (*rpma.ConnReq, error) {
	req, err := ep.NextConnReq(e.Ctx, cfg)
	if err != nil {
		return nil, e.Fail("rpma_ep_next_conn_req", err)
	}
	return req, nil
}

// ServerAccept waits for a client and accepts it
// (server_accept_connection).
func (e *Env) ServerAccept(ep *rpma.Endpoint, cfg *rpma.ConnCfg, pdata []byte) (*rpma.Conn, error) {
	req, err := e.NextConnReq(ep, cfg)
	if err != nil {
		return nil, err
	}
	return e.Connect(req, pdata)
}

// WaitClosed waits for the CLOSED event and complains about another.
func (e *Env) WaitClosed(conn *rpma.Conn) error {
	ev, err := e.NextEvent(conn)
	if err == nil && ev != rpma.ConnClosed {
		e.Eprintf("rpma_conn_next_event returned an unexpected event: %s\n", ev)
	}
	return err
}

// WaitCloseAndDisconnect is the passive end of a connection
// (common_wait_for_conn_close_and_disconnect).
func (e *Env) WaitCloseAndDisconnect(conn *rpma.Conn) error {
	err := e.WaitClosed(conn)
	if derr := conn.Disconnect(); derr != nil && err == nil {
		err = e.Fail("rpma_conn_disconnect", derr)
	}
	if derr := e.DeleteConn(conn); derr != nil && err == nil {
		err = e.Fail("rpma_conn_delete", derr)
	}
	return err
}

// DisconnectAndWaitClose is the active end of a connection
// (common_disconnect_and_wait_for_conn_close).
func (e *Env) DisconnectAndWaitClose(conn *rpma.Conn) error {
	err := conn.Disconnect()
	if err != nil {
		e.Fail("rpma_conn_disconnect", err)
	} else {
		err = e.WaitClosed(conn)
	}
	if derr := e.DeleteConn(conn); derr != nil && err == nil {
		err = e.Fail("rpma_conn_delete", derr)
	}
	return err
}

// CQWait waits for a completion event of cq (rpma_cq_wait).
func (e *Env) CQWait(cq *rpma.CQ) error {
	ctx, cancel := e.Op()
	defer cancel()
	if err := cq.Wait(ctx); err != nil {
		// What the CQ holds tells a completion whose event went missing
		// from one that never came.
		c := cq.CQ()
		return e.Fail("rpma_cq_wait", fmt.Errorf("%w (the CQ holds %d completions; %d completion events read)", err, c.Queued(), c.Events()))
	}
	return nil
}

// GetWC waits for a completion event of cq and takes one completion
// (rpma_cq_wait and rpma_cq_get_wc(cq, 1)).
func (e *Env) GetWC(cq *rpma.CQ) (verbs.WorkCompletion, error) {
	var wc [1]verbs.WorkCompletion
	if err := e.CQWait(cq); err != nil {
		return wc[0], err
	}
	if _, err := cq.GetWC(wc[:]); err != nil {
		return wc[0], e.Fail("rpma_cq_get_wc", err)
	}
	return wc[0], nil
}

// ConnWaitWC waits on the connection's shared completion channel and takes
// one completion of the CQ that got the event (rpma_conn_wait and
// rpma_cq_get_wc).
func (e *Env) ConnWaitWC(conn *rpma.Conn) (verbs.WorkCompletion, error) {
	var wc [1]verbs.WorkCompletion
	ctx, cancel := e.Op()
	cq, _, err := conn.Wait(ctx)
	cancel()
	if err != nil {
		// As CQWait: what the CQs hold tells a completion whose event
		// went missing from one that never came. A peer's disconnect
		// ends the wait (rpma.Conn.Wait), so a message it never sent
		// fails here at once.
		return wc[0], e.Fail("rpma_conn_wait", fmt.Errorf("%w (%s)", err, held(conn)))
	}
	if _, err := cq.GetWC(wc[:]); err != nil {
		return wc[0], e.Fail("rpma_cq_get_wc", err)
	}
	return wc[0], nil
}

// held says how many completions the connection's CQs hold and how many
// completion events were read for them.
func held(conn *rpma.Conn) string {
	s := ""
	for _, q := range []*rpma.CQ{conn.CQ(), conn.RCQ()} {
		if q == nil {
			continue
		}
		name := "the CQ"
		if q == conn.RCQ() {
			name = ", the RCQ"
		}
		s += fmt.Sprintf("%s holds %d completions, %d events read", name, q.CQ().Queued(), q.CQ().Events())
	}
	return s
}

// WaitAndValidate is the shared-channel examples'
// wait_and_validate_completion: one completion of the expected opcode.
//
// Unlike rpma_conn_wait, rpma.Conn.Wait does not keep the order of the
// events: cq.WaitChannel drains every pending event of the channel and
// then returns the CQs in an arbitrary order, so when the completions of a
// send and of the answer to it are both there, the receive may come first.
// A completion of the other kind the examples wait for (send or receive)
// is therefore kept for the next call instead of failing as the C
// examples would when the events come the other way round.
func (e *Env) WaitAndValidate(conn *rpma.Conn, want verbs.WCOpcode) (verbs.WorkCompletion, error) {
	fn := "recv"
	if want == verbs.WCSend {
		fn = "send"
	}
	for {
		var wc verbs.WorkCompletion
		if i := slices.IndexFunc(e.early, func(w verbs.WorkCompletion) bool { return w.Opcode == want }); i >= 0 {
			wc = e.early[i]
			e.early = slices.Delete(e.early, i, i+1)
		} else {
			var err error
			if wc, err = e.ConnWaitWC(conn); err != nil {
				return wc, err
			}
		}
		if wc.Status != verbs.WCSuccess {
			e.Eprintf("rpma_%s() failed: %s\n", fn, wc.Status)
			return wc, Exit(-1)
		}
		if wc.Opcode == want {
			return wc, nil
		}
		if (wc.Opcode == verbs.WCSend || wc.Opcode == verbs.WCRecv) && len(e.early) == 0 {
			e.early = append(e.early, wc)
			continue
		}
		e.Eprintf("unexpected wc.opcode value (0x%X != 0x%X)\n", uint32(wc.Opcode), uint32(want))
		return wc, Exit(-1)
	}
}

// CommonData is the examples' struct common_data (28 bytes, host byte
// order): where the data is in the region, and the descriptors of the
// region and of the peer configuration.
type CommonData struct {
	DataOffset   uint16 // where the data is in the region
	MRDescSize   uint8  // the size of the region's descriptor
	PCfgDescSize uint8  // the size of the peer configuration's descriptor
	Descriptors  [24]byte
}

// CommonDataSize is the size of struct common_data.
const CommonDataSize = 28

// Bytes returns the struct as private data.
func (d *CommonData) Bytes() []byte {
	b := make([]byte, CommonDataSize)
	binary.NativeEndian.PutUint16(b[0:], d.DataOffset)
	b[2], b[3] = d.MRDescSize, d.PCfgDescSize
	copy(b[4:], d.Descriptors[:])
	return b
}

// CommonDataOf returns the common_data at the start of private data,
// or false when there are fewer than 28 bytes.
func CommonDataOf(pdata []byte) (CommonData, bool) {
	var d CommonData
	if len(pdata) < CommonDataSize {
		return d, false
	}
	d.DataOffset = binary.NativeEndian.Uint16(pdata[0:])
	d.MRDescSize, d.PCfgDescSize = pdata[2], pdata[3]
	copy(d.Descriptors[:], pdata[4:])
	return d, true
}

// MRDesc returns the region's descriptor (cut at the array's end).
func (d *CommonData) MRDesc() []byte {
	return d.Descriptors[:min(int(d.MRDescSize), len(d.Descriptors))]
}

// PCfgDesc returns the peer configuration's descriptor (cut at the
// array's end).
func (d *CommonData) PCfgDesc() []byte {
	start := min(int(d.MRDescSize), len(d.Descriptors))
	return d.Descriptors[start:min(start+int(d.PCfgDescSize), len(d.Descriptors))]
}

// RemoteMR decodes the region descriptor (rpma_mr_remote_from_descriptor).
func (e *Env) RemoteMR(d *CommonData) (*rpma.RemoteMR, error) {
	r, err := rpma.RemoteMRFromDescriptor(d.MRDesc())
	if err != nil {
		return nil, e.Fail("rpma_mr_remote_from_descriptor", err)
	}
	return r, nil
}

// CString returns the NUL-terminated string at the start of b.
func CString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// Strncpy copies s into dst as strncpy(dst, s, len(dst)) does: the
// rest of dst is zeroed, and s is cut at len(dst).
func Strncpy(dst []byte, s string) {
	n := copy(dst, s)
	clear(dst[n:])
}

// Strtoul parses a number as strtoul(s, NULL, 10) does: leading spaces,
// a sign, the digits up to the first non-digit (none: 0); on overflow it
// returns ULONG_MAX and false (errno ERANGE).
func Strtoul(s string) (uint64, bool) {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	var v uint64
	ok := true
	for i := 0; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		d := uint64(s[i] - '0')
		if v > (^uint64(0)-d)/10 {
			ok = false
		}
		v = v*10 + d
	}
	if !ok {
		return ^uint64(0), false
	}
	if neg {
		v = -v
	}
	return v, true
}

// StrtoulNoError is the examples' strtoul_noerror: an overflow ends the
// program.
func (e *Env) StrtoulNoError(s string) (uint64, error) {
	v, ok := Strtoul(s)
	if !ok {
		e.Eprintf("strtoul(%s) overflowed\n", s)
		return 0, Exit(-1)
	}
	return v, nil
}

// Atoi parses a number as atoi(3) does (an int; garbage is 0).
func Atoi(s string) int {
	v, _ := Strtoul(s)
	return int(int32(v))
}

// Arg returns the i-th argument after the port, or "" and false.
func (e *Env) Arg(i int) (string, bool) {
	if i < len(e.Args) {
		return e.Args[i], true
	}
	return "", false
}

// SleepUsec is usleep(3), cut short by the end of the context.
func (e *Env) SleepUsec(us uint64) {
	if us == 0 {
		return
	}
	t := time.NewTimer(time.Duration(min(us, uint64(1<<62)/1000)) * time.Microsecond)
	defer t.Stop()
	select {
	case <-t.C:
	case <-e.Ctx.Done():
	}
}
