package rsocket_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/internal/testutil/conntest"
	"github.com/goverbs/goverbs/rsocket"
)

// The conformance tests: what net.Conn users rely on, in the spirit of
// golang.org/x/net/nettest's TestConn (which the library's go.mod cannot
// import), checked on two connected Conns on the test device.

// device skips on a bare host and fails on the test bed without a
// device. Every device runs the tests: on iWARP (siw) connections use
// C's variant for it, a WRITE and a SEND per message.
func device(t *testing.T) string {
	t.Helper()
	testutil.Device(t)
	return testutil.Addr(t)
}

var timeout = conntest.Timeout

// listen listens on the test address; the Listener closes when the test
// ends.
func listen(t *testing.T, opts ...rsocket.Option) *rsocket.Listener {
	t.Helper()
	addr := device(t)
	return conntest.Listening[*rsocket.Listener](t)(rsocket.Listen("tcp", net.JoinHostPort(addr, "0"), opts...))
}

// pipe connects two Conns, c1 the dialer and c2 the accepted one, closed
// when the test ends.
func pipe(t *testing.T, opts ...rsocket.Option) (c1, c2 *rsocket.Conn) {
	t.Helper()
	return conntest.Pipe(t, listen(t, opts...), func(ctx context.Context, address string) (*rsocket.Conn, error) {
		return rsocket.Dial(ctx, "tcp", address, opts...)
	})
}

// guard fails the test and closes c if it runs longer than d: a hang
// becomes a failure with the connection torn down. It logs the TCP
// sockets first: on iWARP they are the connection's, and bytes siw left
// unread in one of them are its stall (docs/providers.md).
func guard(t *testing.T, d time.Duration, cs ...net.Conn) {
	conntest.Guard(t, d, func() string { return "TCP sockets then:\n" + testutil.TCPTable() }, cs...)
}

