package valkeyrdma_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/internal/testutil/conntest"
	"github.com/goverbs/goverbs/valkeyrdma"
	"github.com/goverbs/goverbs/verbs"
)

// device skips on a bare host and fails on the test bed without a
// device; it returns the test address.
func device(t *testing.T) string {
	t.Helper()
	dev := testutil.Device(t)
	testutil.SkipUnlessCap(t, dev.NodeType.Transport() != verbs.TransportIWARP, "RDMA WRITE WITH IMMEDIATE (iWARP has none; Valkey's transport sends all data with it)")
	return testutil.Addr(t)
}

var timeout = conntest.Timeout

func listen(t *testing.T, opts ...valkeyrdma.Option) *valkeyrdma.Listener {
	t.Helper()
	return conntest.Listening[*valkeyrdma.Listener](t)(valkeyrdma.Listen("tcp", net.JoinHostPort(device(t), "0"), opts...))
}

// pipe connects two Conns, c1 the dialer and c2 the accepted one, closed
// when the test ends.
func pipe(t *testing.T, opts ...valkeyrdma.Option) (c1, c2 *valkeyrdma.Conn) {
	t.Helper()
	return conntest.Pipe(t, listen(t, opts...), func(ctx context.Context, address string) (*valkeyrdma.Conn, error) {
		return valkeyrdma.Dial(ctx, "tcp", address, opts...)
	})
}

// guard closes the connections and fails the test if it runs longer
// than d: a hang becomes a failure.
func guard(t *testing.T, d time.Duration, cs ...net.Conn) {
	conntest.Guard(t, d, func() string {
		var b strings.Builder
		for _, c := range cs {
			if vc, ok := c.(*valkeyrdma.Conn); ok {
				fmt.Fprintf(&b, "%v: %s\n", vc.LocalAddr(), valkeyrdma.State(vc))
			}
		}
		return b.String()
	}, cs...)
}

