// Package perf is goverbs perf: the job of perftest's ib_{write,read,send,atomic}_{bw,lat}
// (perftest 6.06, Debian's 4.5+0.17): ib_write_bw, ib_write_lat,
// ib_read_bw, ib_read_lat, ib_send_bw, ib_send_lat, ib_atomic_bw and
// ib_atomic_lat, wire-compatible with them: either end may be the C tool.
// This file holds the command line; the verbs side is in perf_run.go, the
// out-of-band exchange in package perftest below it.
package perf

import (
	"fmt"
	"io"
	"math"

	"github.com/goverbs/goverbs/internal/tools/cli"
	"github.com/goverbs/goverbs/internal/tools/perf/perftest"
)

// Verb is the operation a test measures (perftest's VerbType order).
type Verb int

// The verbs.
const (
	Send Verb = iota
	Write
	Read
	Atomic
)

// Test is one of the tools.
type Test struct {
	Name string // goverbs perf's name for it
	Tool string // the perftest program
	Verb Verb
	Lat  bool // a latency test (else bandwidth)
}

// Tests are goverbs perf's tests, perftest's tools.
var Tests = []Test{
	{"write-bw", "ib_write_bw", Write, false},
	{"write-lat", "ib_write_lat", Write, true},
	{"read-bw", "ib_read_bw", Read, false},
	{"read-lat", "ib_read_lat", Read, true},
	{"send-bw", "ib_send_bw", Send, false},
	{"send-lat", "ib_send_lat", Send, true},
	{"atomic-bw", "ib_atomic_bw", Atomic, false},
	{"atomic-lat", "ib_atomic_lat", Atomic, true},
}

// perfOptions are one run's settings, perftest's defaults unless given.
type perfOptions struct {
	test      Test
	port      int
	devName   string
	ibPort    int
	size      uint64
	iters     int
	txDepth   int
	rxDepth   int
	cqMod     int
	cqModSet  bool
	mtu       int // bytes; 0: the port's active MTU
	gidIndex  int // -1: none given (RoCE picks one, as perftest does)
	outReads  int // 0: the device's maximum
	qpTimeout int
	sl        int
	noPeak    bool
	all       bool
	gbits     bool
	cmpSwap   bool   // atomic: CMP_AND_SWAP instead of FETCH_AND_ADD
	rdmaCM    bool   // -R: QPs connected by rdma_cm, the exchange over rdma_cm too
	server    string // "": this end is the server
}

// perfFlag is one perftest option goverbs perf implements.
type perfFlag struct {
	short  byte
	long   string
	hasArg bool
	verbs  []Verb // nil: every test
	help   string
}

var perfFlags = []perfFlag{
	{'p', "port", true, nil, "listen on/connect to port <port> (default 18515)"},
	{'d', "ib-dev", true, nil, "use IB device <dev> (default first device found)"},
	{'i', "ib-port", true, nil, "use port <port> of IB device (default 1)"},
	{'s', "size", true, nil, "size of message to exchange (default 65536 for bw, 2 for lat)"},
	{'n', "iters", true, nil, "number of exchanges (at least 5, default 5000 for write-bw, 1000 otherwise)"},
	{'t', "tx-depth", true, nil, "size of tx queue (default 128 for bw, 1 for lat)"},
	{'r', "rx-depth", true, []Verb{Send}, "rx queue size (default 512)"},
	{'m', "mtu", true, nil, "MTU size: 256 - 4096 (default port mtu)"},
	{'x', "gid-index", true, nil, "test uses GID with GID index (default: IB no GID, Ethernet the best one)"},
	{'Q', "cq-mod", true, nil, "generate a CQE only after <cq-mod> completions (bw)"},
	{'N', "noPeak", false, nil, "cancel peak-bw calculation (default with peak up to iters=20000)"},
	{'a', "all", false, nil, "run sizes from 2 till 2^23"},
	{'q', "qp", true, nil, "number of QPs (only 1)"},
	{'u', "qp-timeout", true, nil, "QP timeout, 4 usec * 2^timeout (default 14)"},
	{'S', "sl", true, nil, "SL (default 0)"},
	{'o', "outs", true, []Verb{Read, Atomic}, "number of outstanding reads/atomics (default the device's maximum)"},
	{'A', "atomic_type", true, []Verb{Atomic}, "type of atomic operation: CMP_AND_SWAP or FETCH_AND_ADD (default)"},
	{'R', "rdma_cm", false, nil, "connect QPs with rdma_cm and run the test on those QPs (the exchange runs over rdma_cm too)"},
	{'F', "CPU-freq", false, nil, "accepted for perftest's sake: goverbs measures time, not cycles"},
	{0, "report_gbits", false, nil, "report max/average BW in Gbit/sec (instead of MiB/sec)"},
	{'V', "version", false, nil, "display the perftest version spoken"},
	{'h', "help", false, nil, "show this help"},
}