func randBytes(seed uint64, n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, seed))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// chunkedWrite writes b in pieces of random sizes up to max.
func chunkedWrite(w io.Writer, b []byte, seed uint64, max int) error {
	r := rand.New(rand.NewPCG(seed, 1))
	for len(b) > 0 {
		n := min(1+r.IntN(max), len(b))
		if _, err := w.Write(b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// readAll reads until EOF with buffers of random sizes up to max.
func readAll(r io.Reader, seed uint64, max int) ([]byte, error) {
	rng := rand.New(rand.NewPCG(seed, 2))
	var out []byte
	buf := make([]byte, max)
	for {
		n, err := r.Read(buf[:1+rng.IntN(max)])
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() && errors.Is(err, os.ErrDeadlineExceeded)
}

// roundtrip writes through c and reads it back from an echoing peer.
func roundtrip(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetDeadline(time.Time{})
	msg := []byte("Hello, RDMA!")
	if _, err := c.Write(msg); err != nil {
		t.Fatalf("roundtrip write: %v", err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("roundtrip read: %v", err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatalf("roundtrip: got %q", got)
	}
}

// echo copies everything c reads back to it, until an error.
func echo(c net.Conn) {
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// resync writes a 0xff and reads until it comes back, to get past
// whatever earlier, interrupted writes left on the way (the peer
// echoes).
func resync(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetDeadline(time.Time{})
	if _, err := c.Write([]byte{0xff}); err != nil {
		t.Fatalf("resync write: %v", err)
	}
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		if n > 0 && buf[n-1] == 0xff {
			return
		}
		if err != nil {
			t.Fatalf("resync read: %v", err)
		}
	}
}

// BasicIO: 1 MiB through writes and reads of random sizes; the writer's
// Close ends the stream with EOF after the last byte.
func TestConnBasicIO(t *testing.T) {
	c1, c2 := pipe(t)
	guard(t, 3*time.Minute, c1, c2)
	want := randBytes(1, 1<<20)
	errc := make(chan error, 1)
	go func() {
		err := chunkedWrite(c1, want, 1, 100_000)
		if cerr := c1.Close(); err == nil {
			err = cerr
		}
		errc <- err
	}()
	got, err := readAll(c2, 1, 70_000)
	if err != nil {
		t.Fatalf("read: %v (after %d bytes)", err, len(got))
	}
	if err := <-errc; err != nil {
		t.Fatalf("write: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, want %d; first difference at %d", len(got), len(want), firstDiff(got, want))
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// PingPong: request and response, 8 bytes at a time, 500 rounds; the
// last one closes and the other sees EOF.
func TestConnPingPong(t *testing.T) {
	c1, c2 := pipe(t)
	guard(t, 3*time.Minute, c1, c2)
	var wg sync.WaitGroup
	player := func(c net.Conn, first bool) {
		defer wg.Done()
		buf := make([]byte, 8)
		if first {
			if _, err := c.Write(buf); err != nil {
				t.Errorf("first write: %v", err)
				return
			}
		}
		var prev uint64
		for {
			if _, err := io.ReadFull(c, buf); err != nil {
				if err != io.EOF {
					t.Errorf("read: %v", err)
				}
				break
			}
			v := binary.LittleEndian.Uint64(buf)
			if prev != 0 && v != prev+2 {
				t.Errorf("got %d after %d", v, prev)
			}
			prev = v
			if v == 1000 {
				break
			}
			binary.LittleEndian.PutUint64(buf, v+1)
			if _, err := c.Write(buf); err != nil {
				t.Errorf("write: %v", err)
				break
			}
		}
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}
	wg.Add(2)
	go player(c1, true)
	go player(c2, false)
	wg.Wait()
}

// Partial reads: one write of 300 kB (several messages, beyond the
// receive buffer) read with small buffers; reads never return more than
// asked, and return as soon as some data is there.
func TestConnPartialReads(t *testing.T) {
	c1, c2 := pipe(t, rsocket.ReceiveBufferSize(64<<10))
	guard(t, 3*time.Minute, c1, c2)
	want := randBytes(2, 300_000)
	go func() {
		if _, err := c1.Write(want); err != nil {
			t.Errorf("write: %v", err)
		}
	}()
	var got []byte
	for _, size := range []int{1, 7, 1000, 4095, 65536 + 3} {
		buf := make([]byte, size)
		for range 3 {
			n, err := c2.Read(buf)
			if err != nil {
				t.Fatal(err)
			}
			if n < 1 || n > size {
				t.Fatalf("read of %d returned %d", size, n)
			}
			got = append(got, buf[:n]...)
		}
	}
	rest := make([]byte, len(want)-len(got))
	if _, err := io.ReadFull(c2, rest); err != nil {
		t.Fatal(err)
	}
	got = append(got, rest...)
	if !bytes.Equal(got, want) {
		t.Fatalf("first difference at %d", firstDiff(got, want))
	}
}

// A write much larger than every buffer, both ways at once (full duplex:
// each side's Read and Write run concurrently), with small buffers and
// queues so that credits, buffer halves and send completions all run
// out many times.
func TestConnDuplexLarge(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []rsocket.Option
		size int
	}{
		{"defaults", nil, 3 << 20},
		{"small", []rsocket.Option{rsocket.ReceiveBufferSize(8 << 10), rsocket.SendBufferSize(4 << 10),
			rsocket.SendQueueSize(16), rsocket.ReceiveQueueSize(16), rsocket.InlineSize(0)}, 1 << 20},
		{"odd", []rsocket.Option{rsocket.ReceiveBufferSize(10_002), rsocket.SendBufferSize(6_000),
			rsocket.SendQueueSize(19), rsocket.ReceiveQueueSize(23), rsocket.InlineSize(77)}, 1_000_003}, // siw allows 80 bytes inline
	} {
		t.Run(tc.name, func(t *testing.T) {
			c1, c2 := pipe(t, tc.opts...)
			guard(t, 4*time.Minute, c1, c2)
			w1, w2 := randBytes(3, tc.size), randBytes(4, tc.size)
			var wg sync.WaitGroup
			var got1, got2 []byte
			for _, x := range []struct {
				c    *rsocket.Conn
				w    []byte
				got  *[]byte
				seed uint64
			}{{c1, w1, &got2, 5}, {c2, w2, &got1, 6}} {
				wg.Add(2)
				go func() {
					defer wg.Done()
					// One Write of the whole buffer.
					if _, err := x.c.Write(x.w); err != nil {
						t.Errorf("write: %v", err)
					}
					if err := x.c.CloseWrite(); err != nil {
						t.Errorf("close write: %v", err)
					}
				}()
				go func() {
					defer wg.Done()
					peer := c2
					if x.c == c2 {
						peer = c1
					}
					b, err := readAll(peer, x.seed, 50_000)
					if err != nil {
						t.Errorf("read: %v", err)
					}
					*x.got = b
				}()
			}
			wg.Wait()
			if !bytes.Equal(got2, w1) || !bytes.Equal(got1, w2) {
				t.Fatalf("data differs: c1→c2 %d/%d bytes (first difference %d), c2→c1 %d/%d (%d)",
					len(got2), len(w1), firstDiff(got2, w1), len(got1), len(w2), firstDiff(got1, w2))
			}
		})
	}
}

// Concurrent Reads (and Writes) are safe: they are serialized, and
// mutating the buffer after a timed-out call races with nothing.
func TestConnRacy(t *testing.T) {
	for _, read := range []bool{true, false} {
		name := "write"
		if read {
			name = "read"
		}
		t.Run(name, func(t *testing.T) {
			c1, c2 := pipe(t)
			guard(t, 3*time.Minute, c1, c2)
			stop := make(chan struct{})
			defer close(stop)
			go func() { // the peer streams, or drains
				buf := randBytes(5, 8192)
				for {
					select {
					case <-stop:
						return
					default:
					}
					var err error
					if read {
						_, err = c2.Write(buf)
					} else {
						_, err = c2.Read(buf)
					}
					if err != nil {
						return
					}
				}
			}()
			set := c1.SetReadDeadline
			if !read {
				set = c1.SetWriteDeadline
			}
			set(time.Now().Add(time.Millisecond))
			var wg sync.WaitGroup
			for range 10 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					b1, b2 := make([]byte, 1024), make([]byte, 1024)
					for range 100 {
						var err error
						if read {
							_, err = c1.Read(b1)
						} else {
							_, err = c1.Write(b1)
						}
						copy(b1, b2)
						if err != nil {
							if !isTimeout(err) {
								t.Errorf("%s: %v, want a timeout", name, err)
								return
							}
							set(time.Now().Add(time.Millisecond))
						}
					}
				}()
			}
			wg.Wait()
		})
	}
}

// Deadlines: a past deadline fails at once (even when the call could
// proceed), a present one (set while blocked) and a future one wake
// blocked calls; a read timeout leaves writing alone and the reverse;
// clearing the deadline makes the connection usable again.
func TestConnDeadlines(t *testing.T) {
	t.Run("read timeout spares write", func(t *testing.T) {
		c1, c2 := pipe(t)
		go io.Copy(io.Discard, c2)
		c1.SetReadDeadline(time.Unix(1, 0))
		if _, err := c1.Read(make([]byte, 1024)); !isTimeout(err) {
			t.Fatalf("read: %v, want a timeout", err)
		}
		if _, err := c1.Write(make([]byte, 1024)); err != nil {
			t.Fatalf("write: %v", err)
		}
	})
	t.Run("write timeout spares read", func(t *testing.T) {
		c1, c2 := pipe(t)
		go c2.Write(make([]byte, 1024))
		c1.SetWriteDeadline(time.Unix(1, 0))
		if _, err := c1.Write(make([]byte, 1024)); !isTimeout(err) {
			t.Fatalf("write: %v, want a timeout", err)
		}
		if _, err := c1.Read(make([]byte, 1024)); err != nil {
			t.Fatalf("read: %v", err)
		}
	})
	t.Run("past", func(t *testing.T) {
		c1, c2 := pipe(t)
		go echo(c2)
		roundtrip(t, c1)
		c1.SetDeadline(time.Unix(1, 0))
		if n, err := c1.Write(make([]byte, 1024)); n != 0 || !isTimeout(err) {
			t.Fatalf("write: %d, %v; want 0 and a timeout", n, err)
		}
		if n, err := c1.Read(make([]byte, 1024)); n != 0 || !isTimeout(err) {
			t.Fatalf("read: %d, %v; want 0 and a timeout", n, err)
		}
		roundtrip(t, c1)
	})
	t.Run("present", func(t *testing.T) {
		c1, _ := pipe(t) // the peer neither reads nor writes
		guard(t, 2*time.Minute, c1)
		var set sync.WaitGroup
		set.Add(1)
		setAt := make(chan time.Time, 1)
		go func() {
			defer set.Done()
			time.Sleep(300 * time.Millisecond)
			setAt <- time.Now()
			c1.SetReadDeadline(time.Unix(1, 0))
			c1.SetWriteDeadline(time.Unix(1, 0))
		}()
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			if n, err := c1.Read(make([]byte, 1024)); n != 0 || !isTimeout(err) {
				t.Errorf("read: %d, %v; want 0 and a timeout", n, err)
			}
		}()
		go func() {
			defer wg.Done()
			var err error
			buf := make([]byte, 64<<10)
			for err == nil {
				_, err = c1.Write(buf) // until credits or buffer run out
			}
			if !isTimeout(err) {
				t.Errorf("write: %v, want a timeout", err)
			}
		}()
		wg.Wait()
		set.Wait()
		if len(setAt) == 0 {
			t.Fatal("calls returned before the deadline was set")
		}
	})
	t.Run("future", func(t *testing.T) {
		c1, c2 := pipe(t)
		guard(t, 2*time.Minute, c1, c2)
		start := time.Now()
		c1.SetDeadline(start.Add(200 * time.Millisecond))
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			if _, err := c1.Read(make([]byte, 1024)); !isTimeout(err) {
				t.Errorf("read: %v, want a timeout", err)
			}
		}()
		go func() {
			defer wg.Done()
			var err error
			buf := make([]byte, 64<<10)
			for err == nil {
				_, err = c1.Write(buf)
			}
			if !isTimeout(err) {
				t.Errorf("write: %v, want a timeout", err)
			}
		}()
		wg.Wait()
		if d := time.Since(start); d < 200*time.Millisecond {
			t.Errorf("timed out after %v, before the deadline", d)
		}
		go echo(c2)
		resync(t, c1)
		roundtrip(t, c1)
	})
}

// Close wakes a blocked Read and a blocked Write (net.ErrClosed), and
// later calls fail the same way.
func TestConnCloseUnblocks(t *testing.T) {
	c1, _ := pipe(t) // the peer neither reads nor writes
	guard(t, 2*time.Minute, c1)
	errs := make(chan error, 2)
	go func() {
		_, err := c1.Read(make([]byte, 1024))
		errs <- err
	}()
	go func() {
		var err error
		buf := make([]byte, 64<<10)
		for err == nil {
			_, err = c1.Write(buf)
		}
		errs <- err
	}()
	testutil.WaitParked(t, "rsocket.(*Conn).wait")
	time.Sleep(200 * time.Millisecond) // let the writer block too
	start := time.Now()
	if err := c1.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	for range 2 {
		if err := <-errs; !errors.Is(err, net.ErrClosed) {
			t.Errorf("blocked call: %v, want net.ErrClosed", err)
		}
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Close took %v", d)
	}
	if _, err := c1.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("read after close: %v", err)
	}
	if _, err := c1.Write(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("write after close: %v", err)
	}
	if err := c1.Close(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("second close: %v", err)
	}
}

// Closing with a deadline in force wakes the blocked calls too, while
// the peer echoes.
func TestConnCloseTimeout(t *testing.T) {
	c1, c2 := pipe(t)
	guard(t, 2*time.Minute, c1, c2)
	go echo(c2)
	c1.SetDeadline(time.Now().Add(time.Hour))
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		time.Sleep(200 * time.Millisecond)
		c1.Close()
	}()
	go func() {
		defer wg.Done()
		var err error
		buf := make([]byte, 1024)
		for err == nil {
			_, err = c1.Read(buf)
		}
	}()
	go func() {
		defer wg.Done()
		var err error
		buf := make([]byte, 1024)
		for err == nil {
			_, err = c1.Write(buf)
		}
	}()
	wg.Wait()
}

// Every method at once from many goroutines, then the connection still
// works (run with -race).
func TestConnConcurrentMethods(t *testing.T) {
	c1, c2 := pipe(t)
	guard(t, 3*time.Minute, c1, c2)
	go echo(c2)
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(7)
		go func() { defer wg.Done(); c1.Read(make([]byte, 1024)) }()
		go func() { defer wg.Done(); c1.Write(make([]byte, 1024)) }()
		go func() { defer wg.Done(); c1.SetDeadline(time.Now().Add(10 * time.Millisecond)) }()
		go func() { defer wg.Done(); c1.SetReadDeadline(time.Unix(1, 0)) }()
		go func() { defer wg.Done(); c1.SetWriteDeadline(time.Unix(1, 0)) }()
		go func() { defer wg.Done(); _ = c1.LocalAddr().String() }()
		go func() { defer wg.Done(); _ = c1.RemoteAddr().String() }()
	}
	wg.Wait()
	resync(t, c1)
	roundtrip(t, c1)
}

