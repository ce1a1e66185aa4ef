package rsocket_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/goverbs/goverbs/cm"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/internal/testutil/proc"
	"github.com/goverbs/goverbs/internal/tools/rscommon"
	"github.com/goverbs/goverbs/rsocket"
	"github.com/goverbs/goverbs/verbs"
)

// Interop with C: rdma-core 44's rstream (Debian's rdmacm-utils) on the
// other end, as server against a Go client and as client against a Go
// server. rstream's custom test (-S size -C count -I iterations, with -T v)
// is: 16 bytes client→server and back, then per iteration count
// transfers of size bytes client→server and count back; every byte is
// the next value of a counter that starts at 0 in each direction
// (common.c's format_buf and verify_buf). Its side ends with
// rshutdown(SHUT_RDWR) and rclose.

// rstreamSide runs the Go end of that test on c and checks every byte.
func rstreamSide(c net.Conn, client bool, size, count, iters int) error {
	return rstreamPaced(c, client, size, count, iters, -1)
}

// rstreamPaced is rstreamSide with a pause of 300 ms after the first
// pause transfers this side sends: a C receiver that has read everything
// before then polls its CQ, which is when it grants credits.
func rstreamPaced(c net.Conn, client bool, size, count, iters, pause int) error {
	var sendCtr, recvCtr byte
	var sent, got int64
	buf := make([]byte, max(size, 16))
	send := func(n int) error {
		for i := range buf[:n] {
			buf[i] = sendCtr
			sendCtr++
		}
		if _, err := c.Write(buf[:n]); err != nil {
			return fmt.Errorf("write after %d bytes: %w", sent, err)
		}
		sent += int64(n)
		return nil
	}
	recv := func(n int) error {
		if _, err := io.ReadFull(c, buf[:n]); err != nil {
			return fmt.Errorf("read after %d bytes: %w", got, err)
		}
		for i, b := range buf[:n] {
			if b != recvCtr {
				return fmt.Errorf("byte %d of the stream is %d, want %d", got+int64(i), b, recvCtr)
			}
			recvCtr++
		}
		got += int64(n)
		return nil
	}
	first, second := send, recv
	if !client {
		first, second = recv, send
	}
	if err := first(16); err != nil {
		return err
	}
	if err := second(16); err != nil {
		return err
	}
	for range iters {
		for i := range count {
			if i == pause && client {
				time.Sleep(300 * time.Millisecond)
			}
			if err := first(size); err != nil {
				return err
			}
		}
		for range count {
			if err := second(size); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkRstreamOutput checks the result line rstream printed for its
// custom test.
func checkRstreamOutput(t *testing.T, p *proc.Proc, size, count, iters int) {
	t.Helper()
	for _, l := range p.Lines() {
		f := strings.Fields(l)
		if len(f) == 0 || f[0] != "custom" {
			continue
		}
		want := []string{"custom", rscommon.SizeStr(int64(size)), rscommon.CntStr(int64(count)), rscommon.CntStr(int64(iters)),
			rscommon.SizeStr(int64(iters) * int64(count) * int64(size) * 2)}
		if len(f) != 8 || strings.Join(f[:5], " ") != strings.Join(want, " ") {
			t.Errorf("rstream's result line %q, want it to begin %q", l, want)
		}
		return
	}
	t.Errorf("rstream printed no result line: %v", p)
}

type interopCase struct {
	name               string
	size, count, iters int
	cBuf               int    // rstream -B: C's buffers are twice this (0: rstream's 512 KiB)
	cMode              string // rstream -T: b(locking), n(onblocking, rstream's default), a(sync: rpoll)
	opts               []rsocket.Option
}

var interopCases = []interopCase{
	// Many small messages: C's credit-only updates.
	{"64B", 64, 300, 1, 0, "b", nil},
	// Buffers of a few KiB on both sides: halves come and go many times.
	{"1000B-small-buffers", 1000, 40, 2, 2048, "b", []rsocket.Option{rsocket.ReceiveBufferSize(4096), rsocket.SendBufferSize(4096)}},
	{"4097B-nonblocking", 4097, 20, 2, 8192, "n", []rsocket.Option{rsocket.ReceiveBufferSize(10_000), rsocket.InlineSize(0)}},
	// Each transfer larger than the receiving buffer, both ways.
	{"65537B-beyond-buffers", 65537, 6, 2, 16384, "b", []rsocket.Option{rsocket.ReceiveBufferSize(20_002), rsocket.ReceiveQueueSize(16)}},
	{"300000B-async", 300000, 3, 1, 65536, "a", nil},
	{"1MiB", 1 << 20, 2, 1, 0, "b", nil},
}

// cArgs are rstream's options for a case.
func (tc interopCase) cArgs() []string {
	a := []string{"-S", strconv.Itoa(tc.size), "-C", strconv.Itoa(tc.count), "-I", strconv.Itoa(tc.iters), "-T", "v", "-T", tc.cMode}
	if tc.cBuf != 0 {
		a = append(a, "-B", strconv.Itoa(tc.cBuf))
	}
	return a
}

// cHalf is the half buffer C publishes: rstream sets SO_RCVBUF to -B (or
// 1<<19), which rsocket doubles.
func (tc interopCase) cHalf() uint32 {
	if tc.cBuf == 0 {
		return 1 << 19
	}
	return uint32(tc.cBuf)
}

// checkCPeer checks what the wire showed of a C peer: its private data
// (rsocket-44.md §1.2: version 1, flags 0x02 from a little-endian host,
// 384 credits, no iomap, a 2-entry target SGL, half its receive buffer),
// and that it ended with the in-band disconnect.
func checkCPeer(t *testing.T, c *rsocket.Conn, half uint32) {
	t.Helper()
	v, flags, credits, iomap, entries, gotHalf := rsocket.PeerConnData(c)
	if v != 1 || flags != 0x02 || credits != 384 || iomap != 0 || entries != 2 || gotHalf != half {
		t.Errorf("C's private data: version %d flags %#x credits %d iomap %d SGL entries %d half %d; want 1 0x2 384 0 2 %d",
			v, flags, credits, iomap, entries, gotHalf, half)
	}
	st := rsocket.Stats(c)
	buf, credit, _ := rsocket.Sent(c)
	t.Logf("from C: %v; to C: SGL updates %d with a buffer and %d credit-only", st, buf, credit)
	if st.Disconnect != 1 {
		t.Errorf("C's rshutdown(SHUT_RDWR): %d in-band disconnects seen, want 1", st.Disconnect)
	}
}

// expectEOF reads until the C peer's disconnect: io.EOF, not a reset. It
// returns w's evidence instead of failing when siw's stall (watchSiw) ended
// the wait.
func expectEOF(t *testing.T, c *rsocket.Conn, w *proc.StallWatch) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(time.Minute))
	if n, err := c.Read(make([]byte, 16)); n != 0 || err != io.EOF {
		if why := w.Stalled(); why != "" {
			return why
		}
		t.Errorf("after the test: read %d, %v; want io.EOF", n, err)
	}
	return ""
}

func rstreamPath(t *testing.T) string {
	device(t)
	return testutil.LookPath(t, "rstream")
}

// dialC dials a C server once it listens. rstream and riostream set
// their options (-B, RDMA_IOMAPSIZE) on the listening rsocket after
// rlisten, while librdmacm's listen thread already accepts in the
// background: a request that comes in between gets rsocket's defaults
// (seen: riostream -B 8192 answering with no iomap entry). So dialC waits
// until rdma_cm lists the server's listening ID, and a little more.
func dialC(t *testing.T, srv *proc.Proc, addr string, opts ...rsocket.Option) *rsocket.Conn {
	t.Helper()
	c := dialCOrSiw(t, srv, addr, opts...)
	if c == nil {
		t.Fatalf("dial the C server: CONNECT_ERROR -22 on iWARP (siwFirstSend)\n%v", srv)
	}
	return c
}

// dialCOrSiw is dialC, except that it returns nil when the dial failed as
// siwFirstSend describes.
func dialCOrSiw(t *testing.T, srv *proc.Proc, addr string, opts ...rsocket.Option) *rsocket.Conn {
	t.Helper()
	ctx := timeout(t, 2*time.Minute)
	rdma := testutil.LookPath(t, "rdma")
	for !listening(rdma, srv.Cmd.Process.Pid, addr) {
		if srv.Exited() || ctx.Err() != nil {
			t.Fatalf("the C server never listened on %s:\n%v", addr, srv)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	var redial testutil.Redial
	for {
		c, err := rsocket.Dial(ctx, "tcp", addr, opts...)
		if err == nil {
			t.Cleanup(func() { c.Close() })
			return c
		}
		if siwFirstSend(t, err) {
			return nil
		}
		// siw's rare refusal at CONNECT (testutil.Redial): the server
		// saw no request, so dial again.
		if redial.Again(t, siwRefused(t, err) && !srv.Exited(), "siw: Dial's CONNECT", err) {
			continue
		}
		if !errors.Is(err, syscall.ECONNREFUSED) || srv.Exited() || ctx.Err() != nil {
			t.Fatalf("dial the C server: %v\n%v", err, srv)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// siwRefused reports whether a dial failed with EADDRNOTAVAIL on iWARP.
func siwRefused(t *testing.T, err error) bool {
	return testutil.Device(t).NodeType.Transport() == verbs.TransportIWARP && errors.Is(err, syscall.EADDRNOTAVAIL)
}

// siwFirstSend reports whether a dial failed the way siw fails a client
// whose passive peer sends first (docs/providers.md, "siw: who sends
// first"): CONNECT_ERROR with -EINVAL on iWARP. C's passive rsocket does
// send first there: a new connection's rbuf_bytes_avail is half the
// buffer, so rs_give_credits holds at the server's first rs_process_cq
// and it writes an SGL update before the client's first message (the Go
// side holds its own until then). When that update reaches the client's
// socket before siw has read the MPA reply, siw fails the connect.
func siwFirstSend(t *testing.T, err error) bool {
	var ee *cm.EventError
	return testutil.Device(t).NodeType.Transport() == verbs.TransportIWARP &&
		errors.As(err, &ee) && ee.Event == cm.EventConnectError && ee.Status == -int(syscall.EINVAL)
}

func TestInteropGoClientCServer(t *testing.T) {
	bin := rstreamPath(t)
	addr := testutil.Addr(t)
	for _, tc := range interopCases {
		t.Run(tc.name, func(t *testing.T) {
			siwRetry(t, func(t *testing.T) string { return goClientCServer(t, bin, addr, tc) })
		})
	}
}

// goClientCServer runs one case of TestInteropGoClientCServer. It returns
// the evidence when it failed in siw's stall (watchSiw), else "".
func goClientCServer(t *testing.T, bin, addr string, tc interopCase) string {
	var srv *proc.Proc
	var c *rsocket.Conn
	var port int
	for try := 1; c == nil; try++ {
		port = testutil.Port()
		args := append([]string{bin, "-b", addr, "-p", strconv.Itoa(port)}, tc.cArgs()...)
		var err error
		if srv, err = proc.Start(t, "C rstream server", args, nil, 4*time.Minute); err != nil {
			t.Fatal(err)
		}
		if c = dialCOrSiw(t, srv, net.JoinHostPort(addr, strconv.Itoa(port)), tc.opts...); c == nil {
			// The C server holds the failed connection as its own: a
			// new server, on a new port.
			srv.Cmd.Process.Kill()
			srv.Wait()
			if try == proc.MaxRuns {
				t.Fatalf("siw, attempt %d: the connect failed with CONNECT_ERROR -22 every time", try)
			}
			t.Logf("siw, attempt %d: CONNECT_ERROR -22 (C's server sent first); running the case again (docs/providers.md, siw: who sends first)", try)
		}
	}
	w := watchSiw(t, port, srv)
	defer w.Stop()
	defer c.Close() // now, not at the end of the test (dialCOrSiw's cleanup)
	// 64B: C reads the first 250 messages, runs dry and polls (granting
	// credits, with no buffer half free: a credit-only update) before
	// the rest come.
	pause := -1
	if tc.size == 64 {
		pause = 250
	}
	if err := rstreamPaced(c, true, tc.size, tc.count, tc.iters, pause); err != nil {
		return stalledOr(t, w, "Go client: %v\n%v", err, srv)
	}
	if why := endCase(t, c, srv, w, tc); why != "" {
		return why
	}
	if tc.size == 64 && rsocket.Stats(c).SGLCredit == 0 {
		t.Errorf("no credit-only update from C after %d small messages", tc.count)
	}
	return ""
}

func TestInteropCClientGoServer(t *testing.T) {
	bin := rstreamPath(t)
	addr := testutil.Addr(t)
	for _, tc := range interopCases {
		t.Run(tc.name, func(t *testing.T) {
			siwRetry(t, func(t *testing.T) string { return cClientGoServer(t, bin, addr, tc) })
		})
	}
}

// cClientGoServer runs one case of TestInteropCClientGoServer. It returns
// the evidence when it failed in siw's stall (watchSiw), else "".
func cClientGoServer(t *testing.T, bin, addr string, tc interopCase) string {
	l := listen(t, tc.opts...)
	port := l.Addr().(*rsocket.Addr).Port()
	args := append([]string{bin, "-s", addr, "-p", strconv.Itoa(int(port))}, tc.cArgs()...)
	cli, err := proc.Start(t, "C rstream client", args, nil, 4*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	w := watchSiw(t, int(port), cli)
	defer w.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	go func() { // a client that dies ends the wait
		select {
		case <-cli.Done():
			time.Sleep(5 * time.Second)
			cancel()
		case <-ctx.Done():
		}
	}()
	c, err := l.AcceptContext(ctx)
	if err != nil {
		return stalledOr(t, w, "accept: %v\n%v", err, cli)
	}
	defer c.Close()
	if err := rstreamSide(c, false, tc.size, tc.count, tc.iters); err != nil {
		return stalledOr(t, w, "Go server: %v\n%v", err, cli)
	}
	if why := endCase(t, c, cli, w, tc); why != "" {
		return why
	}
	// 64B: reading 192 of C's 300 messages (half the credits) makes this
	// side grant again, with no buffer half to publish: a zero-length
	// WRITE WITH IMM with no address or key, which C's device must take.
	if _, credit, _ := rsocket.Sent(c); tc.size == 64 && credit == 0 {
		t.Errorf("no credit-only update sent to C after %d small messages", tc.count)
	}
	return ""
}

// watchSiw watches a pair of this process and a C rsocket peer on iWARP
// for siw's stall (proc.WatchSiw: bytes left unread in a socket of the
// connection on port while both ends wait; docs/providers.md, "siw: who
// sends first"), and kills the peer when it finds one, which ends this
// side's wait. nil on other transports. The caller stops it.
func watchSiw(t *testing.T, port int, peer *proc.Proc) *proc.StallWatch {
	if testutil.Device(t).NodeType.Transport() != verbs.TransportIWARP {
		return nil
	}
	// With no check, WatchSiw's server is only one more process to kill:
	// the C peer, whichever role it has.
	return proc.WatchSiw(port, peer, nil)
}

// endCase ends a case after its transfer: the C peer's disconnect read as
// io.EOF, its exit and output checked, and what it sent counted
// (checkCPeer). It returns w's evidence when siw's stall ended a wait,
// else "".
func endCase(t *testing.T, c *rsocket.Conn, peer *proc.Proc, w *proc.StallWatch, tc interopCase) string {
	t.Helper()
	if why := expectEOF(t, c, w); why != "" {
		return why
	}
	if err := peer.Wait(); err != nil {
		return stalledOr(t, w, "the C peer failed: %v", peer)
	}
	checkRstreamOutput(t, peer, tc.size, tc.count, tc.iters)
	checkCPeer(t, c, tc.cHalf())
	return ""
}

// stalledOr returns w's evidence when siw's stall explains a failure, and
// otherwise fails the test with the message.
func stalledOr(t *testing.T, w *proc.StallWatch, format string, args ...any) string {
	t.Helper()
	if why := w.Stalled(); why != "" {
		return why
	}
	t.Fatalf(format, args...)
	return ""
}

// siwRetry runs a case, and runs it again while it reports siw's stall,
// at most proc.MaxRuns times in all. Any other failure fails the test.
func siwRetry(t *testing.T, run func(*testing.T) string) {
	for try := 1; ; try++ {
		why := run(t)
		if why == "" {
			return
		}
		if try == proc.MaxRuns {
			t.Fatalf("siw, attempt %d: %s, in every run", try, why)
		}
		t.Logf("siw, attempt %d: %s; running the case again (docs/providers.md, siw: who sends first)", try, why)
	}
}

// Keepalives both ways: C's (rstream -k 1: a zero-length RDMA WRITE with
// rkey 0 every second, which our device must accept without a CQE) while
// the Go client idles, and ours to C (KeepAlive); then the test runs as
// usual.
func TestInteropKeepalive(t *testing.T) {
	bin := rstreamPath(t)
	addr := testutil.Addr(t)
	port := testutil.Port()
	tc := interopCase{size: 1000, count: 10, iters: 1, cMode: "b"}
	args := append([]string{bin, "-b", addr, "-p", strconv.Itoa(port), "-k", "1"}, tc.cArgs()...)
	srv, err := proc.Start(t, "C rstream server", args, nil, 4*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c := dialC(t, srv, net.JoinHostPort(addr, strconv.Itoa(port)), rsocket.KeepAlive(100*time.Millisecond))
	time.Sleep(3500 * time.Millisecond) // C blocks in rrecv; keepalives cross
	if err := rstreamSide(c, true, tc.size, tc.count, tc.iters); err != nil {
		t.Fatalf("Go client: %v\n%v", err, srv)
	}
	expectEOF(t, c, nil) // C's keepalives wake siw's receive: no stall to watch for
	if err := srv.Wait(); err != nil {
		t.Fatalf("C server: %v", srv)
	}
	out := srv.Stdout.String()
	if !strings.Contains(out, "Keepalive: ON") || !strings.Contains(out, "  time: 1") {
		t.Errorf("rstream -k 1 did not turn its keepalive on:\n%s", out)
	}
	checkRstreamOutput(t, srv, tc.size, tc.count, tc.iters)
	if _, _, ka := rsocket.Sent(c); ka < 10 {
		t.Errorf("%d keepalives sent in 3.5 s at 100 ms", ka)
	}
}

// A C peer killed in the middle of a transfer: the Go side's blocked Read
// (C client killed) or Write (C server killed) fails with ECONNRESET
// once the kernel's DREQ for the dead process's ID arrives, and never
// hangs.
func TestInteropPeerKilled(t *testing.T) {
	bin := rstreamPath(t)
	addr := testutil.Addr(t)
	tc := interopCase{size: 100_000, count: 100_000, iters: 1, cMode: "b"}
	check := func(t *testing.T, c *rsocket.Conn, p *proc.Proc, errc <-chan error) {
		t.Helper()
		time.Sleep(time.Second) // mid-transfer
		killed := time.Now()
		p.Cmd.Process.Kill()
		p.Wait()
		select {
		case err := <-errc:
			if !errors.Is(err, syscall.ECONNRESET) {
				t.Errorf("after the peer died: %v, want ECONNRESET", err)
			}
			t.Logf("the Go side saw %v %v after the kill", err, time.Since(killed).Round(time.Millisecond))
		case <-time.After(time.Minute):
			t.Fatal("the Go side still blocked a minute after the peer died")
		}
	}
	t.Run("C client", func(t *testing.T) {
		l := listen(t)
		port := l.Addr().(*rsocket.Addr).Port()
		args := append([]string{bin, "-s", addr, "-p", strconv.Itoa(int(port))}, tc.cArgs()...)
		cli, err := proc.Start(t, "C rstream client", args, nil, 4*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		c, err := l.AcceptContext(timeout(t, 2*time.Minute))
		if err != nil {
			t.Fatalf("accept: %v\n%v", err, cli)
		}
		defer c.Close()
		errc := make(chan error, 1)
		go func() { errc <- rstreamSide(c, false, tc.size, tc.count, tc.iters) }()
		check(t, c, cli, errc)
	})
	t.Run("C server", func(t *testing.T) {
		port := testutil.Port()
		args := append([]string{bin, "-b", addr, "-p", strconv.Itoa(port)}, tc.cArgs()...)
		srv, err := proc.Start(t, "C rstream server", args, nil, 4*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		c := dialC(t, srv, net.JoinHostPort(addr, strconv.Itoa(port)))
		errc := make(chan error, 1)
		go func() { errc <- rstreamSide(c, true, tc.size, tc.count, tc.iters) }()
		check(t, c, srv, errc)
	})
}

// rsocket's version check is strict on both sides: a request with
// version 2 is rejected (C: rdma_reject in rs_accept; Go: Listener), and
// the listener goes on accepting.
func TestInteropVersionRejected(t *testing.T) {
	bin := rstreamPath(t)
	addr := testutil.Addr(t)
	bad := func(b *[40]byte) { b[0] = 2 }
	t.Run("C server", func(t *testing.T) {
		port := testutil.Port()
		tc := interopCase{size: 100, count: 10, iters: 1, cMode: "b"}
		args := append([]string{bin, "-b", addr, "-p", strconv.Itoa(port)}, tc.cArgs()...)
		srv, err := proc.Start(t, "C rstream server", args, nil, 4*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		// A good connection would take rstream's only accept: find
		// out that it listens by being refused for the version.
		restore := rsocket.SetConnDataHook(bad)
		ctx := timeout(t, 2*time.Minute)
		var derr error
		for ctx.Err() == nil && !srv.Exited() {
			var c *rsocket.Conn
			c, derr = rsocket.Dial(ctx, "tcp", net.JoinHostPort(addr, strconv.Itoa(port)))
			if derr == nil {
				c.Close()
				restore()
				t.Fatal("C accepted rsocket version 2")
			}
			if !errors.Is(derr, syscall.ECONNREFUSED) {
				break
			}
			if rejectedByApp(t, derr) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		restore()
		if !rejectedByApp(t, derr) {
			t.Fatalf("dial with version 2: %v, want a consumer reject", derr)
		}
		c := dialC(t, srv, net.JoinHostPort(addr, strconv.Itoa(port)))
		if err := rstreamSide(c, true, tc.size, tc.count, tc.iters); err != nil {
			t.Fatalf("after the rejected request: %v\n%v", err, srv)
		}
		if err := srv.Wait(); err != nil {
			t.Fatalf("C server: %v", srv)
		}
	})
	t.Run("Go server", func(t *testing.T) {
		l := listen(t)
		restore := rsocket.SetConnDataHook(bad)
		_, err := rsocket.Dial(timeout(t, time.Minute), "tcp", l.Addr().String())
		restore()
		if !rejectedByApp(t, err) {
			t.Fatalf("dial with version 2: %v, want a consumer reject", err)
		}
		c1, err := rsocket.Dial(timeout(t, time.Minute), "tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c1.Close()
		c2, err := l.AcceptContext(timeout(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		defer c2.Close()
		roundtripPair(t, c1, c2)
	})
}

// rejectedByApp tells a reject by the peer's application (rdma_reject:
// reason 28, consumer defined) from one by the kernel for a port nobody
// listens on. iWARP has no reject reasons: there an MPA reject is a
// REJECTED event with status -ECONNRESET (seen on siw), and a port nobody
// listens on fails the connect at once, without the event.
func rejectedByApp(t *testing.T, err error) bool {
	var ee *cm.EventError
	if !errors.As(err, &ee) || ee.Event != cm.EventRejected {
		return false
	}
	if testutil.Device(t).NodeType.Transport() == verbs.TransportIWARP {
		return ee.Status == -int(syscall.ECONNRESET)
	}
	return ee.Status == 28
}

// listening reports whether process pid has an rdma_cm ID listening on
// addr, from rdma(8)'s resource listing.
func listening(rdma string, pid int, addr string) bool {
	out, err := exec.Command(rdma, "-j", "resource", "show", "cm_id").Output()
	if err != nil {
		return false
	}
	var ids []struct {
		State   string `json:"state"`
		PID     int    `json:"pid"`
		SrcAddr string `json:"src-addr"`
	}
	if json.Unmarshal(out, &ids) != nil {
		return false
	}
	for _, id := range ids {
		if id.State == "LISTEN" && id.PID == pid && id.SrcAddr == addr {
			return true
		}
	}
	return false
}
