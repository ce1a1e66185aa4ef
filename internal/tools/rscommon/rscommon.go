// Package rscommon is what goverbs rstream and goverbs riostream share, as
// librdmacm's rstream.c and riostream.c (rdma-core 44) share common.c and
// most of their code: the options, the table of transfer sizes, the
// result lines, the data pattern of -T v, and the connection set-up over
// the rsocket package (or, for -T s, over the net package's TCP).
//
// # The C tools' -T options in Go
//
// The rsocket package's Conn is a blocking net.Conn with deadlines; C's
// rsockets have O_NONBLOCK, MSG_DONTWAIT and rpoll. The tools map them so
// that a run behaves as C's does, and prints the same:
//
//   - n (non-blocking, the default): every Read and Write is a poll loop.
//     The call gets a deadline 100 µs ahead; a call that times out is C's
//     EAGAIN (a Write returns what it has sent so far, as rsend does) and
//     is made again at once. As in C the process spins on the connection
//     and never sleeps for long.
//   - b (blocking): plain blocking calls; a receive waits for the whole
//     transfer (io.ReadFull, C's MSG_WAITALL).
//   - a (async): C calls rpoll before each call (with timeout 0, spinning,
//     unless b is given too). Go's Read and Write park on the completion
//     channel through the runtime's netpoller, which is that poll, so each
//     transfer step is one blocking call that returns what is ready.
//   - s (socket, rstream): the same test over kernel TCP, with the net
//     package, on the same address and port.
//   - f (fork, rstream): C's server forks a process per connection and
//     uses TCP; here the connection is served in the same process (one
//     connection at a time, as rstream has) over TCP. The output is the
//     same.
//   - r (resolve, rstream): C resolves with rdma_getaddrinfo; the rsocket
//     package resolves IP addresses and names itself, so r changes
//     nothing.
//
// Options C sets on its sockets become rsocket options: SO_SNDBUF and
// SO_RCVBUF (-B, else 1<<19) give buffers of twice that
// (SendBufferSize, ReceiveBufferSize); RDMA_INLINE is -i on the latency
// connection and 0 on the bandwidth one (InlineSize; it does not change
// the wire), RDMA_IOMAPSIZE 1 for riostream (IOMapSize), SO_KEEPALIVE
// with TCP_KEEPIDLE -k (KeepAlive). A server makes one Listener with the
// latency connection's options: its accepted connections take the
// Listener's sizes, as C's take the listening rsocket's (C's listen
// thread may accept before the server's set_options too).
package rscommon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/goverbs/goverbs/internal/tools/cmcommon"
	"github.com/goverbs/goverbs/rsocket"
)

// Size is one row of the C tools' test_size table: a transfer size and
// the -S all option that selects it (0: the default run).
type Size struct{ Size, Option int }

// Sizes is rstream.c's and riostream.c's test_size table.
var Sizes = func() []Size {
	s := []Size{{1 << 6, 0}}
	for sh := 7; sh <= 22; sh++ {
		opt := 1
		if sh == 12 || sh == 16 || sh == 20 {
			opt = 0
		}
		s = append(s, Size{1 << sh, opt}, Size{1<<sh + 1<<(sh-1), 1})
	}
	return s
}()

// MaxSize is the largest size of Sizes.
var MaxSize = Sizes[len(Sizes)-1].Size

// Opts are the tools' options, as rstream.c's globals.
type Opts struct {
	Prog       string // "rstream" or "riostream"
	Dst, Src   string // -s, -b
	Buffer     int    // -B (0: 1<<19)
	Inline     int    // -i
	Iterations int    // -I
	Count      int    // -C
	Size       int    // -S
	Custom     bool   // -I, -C or -S given
	SizeOption int    // -S all
	Port       string // -p
	Keepalive  int    // -k
	UseRS      bool   // not -T s/f
	Async      bool   // -T a
	Blocking   bool   // -T b (flags without MSG_DONTWAIT)
	Verify     bool   // -T v
	Fork       bool   // -T f
	Resolve    bool   // -T r
}

// Optimization is which connection of the default run a connection is.
type Optimization int

// The optimizations (rs_optimization).
const (
	OptNone Optimization = iota
	OptLatency
	OptBandwidth
)

