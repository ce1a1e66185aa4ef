package main

// goverbs rpma-example: librpma 1.2's example programs (examples/ in
// pmem/rpma) ported to Go on top of package rpma. Each example keeps its C
// counterpart's arguments, wire protocol (private data layouts, message
// formats) and standard output, so a Go server talks to a C client and
// the other way round. The examples that would use PMem run in DRAM mode,
// as the C ones built without libpmem do.
//
//	goverbs rpma-example list
//	goverbs rpma-example NAME server ADDR PORT [ARGS]
//	goverbs rpma-example NAME client ADDR PORT [ARGS]

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

	"github.com/goverbs/goverbs/internal/tools/cli"
	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/rpma"
	"github.com/goverbs/goverbs/verbs"
)

func init() {
	commands["rpma-example"] = command{"librpma's example programs in Go (rpma-example list: their names)", runRPMAExample}
}

// rpxExample is one of librpma's examples: its two programs, and the
// arguments each takes after <server_address> <port>.
type rpxExample struct {
	name                    string
	server, client          func(e *rpxEnv) error
	serverArgs, clientArgs  string // usage text
	serverNeeds, clientNeed int    // required arguments after the port
}

// rpxExamples are the examples in the order of librpma's examples folder.
var rpxExamples = []rpxExample{
	{name: "01-connection", server: rpx01Server, client: rpx01Client},
	{name: "02-read-to-volatile", server: rpx02Server, client: rpx02Client},
	{name: "03-read-to-persistent", server: rpx03Server, client: rpx03Client,
		serverArgs: "[<pmem-path>]", clientArgs: "[<pmem-path> [<pmem-offset>]]"},
	{name: "04-write-to-persistent", server: rpx04Server, client: rpx04Client,
		serverArgs: "[<pmem-path>]", clientArgs: "[<pmem-path> [<pmem-offset>]]"},
	{name: "05-flush-to-persistent", server: rpx05Server, client: rpx05Client,
		serverArgs: "[<pmem-path>] [direct-pmem-write]", clientArgs: "[<pmem-path> [<pmem-offset>]]"},
	{name: "06-multiple-connections", server: func(e *rpxEnv) error { return rpx06Server(e, false) },
		client: rpx06Client, clientArgs: "<seed>", clientNeed: 1},
	{name: "06scch-multiple-connections", server: func(e *rpxEnv) error { return rpx06Server(e, true) },
		client: rpx06Client, clientArgs: "<seed>", clientNeed: 1},
	{name: "07-atomic-write", server: rpx07Server, client: rpx07Client,
		serverArgs: "[<pmem-path>]", clientArgs: "<word1> [<word2>] [..]", clientNeed: 1},
	{name: "08-messages-ping-pong", server: rpx08Server, client: rpx08Client,
		clientArgs: "<seed> <rounds> [<sleep>]", clientNeed: 2},
	{name: "08srq-simple-messages-ping-pong-with-srq", server: rpx08srqServer, client: rpx08srqClient,
		serverArgs: "[m|r]", clientArgs: "<seed> <rounds> [<sleep>]", clientNeed: 2},
	{name: "09-flush-to-persistent-GPSPM", server: func(e *rpxEnv) error { return rpx09Server(e, false) },
		client:     func(e *rpxEnv) error { return rpx09Client(e, false) },
		serverArgs: "[<pmem-path>]", clientArgs: "[<pmem-path> [<pmem-offset>]]"},
	{name: "09scch-flush-to-persistent-GPSPM", server: func(e *rpxEnv) error { return rpx09Server(e, true) },
		client:     func(e *rpxEnv) error { return rpx09Client(e, true) },
		serverArgs: "[<pmem-path>]", clientArgs: "[<pmem-path> [<pmem-offset>]]"},
	{name: "10-send-with-imm", server: rpx10Server, client: rpx10Client,
		clientArgs: "<imm> [word]", clientNeed: 1},
	{name: "11-write-with-imm", server: rpx11Server, client: rpx11Client,
		clientArgs: "<imm>", clientNeed: 1},
	{name: "12-receive-completion-queue", server: func(e *rpxEnv) error { return rpx12Server(e, false) },
		client:     func(e *rpxEnv) error { return rpx12Client(e, false) },
		clientArgs: "<start_value> <rounds> [<sleep>]", clientNeed: 2},
	{name: "12scch-receive-completion-queue", server: func(e *rpxEnv) error { return rpx12Server(e, true) },
		client:     func(e *rpxEnv) error { return rpx12Client(e, true) },
		clientArgs: "<start_value> <rounds> [<sleep>]", clientNeed: 2},
	{name: "13-messages-ping-pong-with-srq", server: rpx13Server, client: rpx13Client,
		serverArgs: "[<timeout>]", clientArgs: "<seed> <rounds> [<sleep>]", clientNeed: 2},
}