// errPerfUsage is a command-line error: exit status 2.
type errPerfUsage struct{ msg string }

func (e errPerfUsage) Error() string { return e.msg }

func perfUsagef(format string, args ...any) error {
	return errPerfUsage{fmt.Sprintf(format, args...)}
}

// Lookup returns the test of goverbs perf's name for it or of the
// perftest tool's name.
func Lookup(name string) (Test, bool) {
	for _, t := range Tests {
		if t.Name == name || t.Tool == name {
			return t, true
		}
	}
	return Test{}, false
}

// perfGetopt is goverbs perf's option table for getopt: long names are
// exact, and unknown options, perftest's many that goverbs perf does not
// implement included, are refused as unsupported.
var perfGetopt = cli.GetoptTable[*perfFlag]{
	Short: func(c byte) (*perfFlag, error) {
		for k := range perfFlags {
			if perfFlags[k].short == c {
				return &perfFlags[k], nil
			}
		}
		return nil, perfUsagef("option '-%c' is not supported by goverbs perf", c)
	},
	Long: func(name string) (*perfFlag, error) {
		for k := range perfFlags {
			if perfFlags[k].long == name {
				return &perfFlags[k], nil
			}
		}
		return nil, perfUsagef("option '--%s' is not supported by goverbs perf", name)
	},
	HasArg:   func(f *perfFlag) bool { return f.hasArg },
	LongName: func(f *perfFlag) string { return f.long },
	Errorf:   perfUsagef,
}