// Parse parses args like the C tool's getopt loop, with optstring and the
// -T letters tlet and words tword allowed. It returns -1 to go on, or the
// exit status.
func Parse(o *Opts, args []string, optstring, tlet string, twords []string, usage string, stdout, stderr io.Writer) int {
	*o = Opts{Prog: o.Prog, Inline: 64, Iterations: 1, Count: 1000, Size: 1000, Port: "7471", UseRS: true}
	out, errw := &cmcommon.Out{W: stdout}, &cmcommon.Out{W: stderr}
	atoi := func(s string) int { // atoi(3): leading digits, else 0
		s = strings.TrimSpace(s)
		i := 0
		if i < len(s) && (s[i] == '-' || s[i] == '+') {
			i++
		}
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		n, _ := cmcommon.Atoi(s[:i])
		return n
	}
	opts, _ := cmcommon.Getopt(args, optstring)
	for _, op := range opts {
		switch op.Opt {
		case 's':
			o.Dst = op.Arg
		case 'b':
			o.Src = op.Arg
		case 'f':
			switch a := strings.ToLower(op.Arg); {
			case strings.HasPrefix(a, "ip"):
			case strings.HasPrefix(a, "gid"):
				errw.Printf("goverbs %s: -f gid: AF_IB addresses are not supported\n", o.Prog)
				return 1
			default:
				errw.Printf("Warning: unknown address format\n")
			}
		case 'B':
			o.Buffer = atoi(op.Arg)
		case 'i':
			o.Inline = atoi(op.Arg)
		case 'I':
			o.Custom, o.Iterations = true, atoi(op.Arg)
		case 'C':
			o.Custom, o.Count = true, atoi(op.Arg)
		case 'S':
			if strings.HasPrefix(strings.ToLower(op.Arg), "all") {
				o.SizeOption = 1
			} else {
				o.Custom, o.Size = true, atoi(op.Arg)
			}
		case 'p':
			o.Port = op.Arg
		case 'k':
			o.Keepalive = atoi(op.Arg)
		case 'T':
			if o.testOpt(op.Arg, tlet, twords) {
				break
			}
			out.Printf(usage, "goverbs "+o.Prog)
			return 1
		default:
			cmcommon.GetoptError(errw, "goverbs "+o.Prog, op)
			out.Printf(usage, "goverbs "+o.Prog)
			return 1
		}
	}
	if o.Custom && (o.Size < 1 || o.Count < 1 || o.Iterations < 1) {
		// C would malloc(0) or divide by zero; say why instead.
		errw.Printf("goverbs %s: -S, -C and -I must be positive\n", o.Prog)
		return 1
	}
	return -1
}

// testOpt is set_test_opt: one letter of tlet, or a word of twords
// (matched on the word's length, case-insensitively, as strncasecmp).
func (o *Opts) testOpt(arg, tlet string, twords []string) bool {
	c := byte(0)
	if len(arg) == 1 {
		if !strings.Contains(tlet, arg) {
			return false
		}
		c = arg[0]
	} else {
		for _, w := range twords {
			if len(arg) >= len(w) && strings.EqualFold(arg[:len(w)], w) {
				c = w[0]
				break
			}
		}
	}
	switch c {
	case 's':
		o.UseRS = false
	case 'a':
		o.Async = true
	case 'b':
		o.Blocking = true
	case 'f':
		o.Fork, o.UseRS = true, false
	case 'n':
		o.Blocking = false
	case 'r':
		o.Resolve = true
	case 'v':
		o.Verify = true
	default:
		return false
	}
	return true
}

// SizeStr is common.c's size_str.
func SizeStr(size int64) string {
	base, mag := int64(1), ""
	switch {
	case size >= 1<<30:
		base, mag = 1<<30, "g"
	case size >= 1<<20:
		base, mag = 1<<20, "m"
	case size >= 1<<10:
		base, mag = 1<<10, "k"
	}
	if size/base < 10 {
		if f := size % base * 10 / base; f != 0 {
			return fmt.Sprintf("%d.%d%s", size/base, f, mag)
		}
	}
	return fmt.Sprintf("%d%s", size/base, mag)
}

// CntStr is common.c's cnt_str.
func CntStr(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%db", n/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%dm", n/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%dk", n/1e3)
	}
	return fmt.Sprint(n)
}

