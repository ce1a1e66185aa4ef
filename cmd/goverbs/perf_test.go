package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/verbs"
)

// ---------------------------------------------------------------- unit --

func TestPerfArgs(t *testing.T) {
	o, _, _, err := parsePerfArgs([]string{"write-bw", "169.254.77.1", "-n", "50", "-s0x1000", "--gid-index=1", "-NF", "-Q", "4", "-t", "16"})
	if err != nil {
		t.Fatal(err)
	}
	want := perfOptions{test: perfTests[0], port: 18515, ibPort: 1, size: 4096, iters: 50, txDepth: 16, rxDepth: 512,
		cqMod: 4, cqModSet: true, gidIndex: 1, qpTimeout: 14, noPeak: true, server: "169.254.77.1"}
	if diff := cmp.Diff(want, *o, cmp.AllowUnexported(perfOptions{}, perfTest{})); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	// The defaults of each tool (perftest's init_perftest_params and
	// force_dependecies).
	for _, c := range []struct {
		args                  []string
		size                  uint64
		iters, txDepth, cqMod int
	}{
		{[]string{"write-bw"}, 65536, 5000, 128, 1},
		{[]string{"ib_write_bw", "-s", "64"}, 64, 5000, 128, 100},
		{[]string{"write-lat"}, 2, 1000, 1, 1},
		{[]string{"read-bw", "-s", "8192"}, 8192, 1000, 128, 100},
		{[]string{"read-lat"}, 2, 1000, 1, 1},
		{[]string{"atomic-lat", "-A", "CMP_AND_SWAP"}, 8, 1000, 1, 1},
		{[]string{"atomic-bw"}, 8, 1000, 128, 100},
		{[]string{"ib_atomic_bw", "-A", "CMP_AND_SWAP", "-n", "50", "-t", "16", "-o", "4"}, 8, 50, 16, 16},
		{[]string{"write-bw", "-n", "5"}, 65536, 5, 5, 1},
		{[]string{"write-bw", "-a", "-n", "10"}, perfMaxSize, 10, 10, 10},
	} {
		o, _, _, err := parsePerfArgs(c.args)
		if err != nil {
			t.Errorf("%q: %v", c.args, err)
			continue
		}
		if o.size != c.size || o.iters != c.iters || o.txDepth != c.txDepth || o.cqMod != c.cqMod {
			t.Errorf("%q: size %d iters %d tx %d cq_mod %d; want %d %d %d %d", c.args, o.size, o.iters, o.txDepth, o.cqMod,
				c.size, c.iters, c.txDepth, c.cqMod)
		}
	}
	if o, _, _, _ := parsePerfArgs([]string{"write-bw", "-n", "20001"}); o == nil || !o.noPeak {
		t.Error("-n 20001: the peak is not turned off")
	}
	if o, _, _, err := parsePerfArgs([]string{"atomic-bw", "--atomic_type=CMP_AND_SWAP", "-o", "4"}); err != nil || !o.cmpSwap || o.outReads != 4 || o.test.tool != "ib_atomic_bw" {
		t.Errorf("atomic-bw -A CMP_AND_SWAP -o 4: %+v, %v", o, err)
	}
	for _, args := range [][]string{{"send-bw", "-R"}, {"read-lat", "--rdma_cm"}, {"atomic-bw", "-R"}} {
		if o, _, _, err := parsePerfArgs(args); err != nil || !o.rdmaCM {
			t.Errorf("%q: rdma_cm not set (%v)", args, err)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "missing test"},
		{[]string{"atomic_bw"}, "unknown test"},
		{[]string{"ib_atomic_bw2"}, "unknown test"},
		{[]string{"write-bw", "-b"}, "'-b' is not supported"},
		{[]string{"write-bw", "-z"}, "'-z' is not supported"},
		{[]string{"write-bw", "--duration=5"}, "'--duration' is not supported"},
		{[]string{"write-bw", "--perform_warm_up"}, "not supported"},
		{[]string{"write-bw", "-q", "2"}, "one QP"},
		{[]string{"write-bw", "-o", "2"}, "ib_write_bw has no such option"},
		{[]string{"write-lat", "-r", "2"}, "ib_write_lat has no such option"},
		{[]string{"write-lat", "-A", "CMP_AND_SWAP"}, "ib_write_lat has no such option"},
		{[]string{"atomic-lat", "-A", "SWAP"}, "want CMP_AND_SWAP or FETCH_AND_ADD"},
		{[]string{"atomic-lat", "-s", "16"}, "cannot be changed for atomic"},
		{[]string{"atomic-lat", "-a"}, "cannot be changed for atomic"},
		{[]string{"atomic-bw", "-s", "16"}, "cannot be changed for atomic"},
		{[]string{"atomic-bw", "-a"}, "cannot be changed for atomic"},
		{[]string{"atomic-bw", "-A", "fetch_and_add"}, "want CMP_AND_SWAP or FETCH_AND_ADD"},
		{[]string{"atomic-bw", "-r", "8"}, "ib_atomic_bw has no such option"},
		{[]string{"atomic-bw", "-b"}, "'-b' is not supported"},
		{[]string{"atomic-bw", "-o", "0"}, "outstanding reads must be"},
		{[]string{"write-bw", "-n", "4"}, "iterations must be"},
		{[]string{"write-bw", "-s", "0"}, "size must be"},
		{[]string{"write-bw", "-m", "1000"}, "MTU must be"},
		{[]string{"write-bw", "-s"}, "requires an argument"},
		{[]string{"write-bw", "--noPeak=1"}, "doesn't allow an argument"},
		{[]string{"write-bw", "-n", "1x"}, "invalid number"},
		{[]string{"write-bw", "a", "b"}, "unexpected argument"},
	} {
		_, _, _, err := parsePerfArgs(c.args)
		var ue errPerfUsage
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, &ue) {
			t.Errorf("%q: error %v, want a usage error with %q", c.args, err, c.want)
		}
	}
}