// The peer's Close: Read returns what was sent before it, then io.EOF
// (again and again); Write fails with ECONNRESET, as C's rsend.
func TestConnPeerClose(t *testing.T) {
	c1, c2 := pipe(t)
	guard(t, 2*time.Minute, c1, c2)
	// Less than the receive buffer (128 KiB), all of which the reader
	// publishes when it connects: the write completes before c1 reads.
	want := randBytes(6, 100_000)
	if _, err := c2.Write(want); err != nil {
		t.Fatal(err)
	}
	if err := c2.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c1)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, %v; want %d and EOF", len(got), err, len(want))
	}
	if n, err := c1.Read(make([]byte, 10)); n != 0 || err != io.EOF {
		t.Fatalf("read after EOF: %d, %v", n, err)
	}
	if _, err := c1.Write([]byte("late")); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("write after the peer closed: %v, want ECONNRESET", err)
	}
	if c1.LocalAddr().String() == "" || c1.RemoteAddr().(*rsocket.Addr).Port() == 0 {
		t.Errorf("addresses %v -> %v", c1.LocalAddr(), c1.RemoteAddr())
	}
}

// The peer's Close wakes this side's blocked calls: a Read parked for
// data returns io.EOF, a Write parked for credits (the peer never read)
// fails with ECONNRESET.
func TestConnPeerCloseWakes(t *testing.T) {
	for _, read := range []bool{true, false} {
		name := "write"
		if read {
			name = "read"
		}
		t.Run(name, func(t *testing.T) {
			c1, c2 := pipe(t)
			guard(t, 2*time.Minute, c1, c2)
			done := make(chan error, 1)
			written := 0
			go func() {
				if read {
					n, err := c1.Read(make([]byte, 1024))
					if n != 0 {
						err = fmt.Errorf("read %d bytes, then %w", n, err)
					}
					done <- err
					return
				}
				var err error
				buf := make([]byte, 64<<10)
				for err == nil {
					var n int
					n, err = c1.Write(buf)
					written += n
				}
				done <- err
			}()
			testutil.WaitParked(t, "rsocket.(*Conn).wait")
			if !read {
				time.Sleep(200 * time.Millisecond) // the writer is out of credits for good
			}
			if err := c2.Close(); err != nil {
				t.Fatalf("peer close: %v", err)
			}
			var err error
			select {
			case err = <-done:
			case <-time.After(time.Minute):
				t.Fatal("the blocked call did not return within a minute of the peer's Close")
			}
			switch {
			case read && err != io.EOF:
				t.Errorf("blocked read: %v, want io.EOF", err)
			case !read && !errors.Is(err, syscall.ECONNRESET):
				t.Errorf("blocked write (after %d bytes): %v, want ECONNRESET", written, err)
			}
		})
	}
}

