// Package rstream is goverbs rstream: librdmacm's rstream
// (librdmacm/examples/rstream.c, rdma-core 44), a stream bandwidth and
// latency test over rsockets, on the rsocket package. Either end may be
// the C tool.
//
// Without -s it is the server: it listens on -b's address (any without
// it) and port -p (7471). With -s it connects. Both ends run the same
// tests and print the same lines: a header, then per test its name, the
// transfer size, the transfers per iteration, the iterations, the total
// bytes (both ways), the time, Gb/sec and µs per transfer. Each test
// sends 16 bytes client→server and back, then per iteration the client
// sends -C transfers of -S bytes and the server sends as many back.
//
// With none of -S (but all), -C or -I it runs the default tests: on one
// connection a latency test (one transfer, many iterations) per size of
// 64 B, 4 KiB, 64 KiB and 1 MiB (-S all: 33 sizes from 64 B to 6 MiB),
// then on a second connection a bandwidth test (many transfers, one
// iteration) per size. Otherwise one test named "custom".
//
// The -T options and how they map onto Go's blocking Conn with deadlines
// (n: a poll loop of 100 µs calls, a: a blocking call is the poll, s and
// f: kernel TCP through the net package, r: no change) are described in
// package rscommon. -T v checks every byte received against C's counter
// pattern (common.c's format_buf and verify_buf).
package rstream

import (
	"io"
	"time"

	"github.com/goverbs/goverbs/internal/tools/cmcommon"
	"github.com/goverbs/goverbs/internal/tools/rscommon"
)

// Summary is goverbs rstream's line in goverbs' command list.
const Summary = "stream bandwidth and latency over rsockets, like rstream"

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
	[-k keepalive_time]
	[-T test_option]
	    s|sockets - use standard tcp/ip sockets
	    a|async - asynchronous operation (use poll)
	    b|blocking - use blocking calls
	    f|fork - fork server processing
	    n|nonblocking - use nonblocking calls
	    r|resolve - use rdma cm to resolve address
	    v|verify - verify data
`

// run is one run of rstream.
type run struct {
	o    rscommon.Opts
	out  *cmcommon.Out
	errw io.Writer
	buf  []byte
	pat  rscommon.Pattern
	c    *rscommon.Conn
	l    *rscommon.Listener
}

// Main is goverbs rstream: args are its arguments after the subcommand;
// it returns the exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	r := &run{o: rscommon.Opts{Prog: "rstream"}, out: &cmcommon.Out{W: stdout}, errw: stderr}
	if st := rscommon.Parse(&r.o, args, "s:b:f:B:i:I:C:S:p:k:T:", "sabfnrv",
		[]string{"socket", "async", "block", "nonblock", "resolve", "verify", "fork"}, usage, stdout, stderr); st >= 0 {
		return st
	}
	return cmcommon.Exit(r.run())
}

func (r *run) client() bool { return r.o.Dst != "" }

// connect is client_connect or server_connect.
func (r *run) connect(opt rscommon.Optimization) error {
	var err error
	if r.client() {
		r.c, err = r.o.Connect(opt, false, true, r.out.W, r.errw)
	} else {
		r.c, err = r.l.Accept(r.out.W, r.errw)
	}
	return err
}

// run is rstream.c's run.
func (r *run) run() int {
	if r.o.Custom {
		r.buf = make([]byte, max(r.o.Size, 16))
	} else {
		r.buf = make([]byte, rscommon.MaxSize)
	}
	if !r.client() {
		l, err := r.o.Listen(false, r.errw)
		if err != nil {
			return -1
		}
		r.l = l
		defer l.Close()
	}
	r.out.Printf(rscommon.Header)
	if r.o.Custom {
		if r.connect(rscommon.OptNone) != nil {
			return -1
		}
		ret := r.test(rscommon.Test{Name: "custom", Size: r.o.Size, Count: r.o.Count, Iterations: r.o.Iterations})
		r.c.Shutdown()
		return ret
	}
	for _, opt := range []rscommon.Optimization{rscommon.OptLatency, rscommon.OptBandwidth} {
		if r.connect(opt) != nil {
			return -1
		}
		for _, s := range rscommon.Sizes {
			if s.Option > r.o.SizeOption {
				continue
			}
			t := rscommon.Latency(s.Size)
			if opt == rscommon.OptBandwidth {
				t = rscommon.Bandwidth(s.Size)
			}
			r.test(t) // as in C, a failed test does not end the run
		}
		r.c.Shutdown()
	}
	return 0
}

func (r *run) send(n int) error {
	if r.o.Verify {
		r.pat.Format(r.buf[:n])
	}
	return r.c.Send(r.buf[:n], r.errw)
}

func (r *run) recv(n int) error {
	if err := r.c.Recv(r.buf[:n], r.errw); err != nil {
		return err
	}
	if r.o.Verify {
		return r.pat.Verify(r.buf[:n], r.out.W)
	}
	return nil
}

// test is run_test.
func (r *run) test(t rscommon.Test) int {
	first, second := r.recv, r.send
	if r.client() {
		first, second = r.send, r.recv
	}
	if first(16) != nil || second(16) != nil { // sync_test
		return -1
	}
	start := time.Now()
	for range t.Iterations {
		for range t.Count {
			if first(t.Size) != nil {
				return -1
			}
		}
		for range t.Count {
			if second(t.Size) != nil {
				return -1
			}
		}
	}
	r.out.Printf("%s", t.Perf(time.Since(start)))
	return 0
}