// Refused options exit 2 and say why, before touching any device.
func TestPerfRefusesExit2(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if got := run([]string{"perf", "write-bw", "--bidirectional"}, &stdout, &stderr); got != 2 {
		t.Errorf("exit status %d, want 2", got)
	}
	if !strings.Contains(stderr.String(), "'--bidirectional' is not supported by goverbs perf") {
		t.Errorf("stderr %q", stderr.String())
	}
	stdout.Reset()
	if got := run([]string{"perf", "write-bw", "-V"}, &stdout, &stderr); got != 0 || stdout.String() != "Version: 6.06\n" {
		t.Errorf("-V: %d %q", got, stdout.String())
	}
}

func TestPerfCAltHex(t *testing.T) {
	for _, c := range []struct {
		v     uint64
		width int
		want  string
	}{{0, 4, "0000"}, {0x11, 6, "0x0011"}, {0xabcdef, 6, "0xabcdef"}, {0x1234567, 6, "0x1234567"}, {0x7f00, 16, "0x00000000007f00"}} {
		if got := cAltHex(c.v, c.width); got != c.want {
			t.Errorf("cAltHex(%#x, %d) = %q, want %q", c.v, c.width, got, c.want)
		}
	}
}

// ---------------------------------------------------------- the test bed --

// perfBed is what a perftest interop run needs: the device, the C tools,
// taskset.
type perfBed struct {
	ctx     *verbs.Context
	dev     string
	addr    string
	taskset string
}

// newPerfBed sets the bed up. Unless rdmaCM (every run passes -R), the
// test needs QPs connected by modify: perftest's default exchange
// connects them with the exchanged QPN and GID, which iWARP cannot.
func newPerfBed(t *testing.T, rdmaCM bool) *perfBed {
	t.Helper()
	ctx := testutil.Open(t)
	if !rdmaCM {
		testutil.SkipUnlessModifyConnects(t, ctx)
	}
	b := &perfBed{ctx: ctx, dev: ctx.Device().Name, addr: testutil.Addr(t)}
	for _, tool := range []string{"ib_write_bw", "ib_write_lat", "ib_read_bw", "ib_read_lat", "ib_send_bw", "ib_send_lat", "ib_atomic_bw", "ib_atomic_lat"} {
		testutil.LookPath(t, tool)
	}
	if p, err := exec.LookPath("taskset"); err == nil {
		b.taskset = p
	} else {
		t.Logf("no taskset: the ends are not pinned (%v)", err)
	}
	return b
}