// SizeToCount is common.c's size_to_count.
func SizeToCount(size int) int {
	switch {
	case size >= 1<<20:
		return 100
	case size >= 1<<16:
		return 1000
	case size >= 1<<10:
		return 10000
	}
	return 100000
}

// Header is the line the tools print before their results.
const Header = "name      bytes   xfers   iters   total       time     Gb/sec    usec/xfer\n"

// Test is one test of a run: its name and shape.
type Test struct {
	Name                    string
	Size, Count, Iterations int
}

// Latency is init_latency_test: the name is the size as size_str
// prints it into 5 bytes.
func Latency(size int) Test {
	return Test{Name: trunc4(SizeStr(int64(size))) + "_lat", Size: size, Count: 1, Iterations: SizeToCount(size)}
}

// Bandwidth is init_bandwidth_test.
func Bandwidth(size int) Test {
	return Test{Name: trunc4(SizeStr(int64(size))) + "_bw", Size: size, Count: SizeToCount(size), Iterations: 1}
}

func trunc4(s string) string { return s[:min(len(s), 4)] }

// Perf is show_perf's line for t run in d.
func (t Test) Perf(d time.Duration) string {
	usec := float64(d.Microseconds())
	bytes := int64(t.Iterations) * int64(t.Count) * int64(t.Size) * 2
	return fmt.Sprintf("%-10s%-8s%-8s%-8s%-8s%8.2fs%10.2f%11.2f\n", t.Name, SizeStr(int64(t.Size)),
		CntStr(int64(t.Count)), CntStr(int64(t.Iterations)), SizeStr(bytes),
		usec/1e6, float64(bytes*8)/(1000*usec), usec/float64(t.Iterations)/float64(t.Count*2))
}

// Pattern is common.c's format_buf and verify_buf: one counter for what
// this process sends and one for what it receives, over the whole run.
type Pattern struct {
	send, recv byte
	total      int64
}

// Format fills b with the next bytes of the send counter.
func (p *Pattern) Format(b []byte) {
	for i := range b {
		b[i] = p.send
		p.send++
	}
}

// Matches reports whether b holds the next bytes of the receive counter,
// without consuming them.
func (p *Pattern) Matches(b []byte) bool {
	v := p.recv
	for i := range b {
		if b[i] != v {
			return false
		}
		v++
	}
	return true
}

// Verify checks b against the receive counter; on a difference it prints
// what verify_buf prints and fails.
func (p *Pattern) Verify(b []byte, out io.Writer) error {
	for i := range b {
		if b[i] != p.recv {
			fmt.Fprintf(out, "data verification failed byte %d\n", p.total)
			return errVerify
		}
		p.recv++
		p.total++
	}
	return nil
}

var errVerify = errors.New("data verification failed")

// nbSpin is how long a call of the non-blocking mode (C's MSG_DONTWAIT)
// polls before it sleeps. C's tool calls rsend/rrecv again at once on
// EAGAIN and so never sleeps; a Go call that polls this long is that
// loop, without a deadline per call (each one read the clock, which
// under emulation cost as much as the ring).
const nbSpin = time.Second

// Conn is a connection of a run: an rsocket Conn, or a TCP one for -T s.
type Conn struct {
	net.Conn
	RS *rsocket.Conn // nil over TCP
	o  *Opts
}

// Send is send_xfer's loop: all of p. It prints perror("rsend")'s line
// on failure.
func (c *Conn) Send(p []byte, errw io.Writer) error {
	for off := 0; off < len(p); {
		n, err := c.Write(p[off:])
		off += n
		if err != nil {
			fmt.Fprintf(errw, "rsend: %s\n", cmcommon.Strerror(err))
			return err
		}
	}
	return nil
}

// Recv is recv_xfer's loop: all of p. It prints perror("rrecv")'s line
// on failure.
func (c *Conn) Recv(p []byte, errw io.Writer) error {
	if c.o.Blocking && !c.o.Async {
		_, err := io.ReadFull(c, p)
		if err != nil {
			fmt.Fprintf(errw, "rrecv: %s\n", strerror(err))
		}
		return err
	}
	for off := 0; off < len(p); {
		n, err := c.Read(p[off:])
		off += n
		if err != nil {
			fmt.Fprintf(errw, "rrecv: %s\n", strerror(err))
			return err
		}
	}
	return nil
}