// rpxOpTimeout bounds every wait once a connection is being set up: for
// the connection, its events and completions. (Waiting for a client to
// come is not bounded, as in C; SIGINT and SIGTERM end it.)
const rpxOpTimeout = 2 * time.Minute

func rpxUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: goverbs rpma-example list")
	fmt.Fprintln(w, "       goverbs rpma-example NAME server|client <server_address> <port> [ARGS]")
	fmt.Fprintln(w, "NAME is one of librpma's examples (rpma-example list prints them).")
}

func runRPMAExample(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		rpxUsage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		rpxUsage(stdout)
		return 0
	case "list":
		if len(args) != 1 {
			rpxUsage(stderr)
			return 2
		}
		for _, ex := range rpxExamples {
			fmt.Fprintln(stdout, ex.name)
		}
		return 0
	}
	var ex *rpxExample
	for i := range rpxExamples {
		if rpxExamples[i].name == args[0] {
			ex = &rpxExamples[i]
		}
	}
	if ex == nil {
		cli.Errorf(stderr, "rpma-example", "unknown example %q (rpma-example list prints the names)", args[0])
		return 2
	}
	if len(args) < 2 || (args[1] != "server" && args[1] != "client") {
		rpxUsage(stderr)
		return 2
	}
	role := args[1]
	prog, synopsis, need, main := "goverbs rpma-example "+ex.name+" "+role, ex.serverArgs, ex.serverNeeds, ex.server
	if role == "client" {
		synopsis, need, main = ex.clientArgs, ex.clientNeed, ex.client
	}
	rest := args[2:]
	if len(rest) < 2+need {
		// The C programs' usage line, and their exit(-1).
		fmt.Fprintf(stderr, "usage: %s <server_address> <port>%s\n", prog, strings.TrimRight(" "+synopsis, " "))
		return 255
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	e := &rpxEnv{ctx: ctx, stdout: stdout, stderr: stderr, prog: prog, addr: rest[0], port: rest[1], args: rest[2:]}
	err := e.run(main)
	return rpxExitCode(err)
}

// rpxFailed is the error of a failure the example already reported.
var rpxFailed = errors.New("failed")

// rpxExit is an exit status the example chose, as C's return/exit.
type rpxExit int

func (x rpxExit) Error() string { return fmt.Sprintf("exit status %d", int(x)) }