// start runs one end: impl "go" (this binary as goverbs perf) or "c" (the
// perftest tool), pinned to cpu.
func (b *perfBed) start(t *testing.T, impl string, test perfTest, cpu int, args ...string) *proc {
	t.Helper()
	var argv, env []string
	switch impl {
	case "go":
		argv = append([]string{os.Args[0], "perf", test.name}, args...)
		env = append(os.Environ(), envRunMain+"=1")
	case "c":
		argv = append([]string{testutil.LookPath(t, test.tool)}, args...)
	default:
		t.Fatalf("bad impl %q", impl)
	}
	if b.taskset != "" {
		argv = append([]string{b.taskset, "-c", strconv.Itoa(cpu)}, argv...)
	}
	p, err := startProc(t, impl+" "+test.name+" "+strings.Join(args, " "), argv, env, 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// pair runs a server and a client of test with the same arguments and
// returns both once they exited 0. Both get -F: a perftest tool's estimate
// of the CPU clock (get_cpu_mhz, gettimeofday against the cycle counter)
// often fails on this loaded TCG machine, and without -F the tool then
// exits ("Can't produce a report"); with it, it prints what it has. The
// C ends' numbers are the C tool's business, so only their columns'
// shape is checked.
//
// On iWARP a pair runs under the cm interop tests' stall watch (cmPair,
// cmWatchSiw): bytes TCP delivered to one of the pair's sockets that siw
// leaves unread for cmStallSamples seconds while both programs wait are a
// receive siw dropped (docs/providers.md, "siw: who sends first"); the
// watch kills the pair and it runs again, logged, up to cmKernelTries
// times. Any other failure fails the test.
func (b *perfBed) pair(t *testing.T, test perfTest, srv, cli string, args ...string) (server, client *proc) {
	t.Helper()
	for try := 1; ; try++ {
		var failure, stall string
		server, client, failure, stall = b.tryPairWatched(t, test, srv, cli, append([]string{"-F"}, args...)...)
		if failure == "" {
			return server, client
		}
		siwRunAgain(t, try, stall, failure)
	}
}

// tryPairWatched runs the server, then the client against it once, and
// waits for both; on iWARP under the stall watch, whose evidence it
// returns with the failure.
func (b *perfBed) tryPairWatched(t *testing.T, test perfTest, srv, cli string, args ...string) (server, client *proc, failure, stall string) {
	t.Helper()
	port := ppPort()
	rdmaCM := slices.Contains(args, "-R")
	args = append([]string{"-d", b.dev, "-p", strconv.Itoa(port)}, args...)
	server = b.start(t, srv, test, 0, args...)
	deadline := time.Now().Add(90 * time.Second)
	// With -R the server listens on an rdma_cm ID (which on InfiniBand
	// and RoCE has no TCP socket), and the C client does not retry its
	// first connection.
	for rdmaCM && !cmListening(t, "TCP", port) || !rdmaCM && !listening(port) {
		if server.exited() {
			t.Fatalf("server exited before listening: %v", server)
		}
		if time.Now().After(deadline) {
			t.Fatalf("server not listening on %d after 90 s", port)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var w *cmStallWatch
	if testutil.IWARP(b.ctx) {
		w = cmWatchSiw("perf", port, server)
		defer w.stop()
	}
	client = b.start(t, cli, test, 1, append(args, b.addr)...)
	if w != nil {
		w.add(client)
	}
	watched := func(failure string) (*proc, *proc, string, string) {
		if w != nil {
			w.stop()
			stall = w.stalled()
		}
		return server, client, failure, stall
	}
	if err := client.wait(); err != nil {
		tcp := ""
		if w != nil { // what siw's sockets held, before the server goes
			tcp = "\n\nTCP sockets when the client failed:\n" + strings.Join(testutil.TCPSockets(), "\n")
		}
		server.cmd.Process.Kill()
		server.wait()
		return watched(fmt.Sprintf("client failed: %v\n\nserver %v%s", client, server, tcp))
	}
	if err := server.wait(); err != nil {
		return watched(fmt.Sprintf("server failed: %v\n\nclient %v", server, client))
	}
	return server, client, "", ""
}

// perfOutput is what one end printed that the test checks.
type perfOutput struct {
	local, remote []string // "QPN PSN RKey VAddr", the GID line appended
	reports       []string // the result lines, as printed
	values        [][]float64
}

var (
	perfAddrRE = regexp.MustCompile(`^ (local|remote) address: LID (?:0000|0x[0-9a-f]{2,}) QPN (0x[0-9a-f]{4,}) PSN (0x[0-9a-f]{4,})(?: OUT 0x[0-9a-f]{2,})?(?: RKey (0x[0-9a-f]{6,}) VAddr (0x[0-9a-f]{14,}))?$`)
	perfGIDRE  = regexp.MustCompile(`^ GID: (\d\d:){15}\d\d\d?$`)
	perfIntRE  = regexp.MustCompile(`^\d+$`)
	perf2RE    = regexp.MustCompile(`^(\d+\.\d\d|-?inf|-?nan)$`) // a C end whose clock estimate failed prints inf, nan
	perf6RE    = regexp.MustCompile(`^(\d+\.\d{6}|-?inf|-?nan)$`)
)

// parsePerfOutput picks the address and report lines out of one end's
// stdout; the header lines are the tools' own business and not checked.
func parsePerfOutput(t *testing.T, p *proc, lat bool) perfOutput {
	t.Helper()
	var o perfOutput
	var last *[]string
	for _, line := range p.lines() {
		if m := perfAddrRE.FindStringSubmatch(line); m != nil {
			last = &o.local
			if m[1] == "remote" {
				last = &o.remote
			}
			*last = append(*last, strings.Join(m[2:], " "))
			continue
		}
		if perfGIDRE.MatchString(line) && last != nil && len(*last) > 0 {
			(*last)[len(*last)-1] += line
			continue
		}
		// REPORT_FMT (bytes, iterations, peak, average, message
		// rate) and REPORT_FMT_LAT (bytes, iterations, seven times).
		f := strings.Fields(line)
		want := []*regexp.Regexp{perfIntRE, perfIntRE, perf2RE, perf2RE, perf6RE}
		if lat {
			want = []*regexp.Regexp{perfIntRE, perfIntRE, perf2RE, perf2RE, perf2RE, perf2RE, perf2RE, perf2RE, perf2RE}
		}
		ok := len(f) == len(want) && strings.HasPrefix(line, " ")
		for i := 0; ok && i < len(f); i++ {
			ok = want[i].MatchString(f[i])
		}
		if ok {
			o.reports = append(o.reports, line)
			var v []float64
			for _, x := range f {
				n, _ := strconv.ParseFloat(x, 64)
				v = append(v, n)
			}
			o.values = append(o.values, v)
		}
	}
	return o
}

var perfImplPairs = [][2]string{{"go", "c"}, {"c", "go"}, {"go", "go"}} // server, client

// Each tool against its perftest counterpart, both ways: both ends finish,
// each saw the addresses the other printed, and the result lines have
// perftest's columns with the size and iterations asked for. The
// bandwidth server prints the client's report, received over the
// exchange: it must be the client's line, to the character.
//
// With -R (rdma_cm: the exchange and the test QP's connection) a few
// pairs run on every device, iWARP included, whose QPs connect only that
// way; the rest needs QPs connected by modify and runs where the device
// has that.
func TestPerfInterop(t *testing.T) {
	bed := newPerfBed(t, true)
	const iters = 20
	type perfCase struct {
		test  string
		args  []string
		sizes []uint64
		goGo  bool // a Go/Go pair too, despite args
	}
	cmCases := []perfCase{
		{"write-bw", []string{"-R"}, []uint64{65536}, true},
		{"read-bw", []string{"-R", "-s", "4096"}, []uint64{4096}, false},
		{"send-bw", []string{"-R"}, []uint64{65536}, true},
		{"send-lat", []string{"-R"}, []uint64{2}, false},
		{"read-lat", []string{"-R"}, []uint64{2}, true},
		{"write-lat", []string{"-R"}, []uint64{2}, true},
		{"atomic-bw", []string{"-R"}, []uint64{8}, true},
		{"atomic-bw", []string{"-R", "-A", "CMP_AND_SWAP"}, []uint64{8}, true},
	}
	modifyCases := []perfCase{
		{"write-bw", nil, []uint64{65536}, false},
		{"write-bw", []string{"-s", "64", "-t", "8", "-Q", "4"}, []uint64{64}, false},
		{"write-lat", nil, []uint64{2}, false},
		{"read-bw", []string{"-s", "4096"}, []uint64{4096}, false},
		{"read-lat", []string{"-s", "64"}, []uint64{64}, false},
		{"send-bw", nil, []uint64{65536}, false},
		{"send-bw", []string{"-s", "100", "-r", "8", "-t", "4"}, []uint64{100}, false},
		{"send-lat", nil, []uint64{2}, false},
		{"atomic-lat", nil, []uint64{8}, false},
		{"atomic-lat", []string{"-A", "CMP_AND_SWAP"}, []uint64{8}, false},
		{"atomic-bw", nil, []uint64{8}, false},
		{"atomic-bw", []string{"-A", "CMP_AND_SWAP", "-t", "16", "-Q", "4", "-o", "2"}, []uint64{8}, true},
	}
	cases := cmCases
	if !testutil.IWARP(bed.ctx) {
		cases = append(cases, modifyCases...)
	} else {
		t.Run("qp-modify", func(t *testing.T) { testutil.SkipUnlessModifyConnects(t, bed.ctx) })
	}
	attr, err := bed.ctx.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		test, _ := lookupPerfTest(c.test)
		for _, impls := range perfImplPairs {
			if impls[0] == impls[1] && len(c.args) > 0 && !c.goGo {
				continue
			}
			name := fmt.Sprintf("%s%s/%s-server/%s-client", c.test, strings.Join(c.args, ""), impls[0], impls[1])
			t.Run(name, func(t *testing.T) {
				if test.verb == perfAtomic {
					testutil.SkipUnlessCap(t, attr.AtomicCap != verbs.AtomicNone,
						"atomic operations (atomic_cap "+attr.AtomicCap.String()+")")
				}
				args := append([]string{"-n", strconv.Itoa(iters)}, c.args...)
				server, client := bed.pair(t, test, impls[0], impls[1], args...)
				checkPerfPair(t, test, iters, c.sizes, server, client)
			})
		}
	}
}

// -a: the size sweep, 2 to 2^23: ib_write_bw's server with a Go client,
// a Go server with ib_send_bw's client (whose ends handshake between
// sizes). Five iterations a size keep it short.
func TestPerfSweep(t *testing.T) {
	bed := newPerfBed(t, false)
	var sizes []uint64
	for i := 1; i < 24; i++ {
		sizes = append(sizes, 1<<i)
	}
	for _, c := range []struct{ test, srv, cli string }{{"write-bw", "c", "go"}, {"send-bw", "go", "c"}} {
		test, _ := lookupPerfTest(c.test)
		t.Run(fmt.Sprintf("%s/%s-server/%s-client", c.test, c.srv, c.cli), func(t *testing.T) {
			server, client := bed.pair(t, test, c.srv, c.cli, "-a", "-n", "5")
			checkPerfPair(t, test, 5, sizes, server, client)
		})
	}
}

func checkPerfPair(t *testing.T, test perfTest, iters int, sizes []uint64, server, client *proc) {
	t.Helper()
	so, co := parsePerfOutput(t, server, test.lat), parsePerfOutput(t, client, test.lat)
	if len(so.local) != 1 || len(co.local) != 1 || len(so.remote) != 1 || len(co.remote) != 1 {
		t.Fatalf("want one local and one remote address per end: server %q %q, client %q %q\n%v\n%v",
			so.local, so.remote, co.local, co.remote, server, client)
	}
	if so.local[0] != co.remote[0] || co.local[0] != so.remote[0] {
		t.Errorf("the ends disagree on the addresses: server local %q remote %q, client local %q remote %q",
			so.local[0], so.remote[0], co.local[0], co.remote[0])
	}
	// The client reports every size.
	if len(co.values) != len(sizes) {
		t.Fatalf("client: %d report lines, want %d:\n%v", len(co.values), len(sizes), client)
	}
	checkPerfValues(t, test, client, co, iters, sizes)
	switch {
	case test.verb == perfSend:
		// Both ends of ib_send_* measure, and report themselves.
		if len(so.values) != len(sizes) {
			t.Errorf("server: %d report lines, want %d", len(so.values), len(sizes))
		}
		checkPerfValues(t, test, server, so, iters, sizes)
	case !test.lat:
		// The server prints the client's (last) report.
		if len(so.reports) != 1 || so.reports[0] != co.reports[len(co.reports)-1] {
			t.Errorf("server's report %q, want the client's last %q", so.reports, co.reports[len(co.reports)-1])
		}
	case test.verb == perfWrite:
		// Both ends of ib_write_lat measure.
		if len(so.values) != len(sizes) {
			t.Errorf("server: %d report lines, want %d", len(so.values), len(sizes))
		}
		checkPerfValues(t, test, server, so, iters, sizes)
	default:
		if len(so.reports) != 0 {
			t.Errorf("the read-lat server reported %q", so.reports)
		}
	}
	for _, p := range []*proc{server, client} {
		if s := p.stderr.String(); s != "" && strings.Contains(p.name, "go ") {
			t.Errorf("%s wrote to stderr: %q", p.name, s)
		}
	}
}

// The measured loops allocate nothing: a client in this process runs them
// repeatedly against a server in this process (passive for the bandwidth
// and read tools; for ib_write_lat's ping-pong the server runs as many
// rounds), then both finish the exchange normally.
func TestPerfAllocs(t *testing.T) {
	bed := newPerfBed(t, false)
	const runs = 3
	for _, name := range []string{"write-bw", "read-bw", "read-lat", "atomic-lat", "atomic-bw", "write-lat"} {
		t.Run(name, func(t *testing.T) {
			if strings.HasPrefix(name, "atomic-") {
				attr, err := bed.ctx.QueryDevice()
				if err != nil {
					t.Fatal(err)
				}
				testutil.SkipUnlessCap(t, attr.AtomicCap != verbs.AtomicNone, "atomic operations (atomic_cap "+attr.AtomicCap.String()+")")
			}
			port := strconv.Itoa(ppPort())
			args := []string{name, "-d", bed.dev, "-p", port, "-n", "20"}
			if !strings.HasPrefix(name, "atomic-") {
				args = append(args, "-s", "64")
			}
			so, _, _, err := parsePerfArgs(args)
			if err != nil {
				t.Fatal(err)
			}
			co, _, _, err := parsePerfArgs(append(args, bed.addr))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			srv := &perf{o: so, stdout: io.Discard, epoch: time.Now()}
			pingpong := so.test.lat && so.test.verb == perfWrite
			errc := make(chan error, 1)
			// The server's own printing and exchange would count as
			// allocations: it reports ready after its setup and waits
			// for the client's measurement to end before going on.
			ready, release := make(chan struct{}), make(chan struct{})
			go func() {
				err := srv.setup(ctx)
				close(ready)
				for i := 0; err == nil && pingpong && i < runs+1; i++ {
					err = srv.iterLatWrite(ctx, so.size)
				}
				if err == nil {
					select {
					case <-release:
						err = srv.measure(ctx)
					case <-ctx.Done():
						err = ctx.Err()
					}
				}
				if cerr := srv.close(); err == nil {
					err = cerr
				}
				errc <- err
			}()
			for !listening(ppPortNum(t, port)) {
				select {
				case err := <-errc:
					t.Fatalf("server ended before listening: %v", err)
				case <-time.After(20 * time.Millisecond):
				}
			}
			cli := &perf{o: co, stdout: io.Discard, epoch: time.Now()}
			defer cli.close()
			if err := cli.setup(ctx); err != nil {
				t.Fatal(err)
			}
			<-ready
			iter := map[string]func(context.Context, uint64) error{
				"write-bw": cli.iterBW, "read-bw": cli.iterBW, "read-lat": cli.iterLatRead, "atomic-lat": cli.iterLatRead, "atomic-bw": cli.iterBW,
				"write-lat": cli.iterLatWrite,
			}[name]
			var iterErr error
			allocs := testing.AllocsPerRun(runs, func() {
				if err := iter(ctx, co.size); err != nil && iterErr == nil {
					iterErr = err
				}
			})
			close(release)
			if iterErr != nil {
				t.Fatal(iterErr)
			}
			if err := cli.measure(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-errc; err != nil {
				t.Fatalf("server: %v", err)
			}
			if allocs != 0 {
				t.Errorf("%s's measured loop: %v allocations per run, want 0", name, allocs)
			}
		})
	}
}

func ppPortNum(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// checkPerfValues checks one end's own reports: a line per size with the
// size and iterations asked for; for goverbs' end also that the numbers
// are numbers (tiny messages may round to 0.00 MB/s on this slow bed; the
// message rate or a latency may not be 0).
func checkPerfValues(t *testing.T, test perfTest, p *proc, o perfOutput, iters int, sizes []uint64) {
	t.Helper()
	for i, v := range o.values {
		if i >= len(sizes) || uint64(v[0]) != sizes[i] || int(v[1]) != iters {
			t.Errorf("%s: report %q: want size %v, %d iterations", p.name, o.reports[i], sizes[min(i, len(sizes)-1)], iters)
			continue
		}
		if !strings.HasPrefix(p.name, "go ") {
			continue
		}
		for j, x := range v[2:] {
			if x < 0 || math.IsInf(x, 0) || math.IsNaN(x) || (x == 0 && (test.lat || j == len(v)-3)) {
				t.Errorf("%s: report %q: column %d is %v", p.name, o.reports[i], j+3, x)
			}
		}
	}
}
