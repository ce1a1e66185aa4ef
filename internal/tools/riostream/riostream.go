// Package riostream is goverbs riostream: librdmacm's riostream
// (librdmacm/examples/riostream.c, rdma-core 44), rstream's test with the
// transfers made by zero-copy RDMA writes into the peer's mapped buffer
// (riomap, riowrite) on the rsocket package's IOMap and IOWrite. Either
// end may be the C tool.
//
// Options, tests and output are rstream's (see goverbs rstream), without
// -k and with -T a, b, n and v only; -b only sets the server's listen
// address (the C client ignores it too). Every connection allows the peer
// one mapping (RDMA_IOMAPSIZE 1). Each test maps this side's buffer of
// -S bytes at offset 0 with its last byte 0xff, exchanges 16 bytes
// in-band (which carries the mappings), then per iteration one side
// IOWrites its buffer -C times into the peer's, the last time with the
// next marker in the last byte (and the counter pattern of -T v in the
// others), while the other side spins until its buffer's last byte holds
// that marker; then the other way. The test ends with IOUnmap.
//
// Go cannot spin on memory another agent writes without an atomic load:
// the wait reads the last byte's aligned word atomically. While it waits
// it also makes a Read with a 1 ms deadline every 100 ms, so that a
// connection that failed ends the wait (C spins for ever then). The -T
// options map as rstream's do (package rscommon).
//
// The marker is riostream's design, not a guarantee: the order in which
// an RDMA WRITE's bytes land within a message is not defined, and rxe's
// copy (the kernel's memcpy, which may run backwards) sometimes stores
// the last byte first. C's riostream then checks data that is not there
// yet and fails verification ("data verification failed", or its peer
// waits for ever); seen on rxe in runs of thousands of 64-byte latency
// transfers, C against C too. With -T v this side gives the rest of the
// transfer up to 100 ms to land after the marker before it calls the
// data wrong; timing does not include that unless it happens.
package riostream

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/goverbs/goverbs/internal/tools/cmcommon"
	"github.com/goverbs/goverbs/internal/tools/rscommon"
	"github.com/goverbs/goverbs/mr"
)

// Summary is goverbs riostream's line in goverbs' command list.
const Summary = "zero-copy stream test over rsockets' riowrite, like riostream"

const usage = `usage: %s
	[-s server_address]
	[-b bind_address]
	[-f address_format]
	    name, ip, ipv6, or gid
	[-B buffer_size]
	[-i inline_size]
	[-I iterations]
	[-C transfer_count]
	[-S transfer_size or all]
	[-p port_number]
	[-T test_option]
	    a|async - asynchronous operation (use poll)
	    b|blocking - use blocking calls
	    n|nonblocking - use nonblocking calls
	    v|verify - verify data
`

// run is one run of riostream.
type run struct {
	rscommon.Session
	buf []byte // registered memory that never moves
	pat rscommon.Pattern
}

// Main is goverbs riostream: args are its arguments after the
// subcommand; it returns the exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	r := &run{Session: rscommon.Session{IOMap: true, Bind: false, O: rscommon.Opts{Prog: "riostream"}, Out: &cmcommon.Out{W: stdout}, Errw: stderr}}
	if st := rscommon.Parse(&r.O, args, "s:b:f:B:i:I:C:S:p:T:", "abnv",
		[]string{"async", "block", "nonblock", "verify"}, usage, stdout, stderr); st >= 0 {
		return st
	}
	return cmcommon.Exit(r.run())
}

// run is riostream.c's run.
func (r *run) run() int {
	size := rscommon.MaxSize
	if r.O.Custom {
		size = max(r.O.Size, 16)
	}
	b, err := mr.Alloc(size)
	if err != nil {
		fmt.Fprintf(r.Errw, "malloc: %v\n", err)
		return -1
	}
	defer b.Close()
	r.buf = b.Bytes()
	return r.Run(r.test)
}

