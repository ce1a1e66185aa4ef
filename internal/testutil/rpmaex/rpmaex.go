// Package rpmaex is the interop matrix of goverbs' ports of librpma's
// examples (examples/rpma/NN-name) against C librpma: each example's
// server and clients run as processes, Go ↔ Go, Go server ↔ C clients and
// C server ↔ Go clients, the C ends being librpma programs of our own
// (rpma/testdata/rpmaex*.c, built with testutil.BuildC) that speak the
// examples' protocols and print their lines. The Go end is the example's
// test binary run as the example: its main_test.go is
//
//	func TestMain(m *testing.M) { rpmaex.Main(m, main) }
//
//	func TestRPMAExamples(t *testing.T) { rpmaex.Examples(t, example.Name) }
//
// and Usage checks the example's command-line errors in process.
package rpmaex

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/internal/testutil/proc"
	"github.com/goverbs/goverbs/verbs"
)

// EnvRunMain makes an example's test binary run the example (Main), so
// that the tests can run the Go end as a process of its own, like the C
// peer at the other end.
const EnvRunMain = "GOVERBS_TEST_RUN_MAIN"

// Main is an example's TestMain: it runs the example (exampleMain, which
// exits) when EnvRunMain is set, and the tests otherwise.
func Main(m *testing.M, exampleMain func()) {
	if os.Getenv(EnvRunMain) == "1" {
		exampleMain()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// noPMem is what the examples print on stderr when built without libpmem
// (common.NoPMem).
const noPMem = "The example is unable to use libpmem. If unintended please check the build log. Using DRAM instead.\n"

// repoRoot returns the module's root: the first directory above the
// working directory (the test's package) that holds go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}

// usageCases are the command-line errors of the examples: the arguments
// after the program's name, the exit status and what stderr must hold.
var usageCases = map[string][]struct {
	args []string
	rc   int
	want string
}{
	"01-connection": {
		{nil, 2, "usage: 01-connection server|client <server_address> <port> [ARGS]"},
		{[]string{"both", "a", "1"}, 2, "usage:"},
		{[]string{"server", "a"}, 255, "usage: 01-connection server <server_address> <port>\n"},
	},
	"08-messages-ping-pong": {
		{[]string{"client", "a", "1", "7"}, 255,
			"usage: 08-messages-ping-pong client <server_address> <port> <seed> <rounds> [<sleep>]\n"},
	},
	"07-atomic-write":                {{[]string{"client", "a", "1"}, 255, "<word1> [<word2>] [..]"}},
	"13-messages-ping-pong-with-srq": {{[]string{"server", "a", "1", "0"}, 255, "<timeout> should be a positive number of seconds (0 given)"}},
	"08srq-simple-messages-ping-pong-with-srq": {
		{[]string{"server", "a", "1", "x"}, 255, "The third parameter should be one of m or r (x given)"},
	},
	"10-send-with-imm": {
		{[]string{"client", "a", "1", "4294967296"}, 255, "The provided immediate data is too big (4294967296 > 4294967295)"},
	},
	"12-receive-completion-queue": {
		{[]string{"client", "a", "1", "99999999999999999999", "1"}, 255, "strtoul(99999999999999999999) overflowed"},
	},
}

// Usage checks example's command-line errors, running it in process with
// run (common.Run).
func Usage(t *testing.T, example string, run func(args []string, stdout, stderr io.Writer) int) {
	cases, ok := usageCases[example]
	if !ok {
		t.Fatalf("no usage cases for %s", example)
	}
	for _, c := range cases {
		var out, errb strings.Builder
		rc := run(c.args, &out, &errb)
		if rc != c.rc || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d, %q", c.args, rc, errb.String(), c.rc, c.want)
		}
	}
}

// UsageCases reports whether Usage has cases for example.
func UsageCases(example string) bool { _, ok := usageCases[example]; return ok }

// RejectedCases reports whether Rejected has a test for example.
func RejectedCases(example string) bool {
	return example == "01-connection" || example == "08-messages-ping-pong"
}

// rpxBed is the test bed: the address of the device, the C peers and the
// rdma tool that tells when a server listens.
type rpxBed struct {
	example string // the example this test binary is
	addr    string
	cbin    string
	rdma    string
	iwarp   bool     // the device's transport is iWARP
	cEnv    []string // the C peers' environment; nil: the test's
}

// cSources are the C peers' sources (rpma/testdata/rpmaex_NAME.c) that
// hold each example; rpmaex_util.c is their main. The example table of
// util.c names every example's functions weakly, so a peer built from
// some of the sources runs their examples and refuses the others. Every
// test binary builds one peer from all of them (cPeerSources): the same
// build for all, which testutil.BuildC then makes once per boot of a
// test-bed guest instead of once per binary.
var cSources = map[string]string{
	"01-connection":                            "conn",
	"02-read-to-volatile":                      "conn",
	"03-read-to-persistent":                    "hello",
	"04-write-to-persistent":                   "hello",
	"05-flush-to-persistent":                   "hello",
	"06-multiple-connections":                  "multi",
	"06scch-multiple-connections":              "multi",
	"07-atomic-write":                          "atomic",
	"08-messages-ping-pong":                    "msg",
	"08srq-simple-messages-ping-pong-with-srq": "msg",
	"09-flush-to-persistent-GPSPM":             "hello",
	"09scch-flush-to-persistent-GPSPM":         "hello",
	"10-send-with-imm":                         "imm",
	"11-write-with-imm":                        "imm",
	"12-receive-completion-queue":              "msg",
	"12scch-receive-completion-queue":          "msg",
	"13-messages-ping-pong-with-srq":           "msg",
}

func newRPXBed(t *testing.T, example string, withC bool) *rpxBed {
	t.Helper()
	if _, ok := cSources[example]; !ok {
		t.Fatalf("no example %q", example)
	}
	b := &rpxBed{example: example, addr: testutil.Addr(t), iwarp: testutil.Device(t).NodeType.Transport() == verbs.TransportIWARP}
	if p, err := exec.LookPath("rdma"); err == nil {
		b.rdma = p
	} else {
		t.Logf("no rdma tool (%v): servers get 3 s to listen, clients retry", err)
	}
	if !withC {
		return b
	}
	dir := filepath.Join(repoRoot(t), "rpma", "testdata")
	start := time.Now()
	b.cbin = testutil.BuildC(t, "rpmaex", cPeerSources(dir)...)
	t.Logf("built the C peers (or found this boot's build) in %v", time.Since(start).Round(time.Millisecond))
	return b
}

// cPeerSources returns the paths of every C peer source in dir (util.c
// first, then cSources' files in order of name, each once).
func cPeerSources(dir string) []string {
	paths := []string{filepath.Join(dir, "rpmaex_util.c")}
	for _, s := range slices.Compact(slices.Sorted(maps.Values(cSources))) {
		paths = append(paths, filepath.Join(dir, "rpmaex_"+s+".c"))
	}
	return paths
}

// rpxPort returns a port no other run used.
func rpxPort() int { return testutil.Port() }

// proc.Proc is one example program running.

// start runs an example program: impl "go" (this test binary, which is
// the example when EnvRunMain is set) or "c" (the C peers).
func (b *rpxBed) start(t *testing.T, impl, example, role string, port int, args ...string) *proc.Proc {
	t.Helper()
	p, err := b.tryStart(t, impl, example, role, port, args...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// tryStart is start for other goroutines than the test's.
func (b *rpxBed) tryStart(t *testing.T, impl, example, role string, port int, args ...string) (*proc.Proc, error) {
	argv := append([]string{example, role, b.addr, strconv.Itoa(port)}, args...)
	var env []string
	switch impl {
	case "go":
		if example != b.example {
			return nil, fmt.Errorf("this test binary is %s, not %s", b.example, example)
		}
		argv = append([]string{os.Args[0]}, argv[1:]...)
		env = append(os.Environ(), EnvRunMain+"=1")
	case "c":
		argv = append([]string{b.cbin}, argv...)
		env = b.cEnv
	default:
		return nil, fmt.Errorf("bad impl %q", impl)
	}
	return proc.Start(t, impl+" "+role+" "+strings.Join(args, " "), argv, env, 4*time.Minute)
}

// listening reports whether an rdma_cm ID listens on addr:port.
func (b *rpxBed) listening(port int) (bool, error) {
	out, err := exec.Command(b.rdma, "-j", "res", "show", "cm_id").Output()
	if err != nil {
		return false, err
	}
	var ids []map[string]any
	if err := json.Unmarshal(out, &ids); err != nil {
		return false, fmt.Errorf("rdma -j res show cm_id: %v: %s", err, out)
	}
	want := b.addr + ":" + strconv.Itoa(port)
	for _, id := range ids {
		if id["state"] == "LISTEN" && id["src-addr"] == want {
			return true, nil
		}
	}
	return false, nil
}

// waitListening waits until the server listens.
func (b *rpxBed) waitListening(t *testing.T, srv *proc.Proc, port int) {
	t.Helper()
	if b.rdma == "" {
		time.Sleep(3 * time.Second)
		return
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ok, err := b.listening(port)
		if err != nil {
			t.Logf("%v: servers get 3 s to listen", err)
			b.rdma = ""
			time.Sleep(3 * time.Second)
			return
		}
		if ok {
			return
		}
		if srv.Exited() {
			t.Fatalf("server ended before listening: %v", srv)
		}
		if time.Now().After(deadline) {
			t.Fatalf("server not listening after 2 min: %v", srv)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// runClient runs a client to its end, again while it is rejected because
// the server does not listen yet.
//
// On iWARP it also runs the client again when the kernel refused its
// CONNECT with EADDRNOTAVAIL (siw's rare refusal, testutil.Redial): no
// request reached the server then, and a new client has a new port.
func (b *rpxBed) runClient(t *testing.T, srv *proc.Proc, impl, example string, port int, args ...string) (*proc.Proc, error) {
	var redial testutil.Redial
	for try := 1; ; try++ {
		c, err := b.tryStart(t, impl, example, "client", port, args...)
		if err != nil {
			return nil, err
		}
		err = c.Wait()
		if err != nil && try < 20 && strings.Contains(c.Stderr.String(), "Connection rejected") && !srv.Exited() {
			time.Sleep(500 * time.Millisecond)
			continue
		}
		refused := err != nil && b.iwarp && !srv.Exited() &&
			strings.Contains(strings.ToLower(c.Stderr.String()), "cannot assign requested address")
		if redial.Again(t, refused, "siw: "+c.Name+"'s CONNECT", c) {
			continue
		}
		return c, err
	}
}

// rpxCase is one run of an example: the server's arguments, the clients'
// (run at the same time), and what they must print.
type rpxCase struct {
	example string
	label   string
	srvArgs []string
	clients [][]string
	srvOut  []string   // the server's stdout, in order
	cliOut  [][]string // each client's stdout, in order
	// check replaces srvOut and cliOut when they are not fixed.
	check func(t *testing.T, srv *proc.Proc, clis []*proc.Proc)
	// srvErr and cliErr are the Go programs' whole stderr.
	srvErr, cliErr string
}

// rpxCell is who plays which part: "go" or "c" for the server, then the
// clients.
type rpxCell struct{ srv, cli []string }

func (c rpxCell) String() string { return c.srv[0] + "-server_" + strings.Join(c.cli, "-") + "-client" }

// run runs a case in a cell and checks exit codes and output.
func (b *rpxBed) run(t *testing.T, c *rpxCase, cell rpxCell) {
	for try := 1; ; try++ {
		srv, clis, srvErr, errs, snapshot, stall := b.runEnds(t, c, cell)
		tag, why := "siw", stall
		if why != "" {
			why += " (docs/providers.md, siw: who sends first)"
		} else {
			why = b.siwFirstMessage(srv, srvErr, clis, errs)
		}
		if why == "" {
			tag, why = "C completion order", cCompletionOrder(c, cell, srv, clis)
		}
		if why == "" || try == proc.MaxRuns {
			if why != "" {
				t.Logf("%s, attempt %d: %s", tag, try, why)
			}
			b.check(t, c, cell, srv, clis, srvErr, errs, snapshot)
			return
		}
		t.Logf("%s, attempt %d: %s; running the cell again\n%s", tag, try, why, snapshot)
	}
}

// cCompletionOrder says why a failed run is the completion order the C
// shared-channel examples assume, or "". librpma's scch examples wait on
// the shared completion channel for their SEND's completion and fail with
// "unexpected wc.opcode value (128 != 0)" when the RECV completion of the
// peer's answer comes out first. Nothing orders completions across two
// CQs, and the providers here do not keep that order either: siw completes
// a SEND from its transmit thread, and rxe on 6.12 handles the ACK that
// completes the SEND and the answer that completes the RECV in different
// tasks (docs/kernels.md). The Go ports keep such a completion for the
// next wait (common.WaitAndValidate); the C end fails, and its peer then
// waits in vain.
func cCompletionOrder(c *rpxCase, cell rpxCell, srv *proc.Proc, clis []*proc.Proc) string {
	if !strings.Contains(c.example, "scch") {
		return ""
	}
	ends, kinds := append([]*proc.Proc{srv}, clis...), append([]string{cell.srv[0]}, cell.cli...)
	for i, p := range ends {
		if p == nil || i >= len(kinds) || kinds[i] != "c" {
			continue
		}
		if e := p.Stderr.String(); strings.Contains(e, "unexpected wc.opcode value (128 != 0)") ||
			strings.Contains(e, "unexpected wc.opcode value (0 != 128)") {
			return fmt.Sprintf("%s (C) got the two completions of a message and its answer the other way round (unexpected wc.opcode value), an order the C example assumes (docs/kernels.md)", p.Name)
		}
	}
	return ""
}

// siwFirstMessage says why a failed run is iWARP's "who sends first", or
// "": the 06 servers (librpma's example, C and Go alike) read from a
// client as soon as they accept it, and on iWARP the passive side must not
// send first; when that READ request reaches the client's siw glued to the
// MPA reply, siw refuses the extra bytes and the client's connection ends
// in CONNECT_ERROR ("Connection lost", librpma's name) or, when siw's 10 s
// for the reply pass, UNREACHABLE (docs/providers.md, "siw: who sends
// first"; docs/kernels.md §9). Evidence: iWARP, the server ended well or
// failed only because its first request was flushed (03's server, too,
// reads first), and every client that failed met one of those two at
// connect.
func (b *rpxBed) siwFirstMessage(srv *proc.Proc, srvErr error, clis []*proc.Proc, errs []error) string {
	if !b.iwarp || srvErr != nil && !strings.HasSuffix(srv.Stderr.String(), "failed: Work Request Flushed Error\n") {
		return ""
	}
	var timedOut []string
	for i, cl := range clis {
		switch {
		case errs[i] == nil:
		case cl != nil && (strings.Contains(cl.Stderr.String(), "Connection unreachable") ||
			strings.Contains(cl.Stderr.String(), "Connection lost")):
			timedOut = append(timedOut, cl.Name)
		default:
			return ""
		}
	}
	if len(timedOut) == 0 {
		return ""
	}
	return fmt.Sprintf("the connection of %s failed in its setup (CONNECT_ERROR or UNREACHABLE; docs/providers.md, siw: who sends first)", strings.Join(timedOut, ", "))
}

// runEnds starts a case's server and clients and waits for all of them.
// On iWARP it watches the port's sockets as the cm interop tests do
// (proc.WatchSiw): bytes siw leaves unread for 5 s (a receive it dropped,
// docs/providers.md) kill the server, and stall says so.
func (b *rpxBed) runEnds(t *testing.T, c *rpxCase, cell rpxCell) (srv *proc.Proc, clis []*proc.Proc, srvErr error, errs []error, snapshot, stall string) {
	port := rpxPort()
	srv = b.start(t, cell.srv[0], c.example, "server", port, c.srvArgs...)
	b.waitListening(t, srv, port)
	clis = make([]*proc.Proc, len(c.clients))
	errs = make([]error, len(c.clients))
	var wg sync.WaitGroup
	for i, args := range c.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			clis[i], errs[i] = b.runClient(t, srv, cell.cli[i], c.example, port, args...)
		}()
	}
	var w *proc.StallWatch
	if b.iwarp {
		w = proc.WatchSiw(port, srv, nil)
	}
	snapshot = b.snapshotIfSlow(port, wg.Wait)
	srvErr = srv.Wait()
	if w != nil {
		w.Stop()
		stall = w.Stalled()
	}
	return srv, clis, srvErr, errs, snapshot, stall
}

// check fails t unless every end of a run exited well and printed what
// the case wants.
func (b *rpxBed) check(t *testing.T, c *rpxCase, cell rpxCell, srv *proc.Proc, clis []*proc.Proc, srvErr error, errs []error, snapshot string) {
	failed := srvErr != nil
	for _, err := range errs {
		failed = failed || err != nil
	}
	if failed {
		var sb strings.Builder
		fmt.Fprintf(&sb, "server %v\n", srv)
		for i, cl := range clis {
			if cl == nil {
				fmt.Fprintf(&sb, "client %d: %v\n", i, errs[i])
				continue
			}
			fmt.Fprintf(&sb, "client %v\n", cl)
		}
		if snapshot != "" {
			sb.WriteString(snapshot)
		}
		t.Fatalf("an end failed:\n%s", sb.String())
	}
	if c.check != nil {
		c.check(t, srv, clis)
	} else {
		if diff := cmp.Diff(c.srvOut, srv.Lines()); diff != "" {
			t.Errorf("server's stdout (-want +got):\n%s\n%v", diff, srv)
		}
		for i, cl := range clis {
			if diff := cmp.Diff(c.cliOut[i], cl.Lines()); diff != "" {
				t.Errorf("client %d's stdout (-want +got):\n%s\n%v", i, diff, cl)
			}
		}
	}
	if cell.srv[0] == "go" && srv.Stderr.String() != c.srvErr {
		t.Errorf("server's stderr = %q, want %q", srv.Stderr.String(), c.srvErr)
	}
	for i, cl := range clis {
		if cell.cli[i] == "go" && cl.Stderr.String() != c.cliErr {
			t.Errorf("client %d's stderr = %q, want %q", i, cl.Stderr.String(), c.cliErr)
		}
	}
}

// snapshotIfSlow runs wait; on iWARP, when wait has not returned 8 s in,
// it returns what the kernel shows of the connections of port then: siw
// gives a client 10 s for the server's MPA reply and then ends it in
// UNREACHABLE with nothing to say why (docs/kernels.md §9), so a failure
// keeps the TCP sockets (a request nobody read shows as rx bytes) and the
// rdma_cm IDs of that port while the client still waits.
func (b *rpxBed) snapshotIfSlow(port int, wait func()) string {
	if !b.iwarp {
		wait()
		return ""
	}
	done := make(chan struct{})
	go func() { wait(); close(done) }()
	select {
	case <-done:
		return ""
	case <-time.After(8 * time.Second):
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "8 s in, TCP sockets of port %d:\n", port)
	for _, l := range testutil.TCPSockets() {
		if strings.Contains(l, fmt.Sprintf(":%d ", port)) {
			fmt.Fprintf(&sb, "  %s\n", l)
		}
	}
	if b.rdma != "" {
		out, err := exec.Command(b.rdma, "res", "show", "cm_id").CombinedOutput()
		fmt.Fprintf(&sb, "rdma res show cm_id (%v):\n%s", err, out)
	}
	<-done
	return sb.String()
}

func rpxPingLines(start, exchanges int, sent, received string) []string {
	var l []string
	for v := start; v < start+exchanges; v++ {
		l = append(l, fmt.Sprintf(sent, v), fmt.Sprintf(received, v+1))
	}
	return l
}

func rpxServerPingLines(start, exchanges int, received, sent string) []string {
	var l []string
	for v := start; v < start+exchanges; v++ {
		l = append(l, fmt.Sprintf(received, v), fmt.Sprintf(sent, v+1))
	}
	return l
}

var (
	rpxHelloClient = []string{"Next value: Hello world!", "translating...", "Translation: ¡Hola Mundo!"}
	rpxNewValue    = []string{"New value: Hello world!"}
)

// rpxCheck06 checks 06: the server met every client, whatever the order.
func rpxCheck06(names ...string) func(t *testing.T, srv *proc.Proc, clis []*proc.Proc) {
	return func(t *testing.T, srv *proc.Proc, clis []*proc.Proc) {
		lines := srv.Lines()
		if len(lines) == 0 || lines[0] != "Today I have got in touch with:" {
			t.Fatalf("server's stdout:\n%v", srv)
		}
		var want []string
		for i, n := range names {
			want = append(want, "- "+n)
			if diff := cmp.Diff([]string{"My names is: " + n}, clis[i].Lines()); diff != "" {
				t.Errorf("client %d (-want +got):\n%s", i, diff)
			}
		}
		got := slices.Clone(lines[1:])
		slices.Sort(got)
		slices.Sort(want)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("server met (-want +got):\n%s\n%v", diff, srv)
		}
		if !strings.Contains(srv.Stderr.String(), "Server timed out.") {
			t.Errorf("server's stderr lacks the time-out:\n%v", srv)
		}
	}
}

var rpx13Line = regexp.MustCompile(`^\[server\] value (received|sent): (\d+) from the connection \[qp#(\d+)\]$`)

// rpxCheck13 checks 13: the server took the clients, then played with
// each on its own QP; each client (starting at starts[i]) saw its own
// values.
func rpxCheck13(rounds int, starts ...int) func(t *testing.T, srv *proc.Proc, clis []*proc.Proc) {
	return func(t *testing.T, srv *proc.Proc, clis []*proc.Proc) {
		lines := srv.Lines()
		var head []string
		for i := range starts {
			head = append(head, fmt.Sprintf("The client #%d has been connected.", i+1))
		}
		head = append(head, "Server ended listening.")
		if len(lines) < len(head) || !slices.Equal(lines[:len(head)], head) {
			t.Fatalf("server's stdout does not start with %q:\n%v", head, srv)
		}
		byQP := map[string][]string{}
		var qps []string
		for _, l := range lines[len(head):] {
			m := rpx13Line.FindStringSubmatch(l)
			if m == nil {
				t.Fatalf("server's line %q:\n%v", l, srv)
			}
			if byQP[m[3]] == nil {
				qps = append(qps, m[3])
			}
			byQP[m[3]] = append(byQP[m[3]], m[1]+" "+m[2])
		}
		if len(qps) != len(starts) {
			t.Fatalf("server played on %d QPs, want %d:\n%v", len(qps), len(starts), srv)
		}
		var gotSeqs, wantSeqs []string
		for _, qp := range qps {
			gotSeqs = append(gotSeqs, strings.Join(byQP[qp], ", "))
		}
		for i, s := range starts {
			wantSeqs = append(wantSeqs, strings.Join(rpxServerPingLines(s, rounds, "received %d", "sent %d"), ", "))
			pid := clis[i].Cmd.Process.Pid
			want := rpxPingLines(s, rounds, fmt.Sprintf("[client #%d] value sent: %%d", pid),
				fmt.Sprintf("[client #%d] value received: %%d", pid))
			if diff := cmp.Diff(want, clis[i].Lines()); diff != "" {
				t.Errorf("client %d (-want +got):\n%s", i, diff)
			}
		}
		slices.Sort(gotSeqs)
		slices.Sort(wantSeqs)
		if diff := cmp.Diff(wantSeqs, gotSeqs); diff != "" {
			t.Errorf("server's exchanges per QP (-want +got):\n%s\n%v", diff, srv)
		}
	}
}

func rpxCases() []*rpxCase {
	one := [][]string{nil}
	ping := func(example, label string, srvArgs []string, sent, received, srvReceived, srvSent string, start, arg, exchanges int) *rpxCase {
		return &rpxCase{example: example, label: label, srvArgs: srvArgs,
			clients: [][]string{{strconv.Itoa(start), strconv.Itoa(arg)}},
			cliOut:  [][]string{rpxPingLines(start, exchanges, sent, received)},
			srvOut:  rpxServerPingLines(start, exchanges, srvReceived, srvSent)}
	}
	noPMem := noPMem
	return []*rpxCase{
		{example: "01-connection", clients: one,
			srvOut: []string{"Received a message: Hello server!"},
			cliOut: [][]string{{"Received a message: Hello client!"}}},
		{example: "02-read-to-volatile", clients: one,
			cliOut: [][]string{{"Read a message: Hello client!"}}},
		{example: "03-read-to-persistent", clients: one, srvOut: rpxNewValue,
			cliOut: [][]string{rpxHelloClient}, srvErr: noPMem, cliErr: noPMem},
		{example: "04-write-to-persistent", clients: one, srvOut: rpxNewValue,
			cliOut: [][]string{rpxHelloClient}, srvErr: noPMem, cliErr: noPMem},
		{example: "05-flush-to-persistent", clients: one, srvOut: rpxNewValue,
			cliOut: [][]string{{"Next value: Hello world!",
				"RPMA_FLUSH_TYPE_PERSISTENT is NOT supported, RPMA_FLUSH_TYPE_VISIBILITY is used instead",
				"translating...", "Translation: ¡Hola Mundo!"}},
			srvErr: noPMem, cliErr: noPMem},
		{example: "06-multiple-connections", clients: [][]string{{"1"}, {"2"}, {"3"}},
			check: rpxCheck06("Andy", "Kacper", "Oksana"), srvErr: "Server timed out.\n"},
		{example: "06scch-multiple-connections", clients: [][]string{{"3"}, {"1"}, {"2"}},
			check: rpxCheck06("Oksana", "Andy", "Kacper"), srvErr: "Server timed out.\n"},
		{example: "07-atomic-write", clients: [][]string{{"alpha", "beta", "gamma"}},
			srvOut: []string{"alpha", "beta", "gamma"}, cliOut: [][]string{{"used value: 16"}}, srvErr: noPMem},
		ping("08-messages-ping-pong", "", nil, "Value sent: %d", "Value received: %d",
			"Value received: %d", "Value sent: %d", 7, 4, 3),
		ping("08srq-simple-messages-ping-pong-with-srq", "srq-rcq", nil, "Value sent: %d", "Value received: %d",
			"Value received: %d", "Value sent: %d", 7, 3, 3),
		ping("08srq-simple-messages-ping-pong-with-srq", "main-cq", []string{"m"}, "Value sent: %d", "Value received: %d",
			"Value received: %d", "Value sent: %d", 100, 2, 2),
		ping("08srq-simple-messages-ping-pong-with-srq", "conn-rcq", []string{"r"}, "Value sent: %d", "Value received: %d",
			"Value received: %d", "Value sent: %d", 41, 2, 2),
		{example: "09-flush-to-persistent-GPSPM", clients: one,
			srvOut: []string{"Flush request received: {offset: 0x0, length: 0x400, op_context: 0xF01D}",
				"At this point, persist function should be called if persistent memory will be in use",
				"New value: Hello world!"},
			cliOut: [][]string{rpxHelloClient}, srvErr: noPMem, cliErr: noPMem},
		{example: "09scch-flush-to-persistent-GPSPM", clients: one,
			srvOut: []string{"Flush request received: {offset: 0x0, length: 0x400, op_context: 0xF01D}",
				"At this point, persistent function should be called if persistent memory will be in use",
				"New value: Hello world!"},
			cliOut: [][]string{rpxHelloClient}, srvErr: noPMem, cliErr: noPMem},
		{example: "10-send-with-imm", label: "word", clients: [][]string{{"1234", "hello"}},
			srvOut: []string{"Received value 'hello' with immediate data '1234'"},
			cliOut: [][]string{{"Sending value 'hello' with immediate data '1234'"}}},
		{example: "10-send-with-imm", label: "no-word", clients: [][]string{{"4294967295"}},
			srvOut: []string{"Received value '' with immediate data '4294967295'"},
			cliOut: [][]string{{"Sending immediate data '4294967295'"}}},
		{example: "11-write-with-imm", clients: [][]string{{"4321"}},
			srvOut: []string{"The value '4321' was written together with immediate data '4321'"},
			cliOut: [][]string{{"Writing value '4321' with immediate data '4321'"}}},
		ping("12-receive-completion-queue", "", nil, "CLIENT: Value sent: %d", "CLIENT: Value received: %d",
			"SERVER: Value received: %d", "SERVER: Value sent: %d", 5, 4, 3),
		ping("12scch-receive-completion-queue", "", nil, "CLIENT: Value sent: %d", "CLIENT: Value received: %d",
			"SERVER: Value received: %d", "SERVER: Value sent: %d", 5, 4, 3),
		{example: "13-messages-ping-pong-with-srq", srvArgs: []string{"6"},
			clients: [][]string{{"10", "3"}, {"20", "3"}}, check: rpxCheck13(3, 10, 20)},
	}
}

// rpxCells are the cells of a case with n clients: Go ↔ Go, Go server ↔ C
// clients, C server ↔ Go clients (and a mixed one for 13).
func rpxCells(c *rpxCase) []rpxCell {
	all := func(impl string) []string { return slices.Repeat([]string{impl}, len(c.clients)) }
	cells := []rpxCell{{[]string{"go"}, all("go")}, {[]string{"go"}, all("c")}, {[]string{"c"}, all("go")}}
	if len(c.clients) == 2 {
		cells = append(cells, rpxCell{[]string{"go"}, []string{"c", "go"}})
	}
	return cells
}

// Examples runs every case of example (the example this test binary is)
// in every cell: TestRPMAExamples/EXAMPLE[/LABEL]/CELL, and the 06
// examples' cells at the same time as TestRPMAExamples/06/EXAMPLE/CELL.
func Examples(t *testing.T, example string) {
	b := newRPXBed(t, example, true)
	start := time.Now()
	defer func() { t.Logf("the examples took %v", time.Since(start).Round(time.Second)) }()
	var slow []*rpxCase
	for _, c := range rpxCases() {
		if c.example != example {
			continue
		}
		if c.check != nil && strings.HasPrefix(c.example, "06") {
			slow = append(slow, c) // 15 s each: run below, at the same time
			continue
		}
		name := c.example
		if c.label != "" {
			name += "/" + c.label
		}
		t.Run(name, func(t *testing.T) {
			// 10 and 11 exchange immediate data, which iWARP cannot carry.
			if strings.Contains(c.example, "with-imm") {
				testutil.SkipUnlessCap(t, testutil.Device(t).NodeType.Transport() != verbs.TransportIWARP,
					"immediate data (transport iWARP)")
			}
			for _, cell := range rpxCells(c) {
				t.Run(cell.String(), func(t *testing.T) { b.run(t, c, cell) })
			}
		})
	}
	// The 06 servers end after 15 s without events; their cells wait
	// together.
	t.Run("06", func(t *testing.T) {
		for _, c := range slow {
			for _, cell := range rpxCells(c) {
				t.Run(c.example+"/"+cell.String(), func(t *testing.T) {
					t.Parallel()
					b.run(t, c, cell)
				})
			}
		}
	})
}

// A client finds no server. What it meets depends on the transport the
// device reports: on InfiniBand and RoCE the request reaches the remote CM,
// which rejects it (a REJECTED event; 08 fails on it, 01 retries until the
// server comes); on iWARP the TCP connection is made inside CONNECT, which
// fails with ECONNREFUSED, so 08 and 01 alike fail in
// rpma_conn_req_connect (01's retry loop covers REJECTED only). The C
// peers, on real librpma, are the oracle: each Go client must end with the
// C one's exit status and report the same failure.
//
// Rejected runs the part of that test that is example's: 08's client
// without a server; 01's client without a server on iWARP, and 01's
// retries until the server comes on the other transports.
func Rejected(t *testing.T, example string) {
	b := newRPXBed(t, example, true)
	iwarp := testutil.Device(t).NodeType.Transport() == verbs.TransportIWARP
	var clients [][]string
	switch {
	case example == "08-messages-ping-pong":
		clients = [][]string{{"08-messages-ping-pong", "1", "2"}}
	case example == "01-connection" && iwarp:
		clients = [][]string{{"01-connection"}}
	case example != "01-connection":
		t.Fatalf("no Rejected test for %s", example)
	}
	for _, cl := range clients {
		port := rpxPort()
		c := b.start(t, "c", cl[0], "client", port, cl[1:]...)
		c.Wait()
		g := b.start(t, "go", cl[0], "client", port, cl[1:]...)
		g.Wait()
		t.Logf("C client without a server: %v", c)
		if c.Status() == 0 || c.Stdout.String() != "" || g.Status() != c.Status() || g.Stdout.String() != "" {
			t.Errorf("%s: the Go client's exit status %d (stdout %q), the C client's %d (stdout %q); want the same failure\nC: %v\nGo: %v",
				cl[0], g.Status(), g.Stdout.String(), c.Status(), c.Stdout.String(), c, g)
			continue
		}
		if !iwarp {
			// The example's line, first on the C client's stderr (then
			// the C peer's own report of the failed call), is the Go
			// client's whole stderr.
			const want = "rpma_conn_next_event returned an unexpected event: Connection rejected\n"
			if !strings.HasPrefix(c.Stderr.String(), want) || g.Stderr.String() != want {
				t.Errorf("%s: want stderr %q from both\nC: %v\nGo: %v", cl[0], want, c, g)
			}
			continue
		}
		// librpma logs the errno of rdma_connect; the example reports
		// the call that failed with rpma_err_2str.
		errno := regexp.MustCompile(`rdma_connect\(\) failed: (.+)\n`).FindStringSubmatch(c.Stderr.String())
		rpmaErr := regexp.MustCompile(`rpmaex: rpma_conn_req_connect\(.*\): (.+) \(-\d+\)\n`).FindStringSubmatch(c.Stderr.String())
		if errno == nil || rpmaErr == nil || !strings.EqualFold(errno[1], syscall.ECONNREFUSED.Error()) {
			t.Errorf("%s: the C client did not fail in rpma_conn_req_connect with ECONNREFUSED: %v", cl[0], c)
			continue
		}
		want := fmt.Sprintf("%s client: rpma_conn_req_connect: %s: ", cl[0], rpmaErr[1])
		ge := g.Stderr.String()
		if !strings.HasPrefix(ge, want) || !strings.HasSuffix(strings.ToLower(ge), ": "+strings.ToLower(errno[1])+"\n") ||
			strings.Count(ge, "\n") != 1 {
			t.Errorf("%s: the Go client's stderr %q; want one line %q...\": %s\", as the C client's\nC: %v\nGo: %v",
				cl[0], ge, want, strings.ToLower(errno[1]), c, g)
		}
	}
	if iwarp || example != "01-connection" {
		return // 01 does not retry on iWARP: nothing comes back as REJECTED
	}

	port := rpxPort()
	cli := b.start(t, "go", "01-connection", "client", port)
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(cli.Stderr.String(), "Retrying...") {
		if cli.Exited() || time.Now().After(deadline) {
			t.Fatalf("01's client does not retry: %v", cli)
		}
		time.Sleep(50 * time.Millisecond)
	}
	srv := b.start(t, "go", "01-connection", "server", port)
	if err := srv.Wait(); err != nil {
		t.Fatalf("server: %v\nclient: %v", srv, cli)
	}
	if err := cli.Wait(); err != nil {
		t.Fatalf("client: %v\nserver: %v", cli, srv)
	}
	if srv.Stdout.String() != "Received a message: Hello server!\n" || srv.Stderr.String() != "" {
		t.Errorf("server: %v", srv)
	}
	if cli.Stdout.String() != "Received a message: Hello client!\n" || !regexp.MustCompile(`^(Retrying...\n)+$`).MatchString(cli.Stderr.String()) {
		t.Errorf("client: %v", cli)
	}
}

// LibrpmaEnding runs example's Go server (a shared-channel one: its
// waits are rpma_conn_wait's) against the C client ending as librpma's own
// example does (RPMAEX_LIBRPMA_END in rpma/testdata): its last message
// ("I'm done") unsignaled, then a disconnect at once. On rxe of kernels
// that send from a workqueue (6.12) that disconnect can flush the message
// before it leaves (docs/kernels.md, section 1), and the Go server waited
// for it until killed. The server must end every run: well when the
// message came, else with the disconnect ending its wait (ErrNoCompletion,
// the receive CQ empty: the message never came) or, where the peer's
// close flushes the server's receive (iWARP), with that flushed receive; a
// wait that ran out of the example's 2 minutes fails the test. runs runs
// are made; how many lost the message is logged.
func LibrpmaEnding(t *testing.T, example string, runs int) {
	b := newRPXBed(t, example, true)
	b.cEnv = append(os.Environ(), "RPMAEX_LIBRPMA_END=1")
	var c *rpxCase
	for _, rc := range rpxCases() {
		if rc.example == example && rc.label == "" {
			c = rc
		}
	}
	if c == nil || len(c.clients) != 1 || c.srvOut == nil {
		t.Fatalf("no ping-pong case for %s", example)
	}
	// The wait's failure, as common.Env.Fail reports it: the server's
	// whole stderr when the message was lost.
	lostRE := regexp.MustCompile(`^` + regexp.QuoteMeta(example) + ` server: rpma_conn_wait: No next completion available: ` +
		`rpma: the connection is over: RDMA_CM_EVENT_DISCONNECTED \((the CQ|the CQ holds \d+ completions, \d+ events read, the RCQ) holds 0 completions, \d+ events read\)\n$`)
	lost := 0
	for run := 0; run < runs; {
		port := rpxPort()
		srv := b.start(t, "go", example, "server", port)
		b.waitListening(t, srv, port)
		cli, err := b.runClient(t, srv, "c", example, port, c.clients[0]...)
		srvErr := srv.Wait()
		if err != nil && cCompletionOrder(c, rpxCell{[]string{"go"}, []string{"c"}}, srv, []*proc.Proc{cli}) != "" {
			t.Logf("run %d: the C client's completion order (docs/kernels.md); again", run)
			continue
		}
		if err != nil {
			t.Fatalf("run %d: the C client failed: %v\nserver: %v", run, cli, srv)
		}
		if diff := cmp.Diff(c.srvOut, srv.Lines()); diff != "" {
			t.Fatalf("run %d: server's stdout (-want +got):\n%s\n%v", run, diff, srv)
		}
		switch {
		case srvErr == nil && srv.Stderr.String() == "":
		case srvErr != nil && lostRE.MatchString(srv.Stderr.String()):
			lost++
		case srvErr != nil && srv.Stderr.String() == "rpma_recv() failed: Work Request Flushed Error\n":
			// iWARP: the peer's close moved the server's QP to the
			// error state, which flushed the receive posted for the
			// message: the end came as a completion.
			lost++
		default:
			t.Fatalf("run %d: the server neither ended well nor reported the disconnect that ended its wait: %v\nclient: %v", run, srv, cli)
		}
		run++
	}
	t.Logf("%d of %d runs lost the C client's last message; the server ended every run", lost, runs)
}
