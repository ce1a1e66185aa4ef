package rsocket_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/internal/testutil/proc"
	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/rsocket"
)

// window allocates n bytes off the Go heap for IOMap (mr.Alloc: the
// pages never move), freed when the test ends.
func window(t *testing.T, n int) []byte {
	t.Helper()
	b, err := mr.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b.Bytes()
}

// IOMap and IOWrite between two Conns: the window arrives with the
// mapper's next Write, the writer's IOWrite lands at the offset asked
// (cut into several RDMA WRITEs), and a later in-band message finds the
// data in place; IOWrite past the window stops at its end.
func TestIOMap(t *testing.T) {
	c1, c2 := pipe(t, rsocket.IOMapSize(2))
	guard(t, 2*time.Minute, c1, c2)
	win := window(t, 200_000)[:200_000]
	const base = 1 << 40 // offsets are the mapper's choice
	if err := c2.IOMap(win, base); err != nil {
		t.Fatal(err)
	}
	if _, err := c2.Write([]byte("mapped")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	if _, err := io.ReadFull(c1, buf); err != nil {
		t.Fatal(err)
	}
	want := randBytes(9, 150_001)
	if n, err := c1.IOWrite(want, base+1000); n != len(want) || err != nil {
		t.Fatalf("IOWrite: %d, %v", n, err)
	}
	if _, err := c1.Write([]byte("done")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c2, buf[:4]); err != nil {
		t.Fatal(err)
	}
	if got := win[1000 : 1000+len(want)]; !bytes.Equal(got, want) {
		t.Fatalf("window: first difference at %d", firstDiff(got, want))
	}
	if !bytes.Equal(win[:1000], make([]byte, 1000)) || !bytes.Equal(win[1000+len(want):], make([]byte, len(win)-1000-len(want))) {
		t.Fatal("IOWrite wrote outside the range it was given")
	}
	// Past the end: the bytes that fit, then ErrNoIOMap.
	if n, err := c1.IOWrite(make([]byte, 100), base+uint64(len(win))-30); n != 30 || !errors.Is(err, rsocket.ErrNoIOMap) {
		t.Fatalf("IOWrite across the window's end: %d, %v; want 30 and ErrNoIOMap", n, err)
	}
	if n, err := c1.IOWrite(make([]byte, 10), 5); n != 0 || !errors.Is(err, rsocket.ErrNoIOMap) {
		t.Fatalf("IOWrite outside every window: %d, %v", n, err)
	}
	// c1's table has two entries: a third mapping has none.
	w2, w3 := window(t, 4096), window(t, 4096)
	if err := c2.IOMap(w2, 0); err != nil {
		t.Fatal(err)
	}
	if err := c2.IOMap(w3, 0); !errors.Is(err, rsocket.ErrNoIOMap) {
		t.Fatalf("a third mapping into a table of two: %v, want ErrNoIOMap", err)
	}
	if err := c2.IOUnmap(w2); err != nil {
		t.Fatal(err)
	}
	if err := c2.IOUnmap(w2); err == nil {
		t.Fatal("IOUnmap of a buffer no longer mapped succeeded")
	}
	if err := c2.IOMap(w3, 0); err != nil {
		t.Fatalf("mapping into the entry IOUnmap freed: %v", err)
	}
	if err := c2.IOUnmap(win); err != nil {
		t.Fatal(err)
	}
	if err := c2.IOUnmap(w3); err != nil {
		t.Fatal(err)
	}
	// Without the peer's IOMapSize there is no table.
	d1, _ := pipe(t)
	if err := d1.IOMap(window(t, 4096), 0); !errors.Is(err, rsocket.ErrNoIOMap) {
		t.Fatalf("IOMap with a peer that allows none: %v, want ErrNoIOMap", err)
	}
}

// lastByte reads b's last byte with an atomic load of the aligned word
// that holds it: the peer's device writes it, and the loop that waits for
// it must read memory every time. b must come from window (whole pages,
// so the word is mapped).
func lastByte(b []byte) byte {
	i := len(b) - 1
	p := unsafe.Pointer(unsafe.SliceData(b))
	w := atomic.LoadUint32((*uint32)(unsafe.Add(p, i&^3)))
	var le [4]byte
	*(*uint32)(unsafe.Pointer(&le)) = w
	return le[i&3]
}

// riostreamSide runs the Go end of riostream's custom test (run_test):
// each side maps a buffer of size bytes at offset 0 (its last byte 0xff),
// 16 bytes go client→server and back (carrying the mappings), then each
// iteration one side IOWrites the buffer count times, the last time with
// the buffer counter-formatted (format_buf, size-1 bytes) and the next
// marker in its last byte, and the other side waits for the marker and
// checks the data (verify_buf); then the other way.
func riostreamSide(c *rsocket.Conn, client bool, size, count, iters int, win []byte) error {
	win = win[:size]
	win[size-1] = 0xff
	if err := c.IOMap(win, 0); err != nil {
		return err
	}
	sync := make([]byte, 16)
	if client {
		if _, err := c.Write(sync); err != nil {
			return err
		}
		if _, err := io.ReadFull(c, sync); err != nil {
			return err
		}
	} else {
		if _, err := io.ReadFull(c, sync); err != nil {
			return err
		}
		if _, err := c.Write(sync); err != nil {
			return err
		}
	}
	var marker, fmtCtr, verCtr byte
	// C's sender writes from its own window, whose last byte starts
	// at 0xff: the writes before the first marker must not carry one.
	src := make([]byte, size)
	src[size-1] = 0xff
	send := func() error {
		for t := range count {
			if t == count-1 {
				src[size-1] = marker
				marker++
				for i := range src[:size-1] {
					src[i] = fmtCtr
					fmtCtr++
				}
			}
			if n, err := c.IOWrite(src, 0); n != size || err != nil {
				return fmt.Errorf("IOWrite: %d, %w", n, err)
			}
		}
		return nil
	}
	recv := func() error {
		m := marker
		marker++
		deadline := time.Now().Add(2 * time.Minute)
		check := time.Now()
		for lastByte(win) != m {
			if time.Now().After(deadline) {
				return fmt.Errorf("marker %d never came (last byte %d; the peer's windows: %s)", m, lastByte(win), rsocket.PeerIOMaps(c))
			}
			if time.Since(check) > 100*time.Millisecond {
				// Nothing arrives in-band now: a read that times out
				// says the connection is still fine.
				check = time.Now()
				c.SetReadDeadline(time.Now().Add(time.Millisecond))
				if _, err := c.Read(make([]byte, 1)); !isTimeout(err) {
					return fmt.Errorf("waiting for marker %d: %v (the peer's windows: %s)", m, err, rsocket.PeerIOMaps(c))
				}
				c.SetReadDeadline(time.Time{})
			}
			runtime.Gosched()
		}
		for i, b := range win[:size-1] {
			if b != verCtr {
				return fmt.Errorf("byte %d of the window is %d, want %d", i, b, verCtr)
			}
			verCtr++
		}
		return nil
	}
	for range iters {
		first, second := send, recv
		if !client {
			first, second = recv, send
		}
		if err := first(); err != nil {
			return err
		}
		if err := second(); err != nil {
			return err
		}
	}
	return c.IOUnmap(win)
}

// riostream (C, rdma-core 44) against Go both ways: riomap, riowrite
// and the peer's iomap updates on the wire, data verified by both.
func TestInteropRiostream(t *testing.T) {
	device(t)
	bin := testutil.LookPath(t, "riostream")
	addr := testutil.Addr(t)
	for _, tc := range []struct {
		name               string
		size, count, iters int
		cBuf               int
	}{
		{"1000B", 1000, 5, 3, 0},
		{"100003B-small-buffers", 100_003, 3, 2, 8192},
	} {
		cArgs := []string{"-S", strconv.Itoa(tc.size), "-C", strconv.Itoa(tc.count), "-I", strconv.Itoa(tc.iters), "-T", "v", "-T", "b"}
		if tc.cBuf != 0 {
			cArgs = append(cArgs, "-B", strconv.Itoa(tc.cBuf))
		}
		check := func(t *testing.T, c *rsocket.Conn, p *proc.Proc) {
			t.Helper()
			if err := p.Wait(); err != nil {
				t.Fatalf("C riostream: %v", p)
			}
			checkRstreamOutput(t, p, tc.size, tc.count, tc.iters)
			if _, _, _, iomap, _, _ := rsocket.PeerConnData(c); iomap != 1 {
				t.Errorf("riostream's private data says %d iomap entries, want 1 (RDMA_IOMAPSIZE 1)", iomap)
			}
			if st := rsocket.Stats(c); st.IOMap != 1 {
				t.Errorf("%d iomap updates from C, want 1", st.IOMap)
			}
		}
		t.Run("go-client/"+tc.name, func(t *testing.T) {
			port := testutil.Port()
			srv, err := proc.Start(t, "C riostream server",
				append([]string{bin, "-b", addr, "-p", strconv.Itoa(port)}, cArgs...), nil, 4*time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			c := dialC(t, srv, net.JoinHostPort(addr, strconv.Itoa(port)), rsocket.IOMapSize(1))
			if err := riostreamSide(c, true, tc.size, tc.count, tc.iters, window(t, tc.size)); err != nil {
				t.Fatalf("Go client: %v\n%v", err, srv)
			}
			check(t, c, srv)
		})
		t.Run("c-client/"+tc.name, func(t *testing.T) {
			l := listen(t, rsocket.IOMapSize(1))
			port := l.Addr().(*rsocket.Addr).Port()
			cli, err := proc.Start(t, "C riostream client",
				append([]string{bin, "-s", addr, "-p", strconv.Itoa(int(port))}, cArgs...), nil, 4*time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			c, err := l.AcceptContext(timeout(t, 2*time.Minute))
			if err != nil {
				t.Fatalf("accept: %v\n%v", err, cli)
			}
			defer c.Close()
			if err := riostreamSide(c, false, tc.size, tc.count, tc.iters, window(t, tc.size)); err != nil {
				t.Fatalf("Go server: %v\n%v", err, cli)
			}
			check(t, c, cli)
		})
	}
}