// Both directions at once, with RX buffers of the smallest size, so that
// each is filled and published again many times, and writes of sizes
// that do not divide it: every byte arrives, in order.
func TestStreamBothWays(t *testing.T) {
	c1, c2 := pipe(t, valkeyrdma.RXBufferSize(valkeyrdma.MinRXBufferSize), valkeyrdma.TXBufferSize(16<<10))
	guard(t, 3*time.Minute, c1, c2)
	const total = 1 << 20
	src := make([]byte, total)
	for i := range src {
		src[i] = byte(rand.Uint32())
	}
	errs := make(chan error, 4)
	send := func(c net.Conn) {
		r := rand.New(rand.NewPCG(1, 2))
		for off := 0; off < total; {
			n := min(1+r.IntN(100<<10), total-off)
			if _, err := c.Write(src[off : off+n]); err != nil {
				errs <- err
				return
			}
			off += n
		}
		errs <- nil
	}
	recv := func(c net.Conn) {
		got := make([]byte, total)
		if _, err := io.ReadFull(c, got); err != nil {
			errs <- err
			return
		}
		if !bytes.Equal(got, src) {
			errs <- errors.New("the data read differs from the data written")
			return
		}
		errs <- nil
	}
	go send(c1)
	go send(c2)
	go recv(c1)
	go recv(c2)
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// A writer stops once the peer's RX buffer is full and goes on once the
// peer has read all of it: the write deadline ends the first Write
// with exactly the buffer's length written.
func TestWriteWaitsForWholeBufferRead(t *testing.T) {
	const rx = valkeyrdma.MinRXBufferSize
	c1, c2 := pipe(t, valkeyrdma.RXBufferSize(rx))
	guard(t, 2*time.Minute, c1, c2)
	p := make([]byte, rx+1000)
	c1.SetWriteDeadline(time.Now().Add(2 * time.Second))
	n, err := c1.Write(p)
	if !errors.Is(err, os.ErrDeadlineExceeded) || n != rx {
		t.Fatalf("Write into a full buffer: %d, %v; want %d, a deadline error", n, err, rx)
	}
	// Reading all but one byte publishes nothing.
	if _, err := io.ReadFull(c2, make([]byte, rx-1)); err != nil {
		t.Fatal(err)
	}
	c1.SetWriteDeadline(time.Now().Add(time.Second))
	if n, err := c1.Write(p[:1]); !errors.Is(err, os.ErrDeadlineExceeded) || n != 0 {
		t.Fatalf("Write before the whole buffer was read: %d, %v; want 0, a deadline error", n, err)
	}
	c1.SetWriteDeadline(time.Time{})
	done := make(chan error, 1)
	go func() {
		_, err := c1.Write(p[:1000])
		done <- err
	}()
	if _, err := io.ReadFull(c2, make([]byte, 1+1000)); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// The dialer asks for the listener's features and gets none.
func TestPeerFeatures(t *testing.T) {
	c1, c2 := pipe(t)
	guard(t, time.Minute, c1, c2)
	// A round trip after the question: the answer was sent before the
	// echo.
	if _, err := c1.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := io.ReadFull(c2, b); err != nil {
		t.Fatal(err)
	}
	if _, err := c2.Write(b); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c1, b); err != nil {
		t.Fatal(err)
	}
	f, ok := c1.PeerFeatures()
	if !ok || f != 0 {
		t.Errorf("PeerFeatures = %#x, %v; want 0, true", f, ok)
	}
}

func TestReadDeadline(t *testing.T) {
	c1, c2 := pipe(t)
	guard(t, time.Minute, c1, c2)
	c1.SetReadDeadline(time.Now().Add(-time.Second))
	if _, err := c1.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read past its deadline: %v", err)
	}
	c1.SetReadDeadline(time.Time{})
	done := make(chan error, 1)
	go func() {
		_, err := c1.Read(make([]byte, 1))
		done <- err
	}()
	waitBlocked(t)
	c1.SetReadDeadline(time.Now())
	if err := <-done; !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("blocked Read after SetReadDeadline: %v", err)
	}
	var ne net.Error
	if err := c1.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	_, err := c1.Read(nil)
	if err != nil && errors.As(err, &ne) {
		t.Fatal(err)
	}
}

func TestCloseUnblocksRead(t *testing.T) {
	c1, c2 := pipe(t)
	guard(t, time.Minute, c1, c2)
	done := make(chan error, 1)
	go func() {
		_, err := c1.Read(make([]byte, 1))
		done <- err
	}()
	waitBlocked(t)
	if err := c1.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Read blocked over Close: %v, want net.ErrClosed", err)
	}
	if err := c1.Close(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("second Close: %v, want net.ErrClosed", err)
	}
}

// The peer's Close ends a blocked Read with io.EOF after the data it
// wrote, and fails Write.
func TestPeerClose(t *testing.T) {
	c1, c2 := pipe(t)
	guard(t, time.Minute, c1, c2)
	if _, err := c2.Write([]byte("bye")); err != nil {
		t.Fatal(err)
	}
	if err := c2.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c1)
	if err != nil || string(got) != "bye" {
		t.Fatalf("ReadAll after the peer's Close: %q, %v; want \"bye\", nil", got, err)
	}
	if _, err := c1.Write([]byte("x")); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("Write after the peer's Close: %v, want ECONNRESET", err)
	}
}

// A blocked Read ends when the peer closes.
func TestPeerCloseUnblocksRead(t *testing.T) {
	c1, c2 := pipe(t)
	guard(t, time.Minute, c1, c2)
	done := make(chan error, 1)
	go func() {
		_, err := c1.Read(make([]byte, 1))
		done <- err
	}()
	waitBlocked(t)
	c2.Close()
	if err := <-done; err != io.EOF {
		t.Fatalf("Read blocked over the peer's Close: %v, want io.EOF", err)
	}
}

