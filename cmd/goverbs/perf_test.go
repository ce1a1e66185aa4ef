package main

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/internal/testutil/proc"
	"github.com/goverbs/goverbs/internal/tools/perf"
	"github.com/goverbs/goverbs/verbs"
)

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
func (b *perfBed) start(t *testing.T, impl string, test perf.Test, cpu int, args ...string) *proc.Proc {
	t.Helper()
	var argv, env []string
	switch impl {
	case "go":
		argv = append([]string{os.Args[0], "perf", test.Name}, args...)
		env = append(os.Environ(), envRunMain+"=1")
	case "c":
		argv = append([]string{testutil.LookPath(t, test.Tool)}, args...)
	default:
		t.Fatalf("bad impl %q", impl)
	}
	if b.taskset != "" {
		argv = append([]string{b.taskset, "-c", strconv.Itoa(cpu)}, argv...)
	}
	p, err := proc.Start(t, impl+" "+test.Name+" "+strings.Join(args, " "), argv, env, ppGuard)
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
// proc.WatchSiw): bytes TCP delivered to one of the pair's sockets that siw
// leaves unread for proc.StallSamples seconds while both programs wait are a
// receive siw dropped (docs/providers.md, "siw: who sends first"); the
// watch kills the pair and it runs again, logged, up to proc.MaxRuns
// times; so does a pair whose server's last exchange SEND siw reported
// failed after the client had it (siwLastSend). Any other failure fails
// the test.
func (b *perfBed) pair(t *testing.T, test perf.Test, srv, cli string, args ...string) (server, client *proc.Proc) {
	t.Helper()
	for try := 1; ; try++ {
		var failure, stall string
		server, client, failure, stall = b.tryPairWatched(t, test, srv, cli, append([]string{"-F"}, args...)...)
		if failure == "" {
			return server, client
		}
		why := stall
		if why == "" {
			why = b.siwLastSend(server, failure)
		}
		siwRunAgain(t, try, why, failure)
	}
}

// siwLastSend says why a failed pair is siw reporting a delivered SEND as
// failed, or "". The rdma_cm exchange ends with the server's SEND
// (ctx_xchg_data: the client writes, then reads; the server reads, then
// writes), and the client exits as soon as that message arrives. siw's
// transmit path, once a message's last segment is in the socket, looks at
// tx_suspend (set when the peer's FIN arrives) before it looks at the
// segment's last flag (siw_qp_sq_proc_tx), so a client that received the
// message, exited and closed in between turns the server's completion into
// LOC_QP_OP_ERR: a C server fails the same way (" Unable to write from
// socket/rdam_cm"). Evidence: iWARP, the client exited 0, and the server
// failed only on that last send.
func (b *perfBed) siwLastSend(server *proc.Proc, failure string) string {
	if !testutil.IWARP(b.ctx) || !strings.HasPrefix(failure, "server failed:") {
		return ""
	}
	stderr := server.Stderr.String()
	if strings.Contains(stderr, "exchange send completion: local QP operation error") ||
		strings.Contains(stderr, "Unable to write from socket/rdam_cm") {
		return "the server's last exchange SEND completed in error after the client had received it and exited 0"
	}
	return ""
}

// tryPairWatched runs the server, then the client against it once, and
// waits for both; on iWARP under the stall watch, whose evidence it
// returns with the failure.
func (b *perfBed) tryPairWatched(t *testing.T, test perf.Test, srv, cli string, args ...string) (server, client *proc.Proc, failure, stall string) {
	t.Helper()
	port := ppPort()
	rdmaCM := slices.Contains(args, "-R")
	args = append([]string{"-d", b.dev, "-p", strconv.Itoa(port)}, args...)
	server = b.start(t, srv, test, 0, args...)
	// With -R the server listens on an rdma_cm ID (which on InfiniBand
	// and RoCE has no TCP socket), and the C client does not retry its
	// first connection.
	waitListening(t, server, port, func() bool {
		if rdmaCM {
			return cmListening(t, "TCP", port)
		}
		return proc.TCPListening(port)
	})
	var w *proc.StallWatch
	if testutil.IWARP(b.ctx) {
		w = proc.WatchSiw(port, server, nil)
		defer w.Stop()
	}
	client = b.start(t, cli, test, 1, append(args, b.addr)...)
	w.Add(client)
	watched := func(failure string) (*proc.Proc, *proc.Proc, string, string) {
		w.Stop()
		stall = w.Stalled()
		return server, client, failure, stall
	}
	if err := client.Wait(); err != nil {
		tcp := ""
		if w != nil { // what siw's sockets held, before the server goes
			tcp = "\n\nTCP sockets when the client failed:\n" + testutil.TCPTable()
		}
		server.Cmd.Process.Kill()
		server.Wait()
		return watched(fmt.Sprintf("client failed: %v\n\nserver %v%s", client, server, tcp))
	}
	if err := server.Wait(); err != nil {
		return watched(proc.ServerFailed(server, client))
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
func parsePerfOutput(t *testing.T, p *proc.Proc, lat bool) perfOutput {
	t.Helper()
	var o perfOutput
	var last *[]string
	for _, line := range p.Lines() {
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
	// RDMA WRITE is reported like on any device, but qemu's pvrdma model
	// carries it as a SEND: its cases would hang in RNR retries.
	writes := !testutil.HasModelBug(t, bed.ctx, testutil.QemuPvrdmaSendOnly)
	for _, c := range cases {
		test, _ := perf.Lookup(c.test)
		if test.Verb == perf.Write && !writes {
			continue
		}
		for _, impls := range perfImplPairs {
			if impls[0] == impls[1] && len(c.args) > 0 && !c.goGo {
				continue
			}
			name := fmt.Sprintf("%s%s/%s-server/%s-client", c.test, strings.Join(c.args, ""), impls[0], impls[1])
			t.Run(name, func(t *testing.T) {
				if test.Verb == perf.Atomic {
					testutil.SkipUnlessCap(t, attr.AtomicCap != verbs.AtomicNone,
						"atomic operations (atomic_cap "+attr.AtomicCap.String()+")")
				}
				if test.Verb == perf.Read {
					testutil.SkipUnlessCap(t, attr.MaxQPRDAtomic > 0 && attr.MaxQPInitRDAtomic > 0,
						fmt.Sprintf("RDMA READ (max_qp_rd_atom %d, max_qp_init_rd_atom %d)", attr.MaxQPRDAtomic, attr.MaxQPInitRDAtomic))
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
		test, _ := perf.Lookup(c.test)
		t.Run(fmt.Sprintf("%s/%s-server/%s-client", c.test, c.srv, c.cli), func(t *testing.T) {
			server, client := bed.pair(t, test, c.srv, c.cli, "-a", "-n", "5")
			checkPerfPair(t, test, 5, sizes, server, client)
		})
	}
}

func checkPerfPair(t *testing.T, test perf.Test, iters int, sizes []uint64, server, client *proc.Proc) {
	t.Helper()
	so, co := parsePerfOutput(t, server, test.Lat), parsePerfOutput(t, client, test.Lat)
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
	case test.Verb == perf.Send:
		// Both ends of ib_send_* measure, and report themselves.
		if len(so.values) != len(sizes) {
			t.Errorf("server: %d report lines, want %d", len(so.values), len(sizes))
		}
		checkPerfValues(t, test, server, so, iters, sizes)
	case !test.Lat:
		// The server prints the client's (last) report.
		if len(so.reports) != 1 || so.reports[0] != co.reports[len(co.reports)-1] {
			t.Errorf("server's report %q, want the client's last %q", so.reports, co.reports[len(co.reports)-1])
		}
	case test.Verb == perf.Write:
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
	for _, p := range []*proc.Proc{server, client} {
		if s := p.Stderr.String(); s != "" && strings.Contains(p.Name, "go ") {
			t.Errorf("%s wrote to stderr: %q", p.Name, s)
		}
	}
}

// perfLatStdevColumn is t_stdev's column in a latency report (1-based:
// #bytes, #iterations, t_min, t_max, t_typical, t_avg, t_stdev, ...).
const perfLatStdevColumn = 7

// checkPerfValues checks one end's own reports: a line per size with the
// size and iterations asked for; for goverbs' end also that the numbers
// are numbers (tiny messages may round to 0.00 MB/s on this slow bed; the
// message rate or a latency may not be 0). A latency report's standard
// deviation may be 0.00: perftest squares the differences from the
// average truncated to whole microseconds (perftest.Lat), so samples all
// within 1 µs of it give 0 (seen on rxe, write-lat, 17.59 to 18.x µs).
func checkPerfValues(t *testing.T, test perf.Test, p *proc.Proc, o perfOutput, iters int, sizes []uint64) {
	t.Helper()
	for i, v := range o.values {
		if i >= len(sizes) || uint64(v[0]) != sizes[i] || int(v[1]) != iters {
			t.Errorf("%s: report %q: want size %v, %d iterations", p.Name, o.reports[i], sizes[min(i, len(sizes)-1)], iters)
			continue
		}
		if !strings.HasPrefix(p.Name, "go ") {
			continue
		}
		for j, x := range v[2:] {
			stdev := test.Lat && j+3 == perfLatStdevColumn
			if x < 0 || math.IsInf(x, 0) || math.IsNaN(x) || (x == 0 && !stdev && (test.Lat || j == len(v)-3)) {
				t.Errorf("%s: report %q: column %d is %v", p.Name, o.reports[i], j+3, x)
			}
		}
	}
}