// rpxExitCode maps an example's outcome to an exit status the way the C
// programs' return values come out: 0, an RPMA_E_* code or -1 (255).
func rpxExitCode(err error) int {
	var x rpxExit
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

// rpxEnv is what an example program runs with: its arguments, output and
// the resources to release when it ends.
type rpxEnv struct {
	ctx            context.Context
	stdout, stderr io.Writer
	prog           string
	addr, port     string
	args           []string // after the port

	mu       sync.Mutex // serializes the output of goroutines
	cleanups []func()
	deleted  map[*rpma.Conn]bool
	early    []verbs.WorkCompletion // see waitAndValidate
}

// run runs main, then releases what it left, last acquired first.
func (e *rpxEnv) run(main func(*rpxEnv) error) (err error) {
	defer func() {
		for i := len(e.cleanups) - 1; i >= 0; i-- {
			e.cleanups[i]()
		}
	}()
	return main(e)
}

// atExit registers a release to run when the example ends.
func (e *rpxEnv) atExit(f func()) { e.cleanups = append(e.cleanups, f) }

func (e *rpxEnv) printf(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	fmt.Fprintf(e.stdout, format, args...)
}

func (e *rpxEnv) eprintf(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	fmt.Fprintf(e.stderr, format, args...)
}

// fail reports a failed librpma call (the C examples leave that to
// librpma's log) and returns err.
func (e *rpxEnv) fail(call string, err error) error {
	e.eprintf("%s: %s: %v\n", e.prog, call, err)
	return err
}

// op returns a context for one bounded wait.
func (e *rpxEnv) op() (context.Context, context.CancelFunc) {
	return context.WithTimeout(e.ctx, rpxOpTimeout)
}

// rpxNoPMem is what the C examples print on stderr when built without
// libpmem, as these ports are: they always use DRAM.
const rpxNoPMem = "The example is unable to use libpmem. If unintended please check the build log. Using DRAM instead.\n"

// peer opens the device of the example's address (local for a server,
// remote for a client) and creates a peer on it (common_peer_via_address).
func (e *rpxEnv) peer(typ rpma.IBVContextType) (*rpma.Peer, error) {
	ibv, err := rpma.GetIBVContext(e.ctx, e.addr, typ)
	if err != nil {
		return nil, e.fail("rpma_utils_get_ibv_context", err)
	}
	p, err := rpma.NewPeer(ibv)
	if err != nil {
		ibv.Close()
		return nil, e.fail("rpma_peer_new", err)
	}
	e.atExit(func() { p.Close(); ibv.Close() })
	return p, nil
}

func (e *rpxEnv) serverPeer() (*rpma.Peer, error) { return e.peer(rpma.IBVContextLocal) }
func (e *rpxEnv) clientPeer() (*rpma.Peer, error) { return e.peer(rpma.IBVContextRemote) }

// mem allocates size bytes of zeroed, page-aligned memory
// (malloc_aligned).
func (e *rpxEnv) mem(size int) ([]byte, error) {
	b, err := mr.Alloc(size)
	if err != nil {
		return nil, e.fail("malloc_aligned", err)
	}
	e.atExit(func() { b.Close() })
	return b.Bytes()[:size], nil
}

// reg registers buf (rpma_mr_reg).
func (e *rpxEnv) reg(p *rpma.Peer, buf []byte, usage rpma.Usage) (*rpma.LocalMR, error) {
	m, err := p.RegisterMR(buf, usage)
	if err != nil {
		return nil, e.fail("rpma_mr_reg", err)
	}
	e.atExit(func() { m.Close() })
	return m, nil
}

// listen starts the example's endpoint (rpma_ep_listen).
func (e *rpxEnv) listen(p *rpma.Peer) (*rpma.Endpoint, error) {
	ep, err := p.Listen(e.addr, e.port)
	if err != nil {
		return nil, e.fail("rpma_ep_listen", err)
	}
	e.atExit(func() { ep.Close() })
	return ep, nil
}

// keep makes sure conn is deleted when the example ends, unless
// deleteConn did it before.
func (e *rpxEnv) keep(conn *rpma.Conn) {
	e.atExit(func() {
		e.mu.Lock()
		done := e.deleted[conn]
		e.mu.Unlock()
		if !done {
			conn.Disconnect()
			conn.Close()
		}
	})
}

// deleteConn deletes conn (rpma_conn_delete).
func (e *rpxEnv) deleteConn(conn *rpma.Conn) error {
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

// nextEvent waits for the connection's next event (rpma_conn_next_event).
func (e *rpxEnv) nextEvent(conn *rpma.Conn) (rpma.ConnEvent, error) {
	ctx, cancel := e.op()
	defer cancel()
	ev, err := conn.NextEvent(ctx)
	if err != nil {
		return ev, e.fail("rpma_conn_next_event", err)
	}
	return ev, nil
}

// established checks the first event of a new connection.
func (e *rpxEnv) established(conn *rpma.Conn) error {
	ev, err := e.nextEvent(conn)
	if err != nil {
		return err
	}
	if ev != rpma.ConnEstablished {
		e.eprintf("rpma_conn_next_event returned an unexpected event: %s\n", ev)
		return rpxExit(-1)
	}
	return nil
}

// connect connects a request and waits for the connection
// (rpma_conn_req_connect and the ESTABLISHED event).
func (e *rpxEnv) connect(req *rpma.ConnReq, pdata []byte) (*rpma.Conn, error) {
	ctx, cancel := e.op()
	conn, err := req.Connect(ctx, pdata)
	cancel()
	if err != nil {
		return nil, e.fail("rpma_conn_req_connect", err)
	}
	e.keep(conn)
	if err := e.established(conn); err != nil {
		e.deleteConn(conn)
		return nil, err
	}
	return conn, nil
}

// clientConnect connects to the server (client_connect).
func (e *rpxEnv) clientConnect(p *rpma.Peer, cfg *rpma.ConnCfg, pdata []byte) (*rpma.Conn, error) {
	req, err := p.NewConnReq(e.ctx, e.addr, e.port, cfg)
	if err != nil {
		return nil, e.fail("rpma_conn_req_new", err)
	}
	return e.connect(req, pdata)
}

// nextConnReq waits for a client (rpma_ep_next_conn_req).
func (e *rpxEnv) nextConnReq(ep *rpma.Endpoint, cfg *rpma.ConnCfg) (*rpma.ConnReq, error) {
	req, err := ep.NextConnReq(e.ctx, cfg)
	if err != nil {
		return nil, e.fail("rpma_ep_next_conn_req", err)
	}
	return req, nil
}

// serverAccept waits for a client and accepts it
// (server_accept_connection).
func (e *rpxEnv) serverAccept(ep *rpma.Endpoint, cfg *rpma.ConnCfg, pdata []byte) (*rpma.Conn, error) {
	req, err := e.nextConnReq(ep, cfg)
	if err != nil {
		return nil, err
	}
	return e.connect(req, pdata)
}

// waitClosed waits for the CLOSED event and complains about another.
func (e *rpxEnv) waitClosed(conn *rpma.Conn) error {
	ev, err := e.nextEvent(conn)
	if err == nil && ev != rpma.ConnClosed {
		e.eprintf("rpma_conn_next_event returned an unexpected event: %s\n", ev)
	}
	return err
}

// waitCloseAndDisconnect is the passive end of a connection
// (common_wait_for_conn_close_and_disconnect).
func (e *rpxEnv) waitCloseAndDisconnect(conn *rpma.Conn) error {
	err := e.waitClosed(conn)
	if derr := conn.Disconnect(); derr != nil && err == nil {
		err = e.fail("rpma_conn_disconnect", derr)
	}
	if derr := e.deleteConn(conn); derr != nil && err == nil {
		err = e.fail("rpma_conn_delete", derr)
	}
	return err
}

// disconnectAndWaitClose is the active end of a connection
// (common_disconnect_and_wait_for_conn_close).
func (e *rpxEnv) disconnectAndWaitClose(conn *rpma.Conn) error {
	err := conn.Disconnect()
	if err != nil {
		e.fail("rpma_conn_disconnect", err)
	} else {
		err = e.waitClosed(conn)
	}
	if derr := e.deleteConn(conn); derr != nil && err == nil {
		err = e.fail("rpma_conn_delete", derr)
	}
	return err
}

// cqWait waits for a completion event of cq (rpma_cq_wait).
func (e *rpxEnv) cqWait(cq *rpma.CQ) error {
	ctx, cancel := e.op()
	defer cancel()
	if err := cq.Wait(ctx); err != nil {
		return e.fail("rpma_cq_wait", err)
	}
	return nil
}

// getWC waits for a completion event of cq and takes one completion
// (rpma_cq_wait and rpma_cq_get_wc(cq, 1)).
func (e *rpxEnv) getWC(cq *rpma.CQ) (verbs.WorkCompletion, error) {
	var wc [1]verbs.WorkCompletion
	if err := e.cqWait(cq); err != nil {
		return wc[0], err
	}
	if _, err := cq.GetWC(wc[:]); err != nil {
		return wc[0], e.fail("rpma_cq_get_wc", err)
	}
	return wc[0], nil
}

// connWaitWC waits on the connection's shared completion channel and takes
// one completion of the CQ that got the event (rpma_conn_wait and
// rpma_cq_get_wc).
func (e *rpxEnv) connWaitWC(conn *rpma.Conn) (verbs.WorkCompletion, error) {
	var wc [1]verbs.WorkCompletion
	ctx, cancel := e.op()
	cq, _, err := conn.Wait(ctx)
	cancel()
	if err != nil {
		return wc[0], e.fail("rpma_conn_wait", err)
	}
	if _, err := cq.GetWC(wc[:]); err != nil {
		return wc[0], e.fail("rpma_cq_get_wc", err)
	}
	return wc[0], nil
}

// waitAndValidate is the shared-channel examples'
// wait_and_validate_completion: one completion of the expected opcode.
//
// Unlike rpma_conn_wait, rpma.Conn.Wait does not keep the order of the
// events: cq.WaitChannel drains every pending event of the channel and
// then returns the CQs in an arbitrary order, so when the completions of a
// send and of the answer to it are both there, the receive may come first.
// A completion of the other kind the examples wait for (send or receive)
// is therefore kept for the next call instead of failing as the C
// examples would when the events come the other way round.
func (e *rpxEnv) waitAndValidate(conn *rpma.Conn, want verbs.WCOpcode) (verbs.WorkCompletion, error) {
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
			if wc, err = e.connWaitWC(conn); err != nil {
				return wc, err
			}
		}
		if wc.Status != verbs.WCSuccess {
			e.eprintf("rpma_%s() failed: %s\n", fn, wc.Status)
			return wc, rpxExit(-1)
		}
		if wc.Opcode == want {
			return wc, nil
		}
		if (wc.Opcode == verbs.WCSend || wc.Opcode == verbs.WCRecv) && len(e.early) == 0 {
			e.early = append(e.early, wc)
			continue
		}
		e.eprintf("unexpected wc.opcode value (0x%X != 0x%X)\n", uint32(wc.Opcode), uint32(want))
		return wc, rpxExit(-1)
	}
}