// CloseWrite: the peer reads EOF and may still answer; this side's
// writes fail with EPIPE, its reads go on.
func TestConnCloseWrite(t *testing.T) {
	c1, c2 := pipe(t)
	guard(t, 2*time.Minute, c1, c2)
	if _, err := c1.Write([]byte("request")); err != nil {
		t.Fatal(err)
	}
	if err := c1.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if _, err := c1.Write([]byte("x")); !errors.Is(err, syscall.EPIPE) {
		t.Errorf("write after CloseWrite: %v, want EPIPE", err)
	}
	req, err := io.ReadAll(c2)
	if err != nil || string(req) != "request" {
		t.Fatalf("peer read %q, %v", req, err)
	}
	// More than the receive buffer: c1 reads while c2 writes.
	want := randBytes(7, 300_000)
	errc := make(chan error, 1)
	go func() {
		_, err := c2.Write(want)
		if cerr := c2.Close(); err == nil {
			err = cerr
		}
		errc <- err
	}()
	got, err := io.ReadAll(c1)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read the answer: %d bytes, %v", len(got), err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("answer after the peer's CloseWrite: %v", err)
	}
}

// Reads and Writes that never wait yield now and then (a scheduling
// point, so the runtime need not preempt them by signal): 4 times
// YieldEvery small Writes, fewer than the credits and the buffer hold,
// then as many Reads of data that has all arrived (CloseWrite returns
// once every send is acknowledged). Each side must have yielded, and the
// data must arrive intact.
func TestConnYields(t *testing.T) {
	c1, c2 := pipe(t)
	guard(t, 2*time.Minute, c1, c2)
	const msg = 16
	n := 4 * rsocket.YieldEvery
	want := randBytes(11, n*msg)
	for i := range n {
		if _, err := c1.Write(want[i*msg : (i+1)*msg]); err != nil {
			t.Fatal(err)
		}
	}
	if err := c1.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 0, len(want))
	buf := make([]byte, msg)
	for {
		k, err := c2.Read(buf)
		got = append(got, buf[:k]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, first difference at %d", len(got), firstDiff(got, want))
	}
	y1, y2 := rsocket.Yields(c1), rsocket.Yields(c2)
	t.Logf("yields: writer %d, reader %d; polled waits: writer %d, reader %d", y1, y2, rsocket.Polled(c1), rsocket.Polled(c2))
	if y1 == 0 || y2 == 0 {
		t.Errorf("%d Writes and %d Reads: writer yielded %d times, reader %d; want both > 0", n, n, y1, y2)
	}
}