// Keepalives go out on their interval and do not disturb the stream.
func TestKeepalive(t *testing.T) {
	c1, c2 := pipe(t, valkeyrdma.Keepalive(50*time.Millisecond))
	guard(t, time.Minute, c1, c2)
	for valkeyrdma.KeepalivesSent(c1) < 3 || valkeyrdma.KeepalivesSent(c2) < 3 {
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := c1.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4)
	if _, err := io.ReadFull(c2, b); err != nil || string(b) != "ping" {
		t.Fatalf("%q, %v", b, err)
	}
}

// A peer whose application reads nothing still has its receives
// re-posted: many more small writes than receives posted (1024) reach
// it without an RNR error, the situation Valkey's server (RNR retry
// count 0) would be in with a subscriber that does not read.
func TestManyWritesUnread(t *testing.T) {
	c1, c2 := pipe(t)
	guard(t, 2*time.Minute, c1, c2)
	const n = 5000
	for i := range n {
		if _, err := c1.Write([]byte{byte(i)}); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	got := make([]byte, n)
	if _, err := io.ReadFull(c2, got); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if got[i] != byte(i) {
			t.Fatalf("byte %d is %d", i, got[i])
		}
	}
}

func TestDialRefused(t *testing.T) {
	addr := device(t)
	l := listen(t)
	port := l.Addr().(*valkeyrdma.Addr).Port()
	l.Close()
	_, err := valkeyrdma.Dial(timeout(t, time.Minute), "tcp", net.JoinHostPort(addr, strconv.Itoa(int(port))))
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("Dial to a closed port: %v, want ECONNREFUSED", err)
	}
}

// waitBlocked waits until a call sleeps in Conn.wait (on its wake-up
// channel), so that a test acts on a call that is really blocked.
func waitBlocked(t *testing.T) {
	t.Helper()
	buf := make([]byte, 1<<20)
	deadline := time.Now().Add(time.Minute)
	for {
		n := runtime.Stack(buf, true)
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			if strings.Contains(g, "valkeyrdma.(*Conn).wait(") && strings.Contains(g, "[chan receive") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no call blocked in Conn.wait")
		}
		time.Sleep(time.Millisecond)
	}
}

// Read and Write allocate nothing once the connection runs: a
// request-response exchange of 300-byte messages, c2 echoing in a
// goroutine of its own (a Write that fills the peer's buffer returns only
// once the peer has read all of it, so one goroutine cannot play both
// ends), across many publications of the 64 KiB buffers.
func TestNoAllocs(t *testing.T) {
	c1, c2 := pipe(t, valkeyrdma.RXBufferSize(valkeyrdma.MinRXBufferSize))
	guard(t, 3*time.Minute, c1, c2)
	const warm, runs = 300, 300
	echoed := make(chan error, 1)
	go func() {
		b := make([]byte, 300)
		for range warm + runs + 1 { // AllocsPerRun runs f once more
			if _, err := io.ReadFull(c2, b); err != nil {
				echoed <- err
				return
			}
			if _, err := c2.Write(b); err != nil {
				echoed <- err
				return
			}
		}
		echoed <- nil
	}()
	req := make([]byte, 300)
	f := func() {
		if _, err := c1.Write(req); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c1, req); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	for range warm {
		f()
	}
	t.Logf("%d round trips of 300 bytes: %v each; the pollers waited %d and %d times", warm, time.Since(start)/warm, valkeyrdma.Events(c1), valkeyrdma.Events(c2))
	e0 := valkeyrdma.Events(c1) + valkeyrdma.Events(c2)
	a := testing.AllocsPerRun(runs, f)
	want := 0.0
	if raceBuild {
		want = math.Ceil(float64(valkeyrdma.Events(c1)+valkeyrdma.Events(c2)-e0) / float64(runs+1))
	}
	if a > want {
		t.Errorf("%v allocations per round trip, want at most %v", a, want)
	}
	if err := <-echoed; err != nil {
		t.Fatal(err)
	}
}