// rpxCommonData is the examples' struct common_data (28 bytes, host byte
// order): where the data is in the region, and the descriptors of the
// region and of the peer configuration.
type rpxCommonData struct {
	dataOffset   uint16
	mrDescSize   uint8
	pcfgDescSize uint8
	descriptors  [24]byte
}

const rpxCommonDataSize = 28

func (d *rpxCommonData) bytes() []byte {
	b := make([]byte, rpxCommonDataSize)
	binary.NativeEndian.PutUint16(b[0:], d.dataOffset)
	b[2], b[3] = d.mrDescSize, d.pcfgDescSize
	copy(b[4:], d.descriptors[:])
	return b
}

// rpxCommonDataOf returns the common_data at the start of private data,
// or false when there are fewer than 28 bytes.
func rpxCommonDataOf(pdata []byte) (rpxCommonData, bool) {
	var d rpxCommonData
	if len(pdata) < rpxCommonDataSize {
		return d, false
	}
	d.dataOffset = binary.NativeEndian.Uint16(pdata[0:])
	d.mrDescSize, d.pcfgDescSize = pdata[2], pdata[3]
	copy(d.descriptors[:], pdata[4:])
	return d, true
}

// mrDesc and pcfgDesc return the descriptors (cut at the array's end).
func (d *rpxCommonData) mrDesc() []byte {
	return d.descriptors[:min(int(d.mrDescSize), len(d.descriptors))]
}