// CloseRead: Read returns EOF at once — a blocked one too — and a
// blocked Write neither blocks it nor is disturbed; writing goes on.
func TestConnCloseRead(t *testing.T) {
	c1, c2 := pipe(t, rsocket.ReceiveBufferSize(8192))
	guard(t, 2*time.Minute, c1, c2)
	rerr := make(chan error, 1)
	go func() {
		_, err := c1.Read(make([]byte, 1))
		rerr <- err
	}()
	big := randBytes(8, 100_000) // more than c2's buffer: blocks until c2 reads
	werr := make(chan error, 1)
	go func() {
		_, err := c1.Write(big)
		werr <- err
	}()
	testutil.WaitParked(t, "rsocket.(*Conn).wait")
	time.Sleep(100 * time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- c1.CloseRead() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("CloseRead waited for the blocked Write")
	}
	if err := <-rerr; err != io.EOF {
		t.Fatalf("blocked read after CloseRead: %v, want EOF", err)
	}
	got := make([]byte, len(big))
	if _, err := io.ReadFull(c2, got); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("peer read the blocked write: %v", err)
	}
	if err := <-werr; err != nil {
		t.Fatalf("the write blocked across CloseRead: %v", err)
	}
	if _, err := c1.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read after CloseRead: %v, want EOF", err)
	}
	if _, err := c1.Write([]byte("still")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(c2, buf); err != nil || string(buf) != "still" {
		t.Fatalf("peer read %q, %v", buf, err)
	}
}