// sendXfer is send_xfer: the window, by riowrite, to the same offsets of
// the peer's.
func (r *run) sendXfer(win []byte) error {
	for off := 0; off < len(win); {
		if !r.O.Blocking && !r.O.Async {
			r.C.SetWriteDeadline(time.Now().Add(100 * time.Microsecond))
		}
		n, err := r.C.RS.IOWrite(win[off:], uint64(off))
		off += n
		if err != nil && !errors.Is(err, errTimeout) {
			fmt.Fprintf(r.Errw, "riowrite: %s\n", cmcommon.Strerror(err))
			return err
		}
	}
	return nil
}

var errTimeout = os.ErrDeadlineExceeded

// lastByte reads win's last byte with an atomic load of the aligned word
// that holds it (win is from mr.Alloc: whole pages, so the word is
// there): the peer's device writes it.
func lastByte(win []byte) byte {
	i := len(win) - 1
	p := unsafe.Pointer(unsafe.SliceData(win))
	w := atomic.LoadUint32((*uint32)(unsafe.Add(p, i&^3)))
	var b [4]byte
	*(*uint32)(unsafe.Pointer(&b)) = w
	return b[i&3]
}

// recvXfer is recv_xfer: wait for the marker, check the data.
func (r *run) recvXfer(win []byte, marker byte) error {
	check := time.Now()
	var one [1]byte
	for lastByte(win) != marker {
		if time.Since(check) < 100*time.Millisecond {
			continue
		}
		check = time.Now()
		r.C.SetReadDeadline(time.Now().Add(time.Millisecond))
		n, err := r.C.Read(one[:])
		r.C.SetReadDeadline(time.Time{})
		if n != 0 {
			err = errors.New("in-band data while waiting for the marker")
		}
		if err != nil && lastByte(win) == marker {
			// The peer's writes came before its disconnect, on the
			// same queue pair: they are in place once it is seen.
			break
		}
		if err != nil && !errors.Is(err, errTimeout) {
			fmt.Fprintf(r.Errw, "riostream: waiting for marker %d: %s\n", marker, cmcommon.Strerror(err))
			return err
		}
	}
	if r.O.Verify {
		// The marker may land before the bytes in front of it: see
		// the package comment. Give them verifyWait to land.
		data := win[:len(win)-1]
		for end := time.Now().Add(verifyWait); !r.pat.Matches(data) && time.Now().Before(end); {
			time.Sleep(20 * time.Microsecond)
		}
		return r.pat.Verify(data, r.Out.W)
	}
	return nil
}

// verifyWait is how long -T v lets the rest of a transfer land after its
// marker did.
const verifyWait = 100 * time.Millisecond

// test is riostream.c's run_test.
func (r *run) test(t rscommon.Test) int {
	win := r.buf[:t.Size]
	win[t.Size-1] = 0xff
	if err := r.C.RS.IOMap(win, 0); err != nil {
		fmt.Fprintf(r.Errw, "riomap: %s\n", cmcommon.Strerror(err))
		return -1
	}
	sync := r.buf[:16]
	first, second := r.C.Recv, r.C.Send
	if r.Client() {
		first, second = r.C.Send, r.C.Recv
	}
	if first(sync, r.Errw) != nil || second(sync, r.Errw) != nil {
		return -1
	}
	var marker byte
	send := func() error {
		for range t.Count - 1 {
			if err := r.sendXfer(win); err != nil {
				return err
			}
		}
		win[t.Size-1] = marker
		marker++
		if r.O.Verify {
			r.pat.Format(win[:t.Size-1])
		}
		return r.sendXfer(win)
	}
	recv := func() error {
		m := marker
		marker++
		return r.recvXfer(win, m)
	}
	start := time.Now()
	for range t.Iterations {
		first, second := recv, send
		if r.Client() {
			first, second = send, recv
		}
		if first() != nil || second() != nil {
			return -1
		}
	}
	r.Out.Printf("%s", t.Perf(time.Since(start)))
	if err := r.C.RS.IOUnmap(win); err != nil {
		fmt.Fprintf(r.Errw, "riounmap: %s\n", cmcommon.Strerror(err))
		return -1
	}
	return 0
}