func (d *rpxCommonData) pcfgDesc() []byte {
	start := min(int(d.mrDescSize), len(d.descriptors))
	return d.descriptors[start:min(start+int(d.pcfgDescSize), len(d.descriptors))]
}

// remoteMR decodes the region descriptor (rpma_mr_remote_from_descriptor).
func (e *rpxEnv) remoteMR(d *rpxCommonData) (*rpma.RemoteMR, error) {
	r, err := rpma.RemoteMRFromDescriptor(d.mrDesc())
	if err != nil {
		return nil, e.fail("rpma_mr_remote_from_descriptor", err)
	}
	return r, nil
}

// rpxCString returns the NUL-terminated string at the start of b.
func rpxCString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// rpxStrncpy copies s into dst as strncpy(dst, s, len(dst)) does: the
// rest of dst is zeroed, and s is cut at len(dst).
func rpxStrncpy(dst []byte, s string) {
	n := copy(dst, s)
	clear(dst[n:])
}

// rpxStrtoul parses a number as strtoul(s, NULL, 10) does: leading spaces,
// a sign, the digits up to the first non-digit (none: 0); on overflow it
// returns ULONG_MAX and false (errno ERANGE).
func rpxStrtoul(s string) (uint64, bool) {
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

// strtoulNoError is the examples' strtoul_noerror: an overflow ends the
// program.
func (e *rpxEnv) strtoulNoError(s string) (uint64, error) {
	v, ok := rpxStrtoul(s)
	if !ok {
		e.eprintf("strtoul(%s) overflowed\n", s)
		return 0, rpxExit(-1)
	}
	return v, nil
}

// rpxAtoi parses a number as atoi(3) does (an int; garbage is 0).
func rpxAtoi(s string) int {
	v, _ := rpxStrtoul(s)
	return int(int32(v))
}

// arg returns the i-th argument after the port, or "" and false.
func (e *rpxEnv) arg(i int) (string, bool) {
	if i < len(e.args) {
		return e.args[i], true
	}
	return "", false
}

// The examples' struct hello_t: enum lang_t lang; char str[1024].
const (
	rpxHelloStrSize   = 1024
	rpxHelloStrOffset = 4
	rpxHelloTSize     = rpxHelloStrOffset + rpxHelloStrSize
)

var rpxHelloStr = [2]string{"Hello world!", "¡Hola Mundo!"}

// rpxWriteHello writes greeting lang into a hello_t (write_hello_str).
func rpxWriteHello(h []byte, lang uint32) {
	binary.NativeEndian.PutUint32(h, lang)
	rpxStrncpy(h[rpxHelloStrOffset:rpxHelloTSize-1], rpxHelloStr[lang])
	h[rpxHelloTSize-1] = 0
}

// translate switches a hello_t to the next language (translate).
func (e *rpxEnv) translate(h []byte) {
	e.printf("translating...\n")
	rpxWriteHello(h, (binary.NativeEndian.Uint32(h)+1)%uint32(len(rpxHelloStr)))
}

// rpxHelloText returns the string of a hello_t.
func rpxHelloText(h []byte) string { return rpxCString(h[rpxHelloStrOffset:rpxHelloTSize]) }

// sleepUsec is usleep(3), cut short by the end of the context.
func (e *rpxEnv) sleepUsec(us uint64) {
	if us == 0 {
		return
	}
	t := time.NewTimer(time.Duration(min(us, uint64(1<<62)/1000)) * time.Microsecond)
	defer t.Stop()
	select {
	case <-t.C:
	case <-e.ctx.Done():
	}
}