func TestDialRefused(t *testing.T) {
	addr := device(t)
	l := listen(t)
	port := l.Addr().(*rsocket.Addr).Port()
	l.Close()
	_, err := rsocket.Dial(timeout(t, time.Minute), "tcp", net.JoinHostPort(addr, strconv.Itoa(int(port))))
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial a closed port: %v, want ECONNREFUSED", err)
	}
}

func TestBadAddresses(t *testing.T) {
	ctx := context.Background()
	for _, a := range []struct{ network, address string }{
		{"udp", "127.0.0.1:1"}, {"tcp", "nohostport"}, {"tcp", ":7471"}, {"tcp4", "[::1]:1"}, {"tcp", "1.2.3.4:http-nope"},
	} {
		if _, err := rsocket.Dial(ctx, a.network, a.address); err == nil {
			t.Errorf("Dial(%q, %q) succeeded", a.network, a.address)
		}
	}
	if _, err := rsocket.Listen("unix", "/x"); err == nil {
		t.Error("Listen(unix) succeeded")
	}
	// Addr.Network's name is a network Dial and Listen take; an
	// address no device has fails after the name is accepted.
	var unknown net.UnknownNetworkError
	if _, err := rsocket.Listen((&rsocket.Addr{}).Network(), "169.254.77.99:0"); err == nil || errors.As(err, &unknown) {
		t.Errorf("Listen(%q) on an address no device has: %v, want a failure other than an unknown network", (&rsocket.Addr{}).Network(), err)
	}
	if _, err := rsocket.Listen("udp", "169.254.77.99:0"); !errors.As(err, &unknown) {
		t.Errorf("Listen(udp): %v, want net.UnknownNetworkError", err)
	}
}