// strerror is what perror prints after rrecv: C's rrecv returns 0 at the
// end of the stream, with errno unchanged (usually "Success").
func strerror(err error) string {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "Success"
	}
	return cmcommon.Strerror(err)
}

// Shutdown is rshutdown(SHUT_RDWR) and rclose.
func (c *Conn) Shutdown() {
	if c.RS != nil {
		c.RS.Close() // rshutdown(SHUT_RDWR), then the teardown
		return
	}
	if tc, ok := c.Conn.(*net.TCPConn); ok {
		tc.CloseRead()
		tc.CloseWrite()
	}
	c.Conn.Close()
}

// rsOptions are set_options' settings for a connection of kind opt.
func (o *Opts) rsOptions(opt Optimization, iomap bool) []rsocket.Option {
	buf := o.Buffer
	if buf == 0 {
		buf = 1 << 19
	}
	opts := []rsocket.Option{rsocket.SendBufferSize(2 * buf), rsocket.ReceiveBufferSize(2 * buf)}
	switch opt {
	case OptLatency:
		opts = append(opts, rsocket.InlineSize(o.Inline))
	case OptBandwidth:
		opts = append(opts, rsocket.InlineSize(0))
	}
	if iomap {
		opts = append(opts, rsocket.IOMapSize(1))
	}
	if o.Keepalive != 0 {
		opts = append(opts, rsocket.KeepAlive(time.Duration(o.Keepalive)*time.Second))
	}
	if !o.Blocking && !o.Async {
		// C's non-blocking calls (MSG_DONTWAIT) spin on EAGAIN in the
		// tool's loop, never sleeping (nbSpin).
		opts = append(opts, rsocket.PollTime(nbSpin))
	}
	return opts
}

// keepaliveLines is what set_keepalive prints.
func (o *Opts) keepaliveLines(out io.Writer) {
	if o.Keepalive != 0 {
		fmt.Fprintf(out, "Keepalive: ON\n  time: %d\n", o.Keepalive)
	}
}

// tcpOptions sets set_options' socket options on a TCP connection.
func (o *Opts) tcpOptions(c net.Conn) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	buf := o.Buffer
	if buf == 0 {
		buf = 1 << 19
	}
	tc.SetReadBuffer(buf)
	tc.SetWriteBuffer(buf)
	tc.SetNoDelay(true)
	if o.Keepalive != 0 {
		tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: time.Duration(o.Keepalive) * time.Second})
	}
}

// Listener is the server's listening socket.
type Listener struct {
	rs  *rsocket.Listener
	tcp net.Listener
	o   *Opts
}

// Listen is server_listen: on -b's address (every address without it)
// and -p's port, with the latency connection's options (see the package
// comment).
func (o *Opts) Listen(iomap bool, errw io.Writer) (*Listener, error) {
	addr := net.JoinHostPort(o.Src, o.Port)
	if !o.UseRS {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			fmt.Fprintf(errw, "rlisten: %s\n", cmcommon.Strerror(err))
			return nil, err
		}
		return &Listener{tcp: l, o: o}, nil
	}
	opt := OptLatency
	if o.Custom {
		opt = OptNone
	}
	l, err := rsocket.Listen("tcp", addr, append(o.rsOptions(opt, iomap), rsocket.Backlog(1))...)
	if err != nil {
		fmt.Fprintf(errw, "rlisten: %s\n", cmcommon.Strerror(err))
		return nil, err
	}
	return &Listener{rs: l, o: o}, nil
}

// Close closes the listener.
func (l *Listener) Close() error {
	if l.rs != nil {
		return l.rs.Close()
	}
	return l.tcp.Close()
}

// Accept is server_connect: the next connection.
func (l *Listener) Accept(out, errw io.Writer) (*Conn, error) {
	l.o.keepaliveLines(out) // set_options on the listener
	var c *Conn
	if l.rs != nil {
		rc, err := l.rs.AcceptContext(context.Background())
		if err != nil {
			fmt.Fprintf(errw, "raccept: %s\n", cmcommon.Strerror(err))
			return nil, err
		}
		c = &Conn{Conn: rc, RS: rc, o: l.o}
	} else {
		tc, err := l.tcp.Accept()
		if err != nil {
			fmt.Fprintf(errw, "raccept: %s\n", cmcommon.Strerror(err))
			return nil, err
		}
		l.o.tcpOptions(tc)
		c = &Conn{Conn: tc, o: l.o}
	}
	l.o.keepaliveLines(out) // set_options on the accepted socket
	return c, nil
}