// parsePerfArgs parses "TEST [options] [server]". help and version are
// set for -h and -V.
func parsePerfArgs(args []string) (o *perfOptions, help, version bool, err error) {
	if len(args) == 0 {
		return nil, false, false, perfUsagef("missing test name")
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		return nil, true, false, nil
	}
	t, ok := Lookup(args[0])
	if !ok {
		return nil, false, false, perfUsagef("unknown test %q", args[0])
	}
	opts, operands, err := cli.Getopt(args[1:], perfGetopt)
	if err != nil {
		return nil, false, false, err
	}
	o = &perfOptions{test: t, port: perftest.DefaultPort, ibPort: 1, size: 65536, iters: 1000,
		txDepth: 128, rxDepth: 512, cqMod: 100, gidIndex: -1, qpTimeout: 14}
	if t.Lat {
		o.size, o.txDepth = 2, 1
	}
	if t.Verb == Atomic {
		o.size = 8 // DEF_SIZE_ATOMIC
	}
	if t.Verb == Write && !t.Lat {
		o.iters = 5000
	}
	for _, a := range opts {
		f := a.Flag
		switch f.short {
		case 'h':
			return o, true, false, nil
		case 'V':
			return o, false, true, nil
		}
		if f.verbs != nil {
			allowed := false
			for _, v := range f.verbs {
				allowed = allowed || v == t.Verb
			}
			if !allowed {
				return nil, false, false, perfUsagef("%s: %s has no such option", a.Spelt, t.Tool)
			}
		}
		if !f.hasArg {
			switch {
			case f.short == 'N':
				o.noPeak = true
			case f.short == 'R':
				o.rdmaCM = true
			case f.short == 'a':
				o.all = true
			case f.long == "report_gbits":
				o.gbits = true
			}
			continue
		}
		if f.short == 'd' {
			o.devName = a.Value
			continue
		}
		if f.short == 'A' {
			switch a.Value {
			case "CMP_AND_SWAP":
				o.cmpSwap = true
			case "FETCH_AND_ADD":
				o.cmpSwap = false
			default:
				return nil, false, false, perfUsagef("%s %s: want CMP_AND_SWAP or FETCH_AND_ADD", a.Spelt, a.Value)
			}
			continue
		}
		v, err := cli.ParseCInt(a.Value)
		if err != nil {
			return nil, false, false, perfUsagef("%s: %v", a.Spelt, err)
		}
		bad := func(want string) error { return perfUsagef("%s %s: %s", a.Spelt, a.Value, want) }
		switch f.short {
		case 'p':
			if v < 0 || v > 65535 {
				return nil, false, false, bad("port must be 0 to 65535")
			}
			o.port = int(v)
		case 'i':
			if v < 1 || v > 255 {
				return nil, false, false, bad("IB port must be 1 to 255")
			}
			o.ibPort = int(v)
		case 's':
			if v < 1 || v > math.MaxInt32 {
				return nil, false, false, bad(fmt.Sprintf("size must be 1 to %d", math.MaxInt32))
			}
			o.size = uint64(v)
		case 'n':
			if v < 5 || v > 1<<30 {
				return nil, false, false, bad("iterations must be 5 to 2^30")
			}
			o.iters = int(v)
		case 't':
			if v < 1 || v > 1<<15 {
				return nil, false, false, bad("tx depth must be 1 to 32768")
			}
			o.txDepth = int(v)
		case 'r':
			if v < 1 || v > 1<<15 {
				return nil, false, false, bad("rx depth must be 1 to 32768")
			}
			o.rxDepth = int(v)
		case 'm':
			if cli.MTUFromBytes(v) == 0 {
				return nil, false, false, bad("MTU must be 256, 512, 1024, 2048 or 4096")
			}
			o.mtu = int(v)
		case 'x':
			if v < 0 || v > 255 {
				return nil, false, false, bad("GID index must be 0 to 255")
			}
			o.gidIndex = int(v)
		case 'Q':
			if v < 1 || v > 1024 {
				return nil, false, false, bad("CQ moderation must be 1 to 1024")
			}
			o.cqMod, o.cqModSet = int(v), true
		case 'q':
			if v != 1 {
				return nil, false, false, bad("goverbs perf runs one QP")
			}
		case 'u':
			if v < 0 || v > 31 {
				return nil, false, false, bad("QP timeout must be 0 to 31")
			}
			o.qpTimeout = int(v)
		case 'S':
			if v < 0 || v > 15 {
				return nil, false, false, bad("SL must be 0 to 15")
			}
			o.sl = int(v)
		case 'o':
			if v < 1 || v > 255 {
				return nil, false, false, bad("outstanding reads must be 1 to 255")
			}
			o.outReads = int(v)
		}
	}
	switch {
	case len(operands) == 1:
		o.server = operands[0]
	case len(operands) > 1:
		return nil, false, false, perfUsagef("unexpected argument %q", operands[1])
	}
	if t.Verb == Atomic && (o.size != 8 || o.all) {
		return nil, false, false, perfUsagef("message size cannot be changed for atomic tests")
	}
	// force_dependecies, for what goverbs perf has.
	if o.txDepth > o.iters {
		o.txDepth = o.iters
	}
	if o.test.Verb == Send && o.rxDepth > o.iters {
		o.rxDepth = o.iters
	}
	if o.size > 8192 && !o.all && !o.cqModSet {
		o.cqMod = 1
	}
	if o.cqMod > o.txDepth {
		o.cqMod = o.txDepth
	}
	if o.all {
		o.size = perfMaxSize
	}
	if perftest.NoPeakAbove(o.iters) {
		o.noPeak = true
	}
	return o, false, false, nil
}

// perfMaxSize is the largest size of a sweep (MAX_SIZE, 2^23).
const perfMaxSize = 1 << 23

func perfUsage(w io.Writer) {
	fmt.Fprintln(w, "usage:")
	fmt.Fprintln(w, "  goverbs perf TEST [options]            start a server and wait for connection")
	fmt.Fprintln(w, "  goverbs perf TEST [options] <host>     connect to server at <host>")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Like perftest's tools (6.06), with which either end interoperates. TEST:")
	for _, t := range Tests {
		fmt.Fprintf(w, "  %-10s like %s\n", t.Name, t.Tool)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "options (perftest's others are refused):")
	for _, f := range perfFlags {
		spec := "    "
		if f.short != 0 {
			spec = "-" + string(f.short) + ", "
		}
		spec += "--" + f.long
		if f.hasArg {
			spec += "=<arg>"
		}
		fmt.Fprintf(w, "  %-24s %s\n", spec, f.help)
	}
}

// Summary is goverbs perf's line in goverbs' command list.
const Summary = "bandwidth and latency tests, wire-compatible with perftest's ib_*_{bw,lat}"

// Main is goverbs perf: args are its arguments after the subcommand
// (TEST [options] [server]); it returns the exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	o, help, version, err := parsePerfArgs(args)
	switch {
	case help:
		perfUsage(stdout)
		return 0
	case version:
		fmt.Fprintf(stdout, "Version: %s\n", perftest.Version)
		return 0
	case err != nil:
		cli.Errorf(stderr, "perf", "%v", err)
		fmt.Fprintln(stderr, "usage: goverbs perf TEST [options] [server]   (goverbs perf -h for help)")
		return 2
	}
	return runPerfTest(o, stdout, stderr)
}