// Nothing outlives a connection: the kernel's objects and this process's
// descriptors are back where they were after Close, the Listener's too.
func TestConnNoLeaks(t *testing.T) {
	addr := device(t)
	dev := testutil.Device(t)
	before := testutil.Resources(t, dev)
	fds := testutil.OpenFDs(t)
	func() {
		l, err := rsocket.Listen("tcp", net.JoinHostPort(addr, "0"))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ctx := timeout(t, time.Minute)
		c1, err := rsocket.Dial(ctx, "tcp", l.Addr().String(), rsocket.KeepAlive(10*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		c2, err := l.AcceptContext(ctx)
		if err != nil {
			t.Fatal(err)
		}
		roundtripPair(t, c1, c2)
		time.Sleep(50 * time.Millisecond) // some keepalives
		c1.Close()
		c2.Close()
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		after := testutil.Resources(t, dev)
		n := testutil.OpenFDs(t)
		same := n == fds
		for k, v := range before {
			if after[k] != v {
				same = false
			}
		}
		if same {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after close: kernel objects %v (before %v), fds %d (before %d): %s", after, before, n, fds, testutil.FDTargets())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func roundtripPair(t *testing.T, c1, c2 net.Conn) {
	t.Helper()
	if _, err := c1.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c2, buf); err != nil {
		t.Fatal(err)
	}
}
