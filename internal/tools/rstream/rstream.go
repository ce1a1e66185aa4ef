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
	rscommon.Session
	buf []byte
	pat rscommon.Pattern
}

// Main is goverbs rstream: args are its arguments after the subcommand;
// it returns the exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	r := &run{Session: rscommon.Session{IOMap: false, Bind: true, O: rscommon.Opts{Prog: "rstream"}, Out: &cmcommon.Out{W: stdout}, Errw: stderr}}
	if st := rscommon.Parse(&r.O, args, "s:b:f:B:i:I:C:S:p:k:T:", "sabfnrv",
		[]string{"socket", "async", "block", "nonblock", "resolve", "verify", "fork"}, usage, stdout, stderr); st >= 0 {
		return st
	}
	return cmcommon.Exit(r.run())
}

// run is rstream.c's run.
func (r *run) run() int {
	if r.O.Custom {
		r.buf = make([]byte, max(r.O.Size, 16))
	} else {
		r.buf = make([]byte, rscommon.MaxSize)
	}
	return r.Run(r.test)
}

func (r *run) send(n int) error {
	if r.O.Verify {
		r.pat.Format(r.buf[:n])
	}
	return r.C.Send(r.buf[:n], r.Errw)
}

func (r *run) recv(n int) error {
	if err := r.C.Recv(r.buf[:n], r.Errw); err != nil {
		return err
	}
	if r.O.Verify {
		return r.pat.Verify(r.buf[:n], r.Out.W)
	}
	return nil
}

// test is run_test.
func (r *run) test(t rscommon.Test) int {
	first, second := r.recv, r.send
	if r.Client() {
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
	r.Out.Printf("%s", t.Perf(time.Since(start)))
	return 0
}