// Connect is client_connect for a connection of kind opt.
func (o *Opts) Connect(opt Optimization, iomap, bind bool, out, errw io.Writer) (*Conn, error) {
	addr := net.JoinHostPort(o.Dst, o.Port)
	o.keepaliveLines(out)
	var local netip.AddrPort
	if bind && o.Src != "" {
		ip, err := cmcommon.Lookup(o.Src)
		if err != nil {
			fmt.Fprintf(out, "getaddrinfo src_addr: %s\n", err)
			return nil, err
		}
		port, err := cmcommon.ParsePort(o.Port)
		if err != nil {
			fmt.Fprintf(out, "getaddrinfo src_addr: %s\n", err)
			return nil, err
		}
		local = netip.AddrPortFrom(ip, port)
	}
	if !o.UseRS {
		d := net.Dialer{}
		if local.IsValid() {
			d.LocalAddr = net.TCPAddrFromAddrPort(local)
		}
		tc, err := d.Dial("tcp", addr)
		if err != nil {
			fmt.Fprintf(errw, "rconnect: %s\n", cmcommon.Strerror(err))
			return nil, err
		}
		o.tcpOptions(tc)
		return &Conn{Conn: tc, o: o}, nil
	}
	opts := o.rsOptions(opt, iomap)
	if local.IsValid() {
		opts = append(opts, rsocket.LocalAddr(local))
	}
	rc, err := rsocket.Dial(context.Background(), "tcp", addr, opts...)
	if err != nil {
		fmt.Fprintf(errw, "rconnect: %s\n", cmcommon.Strerror(err))
		return nil, err
	}
	return &Conn{Conn: rc, RS: rc, o: o}, nil
}

// Session is one run of rstream or riostream: the options, the output,
// the listener (server side) and the connection of the tests under way.
type Session struct {
	O    Opts
	Out  *cmcommon.Out
	Errw io.Writer
	C    *Conn
	L    *Listener
	// IOMap asks for the riomap window (riostream); Bind binds the client
	// to -b's address before it connects (rstream).
	IOMap, Bind bool
}

// Client reports whether this side connects (-s given).
func (s *Session) Client() bool { return s.O.Dst != "" }

// connect is client_connect or server_connect: s.C is the new connection.
func (s *Session) connect(opt Optimization) error {
	var err error
	if s.Client() {
		s.C, err = s.O.Connect(opt, s.IOMap, s.Bind, s.Out.W, s.Errw)
	} else {
		s.C, err = s.L.Accept(s.Out.W, s.Errw)
	}
	return err
}

// Run is the C tools' run once the buffer is allocated: the server
// listens, the header is printed, then either the custom test (-S with -C
// or -I) runs on one connection, or every size up to -S's option runs,
// latency first and bandwidth second, each on its own connection. test
// runs one test on s.C and returns 0 or -1; as in C, a failed test of the
// size sweep does not end the run.
func (s *Session) Run(test func(Test) int) int {
	if !s.Client() {
		l, err := s.O.Listen(s.IOMap, s.Errw)
		if err != nil {
			return -1
		}
		s.L = l
		defer l.Close()
	}
	s.Out.Printf(Header)
	if s.O.Custom {
		if s.connect(OptNone) != nil {
			return -1
		}
		ret := test(Test{Name: "custom", Size: s.O.Size, Count: s.O.Count, Iterations: s.O.Iterations})
		s.C.Shutdown()
		return ret
	}
	for _, opt := range []Optimization{OptLatency, OptBandwidth} {
		if s.connect(opt) != nil {
			return -1
		}
		for _, sz := range Sizes {
			if sz.Option > s.O.SizeOption {
				continue
			}
			t := Latency(sz.Size)
			if opt == OptBandwidth {
				t = Bandwidth(sz.Size)
			}
			test(t)
		}
		s.C.Shutdown()
	}
	return 0
}
