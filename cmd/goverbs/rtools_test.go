package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/internal/testutil/proc"
	"github.com/goverbs/goverbs/internal/tools/rscommon"
	"github.com/goverbs/goverbs/verbs"
)

// ------------------------------------------------- rstream, riostream --

// The C tools' output helpers, checked against values C prints.
func TestRsSizeStrings(t *testing.T) {
	for _, c := range []struct {
		n         int64
		size, cnt string
	}{
		{64, "64", "64"}, {1000, "1000", "1k"}, {1536, "1.5k", "1k"}, {4097, "4k", "4k"},
		{100003, "97k", "100k"}, {3 << 20, "3m", "3m"}, {6 << 20, "6m", "6m"}, {1 << 30, "1g", "1b"},
	} {
		if s, n := rscommon.SizeStr(c.n), rscommon.CntStr(c.n); s != c.size || n != c.cnt {
			t.Errorf("%d: size_str %q cnt_str %q, want %q %q", c.n, s, n, c.size, c.cnt)
		}
	}
	if len(rscommon.Sizes) != 33 {
		t.Errorf("%d sizes, want rstream.c's 33", len(rscommon.Sizes))
	}
	got := rscommon.Test{Name: "custom", Size: 1000, Count: 10, Iterations: 2}.Perf(2 * time.Millisecond)
	if want := "custom    1000    10      2       39k         0.00s      0.16      50.00\n"; got != want {
		t.Errorf("result line %q, want %q", got, want)
	}
}

// The -T words and letters, as set_test_opt takes them, and a bad one.
func TestRsArgs(t *testing.T) {
	var o rscommon.Opts
	var out, errw bytes.Buffer
	st := rscommon.Parse(&o, []string{"-s", "h", "-T", "VERIFY", "-T", "blocking", "-Ta", "-S", "all", "-B", "8192"},
		"s:b:f:B:i:I:C:S:p:k:T:", "sabfnrv", []string{"socket", "async", "block", "nonblock", "resolve", "verify", "fork"}, "usage %s\n", &out, &errw)
	if st != -1 || !o.Verify || !o.Blocking || !o.Async || o.SizeOption != 1 || o.Custom || o.Buffer != 8192 || o.Dst != "h" || !o.UseRS {
		t.Errorf("parsed %+v, status %d", o, st)
	}
	st = rscommon.Parse(&o, []string{"-T", "s"}, "s:T:", "abnv", []string{"async", "block", "nonblock", "verify"}, "usage %s\n", &out, &errw)
	if st != 1 || !strings.Contains(out.String(), "usage goverbs") {
		t.Errorf("riostream -T s: status %d, output %q", st, out.String())
	}
}

// rsImplPairs are the pairings of the interop tests: server, client.
var rsImplPairs = [][2]string{{"go", "c"}, {"c", "go"}, {"go", "go"}}

// rsRun runs a server of tool and then a client, and waits for both. A C
// server sets its options on the listening rsocket after rlisten, while
// librdmacm's listen thread may already accept: the client waits a
// little after the listen shows.
//
// On iWARP two of siw's failures run the pair again with a new server,
// logged, up to proc.MaxRuns times (docs/providers.md, siw: who sends
// first). A client whose rconnect failed with EINVAL (CONNECT_ERROR -22):
// C's passive rsocket sends an SGL update before the client's first
// message, and siw fails the connect when it arrives before the MPA reply
// is read (seen C against C, and with the Go client, which prints C's
// "rconnect: Invalid argument" since rsocket.Dial's error carries
// rconnect's errno). And the stall the watch sees (proc.WatchSiw): the
// client's first messages left unread in the server's socket, which
// siw_accept lets happen when they arrive before it hands the socket to
// the QP; both ends then wait for each other until the guard kills the
// server, 180 s later (seen with riostream's C server and Go client; the
// watch then found 200 bytes unread: the Go client's iomap SGL and sync
// message).
func rsRun(t *testing.T, tool string, port int, impls [2]string, srvArgs, cliArgs []string) (server, client *cmProc) {
	t.Helper()
	iwarp := testutil.Device(t).NodeType.Transport() == verbs.TransportIWARP
	for try := 1; ; try++ {
		server = rsStart(t, impls[0], tool, srvArgs...)
		cmWaitListen(t, server, "TCP", port)
		if impls[0] == "c" {
			time.Sleep(300 * time.Millisecond)
		}
		var w *proc.StallWatch
		if iwarp {
			w = proc.WatchSiw(port, server, nil)
		}
		client = rsStart(t, impls[1], tool, cliArgs...)
		w.Add(client)
		var failure string
		if err := client.Wait(); err != nil {
			failure = fmt.Sprintf("client failed: %v\n\nserver %v", client, server)
		} else if err := server.Wait(); err != nil {
			failure = proc.ServerFailed(server, client)
		}
		w.Stop()
		why := w.Stalled()
		if failure == "" {
			return server, client
		}
		if why == "" && iwarp && strings.Contains(client.Stderr.String(), "rconnect: Invalid argument") {
			why = "the client's rconnect failed with EINVAL (CONNECT_ERROR -22)"
		}
		server.Cmd.Process.Kill()
		server.Wait()
		siwRunAgain(t, try, why, failure)
	}
}

// rsGuard is how long rsStart lets a program run: cmStart's guard, unless
// a test that runs longer sets it (and sets it back).
var rsGuard = cmGuard

// rsStart is cmStart with rsGuard. The C tools run with line-buffered
// stdout: when the guard kills one, its output says how far it got (its
// result row comes after its transfers, before its rshutdown), where a
// fully buffered stdout dies with the process (seen: an rstream client on
// siw killed with nothing printed, its Go server done).
func rsStart(t *testing.T, impl, tool string, args ...string) *cmProc {
	t.Helper()
	return cmStartGuard(t, cmLineBuffered(impl), tool, rsGuard, args...)
}

// rsCheckRows checks p's output: the header, then one result line per
// test, with the columns that do not depend on speed as C prints them.
func rsCheckRows(t *testing.T, p *cmProc, tests []rscommon.Test) {
	t.Helper()
	lines := p.Lines()
	t.Logf("%s:\n%s", p.Name, p.Stdout.String())
	if len(lines) != 1+len(tests) || lines[0]+"\n" != rscommon.Header {
		t.Fatalf("%s printed %d lines, want the header and %d results:\n%s", p.Name, len(lines), len(tests), p.Stdout.String())
	}
	for i, tc := range tests {
		f := strings.Fields(lines[1+i])
		want := []string{tc.Name, rscommon.SizeStr(int64(tc.Size)), rscommon.CntStr(int64(tc.Count)), rscommon.CntStr(int64(tc.Iterations)),
			rscommon.SizeStr(int64(tc.Iterations) * int64(tc.Count) * int64(tc.Size) * 2)}
		if len(f) != 8 || strings.Join(f[:5], " ") != strings.Join(want, " ") || !strings.HasSuffix(f[5], "s") {
			t.Errorf("%s: result line %q, want it to begin %q", p.Name, lines[1+i], want)
		}
	}
}

type rsCase struct {
	name string
	args []string
}

// rstream and riostream custom tests with -T v, both pairings: sizes that
// are not powers of two, transfers larger than the receiving buffer
// (-B 16384: 32 KiB buffers), blocking, non-blocking and async calls.
var rstreamCases = []rsCase{
	{"64B-blocking", []string{"-S", "64", "-C", "300", "-I", "2", "-T", "b"}},
	{"1000B-nonblocking", []string{"-S", "1000", "-C", "50", "-I", "3"}},
	{"4097B-async", []string{"-S", "4097", "-C", "20", "-I", "2", "-T", "a", "-B", "8192"}},
	{"100003B-beyond-buffers", []string{"-S", "100003", "-C", "6", "-I", "2", "-T", "b", "-B", "16384"}},
	{"65537B-beyond-buffers-nonblocking", []string{"-S", "65537", "-C", "5", "-I", "2", "-B", "16384"}},
	{"1.5MiB", []string{"-S", strconv.Itoa(3 << 19), "-C", "2", "-I", "1", "-T", "b"}},
}

func rsCustom(args []string) rscommon.Test {
	tc := rscommon.Test{Name: "custom", Size: 1000, Count: 1000, Iterations: 1}
	for i := 0; i+1 < len(args); i++ {
		n, _ := strconv.Atoi(args[i+1])
		switch args[i] {
		case "-S":
			tc.Size = n
		case "-C":
			tc.Count = n
		case "-I":
			tc.Iterations = n
		}
	}
	return tc
}

// rsCClient turns a C client's -T a into -T b. rdma-core 44's rstream
// client with -T a fails (exit 16, do_poll's POLLHUP) when the server's
// disconnect reaches it with the last data still unread: rpoll reports
// POLLIN|POLLHUP and do_poll takes the HUP for an error. C against C did
// so in 2 runs of 4 (rxe, 6.12), the C client against our server too. The
// async Go client and server are tested against C's blocking client and
// C's async server.
func rsCClient(args []string) []string {
	out := append([]string(nil), args...)
	for i := range out {
		if i > 0 && out[i-1] == "-T" && out[i] == "a" {
			out[i] = "b"
		}
	}
	return out
}

func rsInterop(t *testing.T, tool string, cases []rsCase) {
	testutil.Device(t)
	addr := testutil.Addr(t)
	testutil.LookPath(t, tool)
	for _, c := range cases {
		for _, impls := range rsImplPairs {
			t.Run(fmt.Sprintf("%s/%s-server/%s-client", c.name, impls[0], impls[1]), func(t *testing.T) {
				port := cmPort()
				common := append([]string{"-p", strconv.Itoa(port), "-T", "v"}, c.args...)
				cliArgs := append([]string{"-s", addr}, common...)
				if impls[1] == "c" {
					cliArgs = rsCClient(cliArgs)
				}
				server, client := rsRun(t, tool, port, impls, append([]string{"-b", addr}, common...), cliArgs)
				want := []rscommon.Test{rsCustom(c.args)}
				rsCheckRows(t, server, want)
				rsCheckRows(t, client, want)
			})
		}
	}
}

func TestRstreamInterop(t *testing.T) { rsInterop(t, "rstream", rstreamCases) }

func TestRiostreamInterop(t *testing.T) {
	rsInterop(t, "riostream", []rsCase{
		{"1000B-blocking", []string{"-S", "1000", "-C", "5", "-I", "3", "-T", "b"}},
		{"100003B-small-buffers-nonblocking", []string{"-S", "100003", "-C", "3", "-I", "2", "-B", "8192"}},
		{"70000B-async", []string{"-S", "70000", "-C", "4", "-I", "2", "-T", "a"}},
	})
}

// The default run (no -S, -C or -I): the latency tests on one connection
// and the bandwidth tests on a second, -T b and -T v, both pairings. It
// cannot be made shorter (any of -S, -C, -I makes the run custom), and on
// rxe in the test VM it lasts longer than the 3 minutes cmStart (cmGuard)
// allows a program (rstream, 6.12: 9 minutes Go server against C client,
// 3.5 minutes C server against Go client, 100000 64-byte round trips
// most of it): it runs only when GOVERBS_RS_DEFAULT_RUN=1 asks for it,
// with 20 minutes per program.
func rsDefault(t *testing.T, tool string, extra ...string) {
	testutil.SkipUnlessOptIn(t, "GOVERBS_RS_DEFAULT_RUN") // the default run lasts many minutes on rxe
	rsGuard = 20 * time.Minute
	defer func() { rsGuard = cmGuard }()
	testutil.Device(t)
	addr := testutil.Addr(t)
	testutil.LookPath(t, tool)
	var want []rscommon.Test
	for _, s := range rscommon.Sizes {
		if s.Option == 0 {
			want = append(want, rscommon.Latency(s.Size))
		}
	}
	for _, s := range rscommon.Sizes {
		if s.Option == 0 {
			want = append(want, rscommon.Bandwidth(s.Size))
		}
	}
	for _, impls := range rsImplPairs[:2] {
		t.Run(impls[0]+"-server/"+impls[1]+"-client", func(t *testing.T) {
			port := cmPort()
			common := append([]string{"-p", strconv.Itoa(port), "-T", "v"}, extra...)
			server, client := rsRun(t, tool, port, impls, append([]string{"-b", addr}, common...), append([]string{"-s", addr}, common...))
			rsCheckRows(t, server, want)
			rsCheckRows(t, client, want)
		})
	}
}

func TestRstreamDefault(t *testing.T)   { rsDefault(t, "rstream", "-T", "b") }
func TestRiostreamDefault(t *testing.T) { rsDefault(t, "riostream", "-T", "b") }

// -T s: the same test over kernel TCP (the net package in Go), against C
// rstream's sockets mode.
func TestRstreamSockets(t *testing.T) {
	testutil.Device(t)
	addr := testutil.Addr(t)
	testutil.LookPath(t, "rstream")
	for _, impls := range rsImplPairs[:2] {
		t.Run(impls[0]+"-server/"+impls[1]+"-client", func(t *testing.T) {
			port := cmPort()
			args := []string{"-p", strconv.Itoa(port), "-T", "s", "-T", "v", "-S", "10007", "-C", "20", "-I", "2"}
			server := cmStart(t, impls[0], "rstream", append([]string{"-b", addr}, args...)...)
			for impls[0] == "go" && !strings.Contains(server.Stdout.String(), "name") && !server.Exited() {
				time.Sleep(20 * time.Millisecond) // the header follows the listen
			}
			var client *cmProc
			// C's stdout is buffered and no rdma_cm ID shows a TCP
			// listen: retry while refused (C's non-blocking client
			// says so as "rpoll: Operation now in progress").
			for try := 0; ; try++ {
				client = cmStart(t, impls[1], "rstream", append([]string{"-s", addr}, args...)...)
				err := client.Wait()
				if err == nil {
					break
				}
				if e := client.Stderr.String(); try > 50 || !strings.Contains(e, "refused") && !strings.Contains(e, "rpoll: Operation now in progress") {
					t.Fatalf("client failed: %v\n\nserver %v", client, server)
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err := server.Wait(); err != nil {
				t.Fatalf("server failed: %v", server)
			}
			want := []rscommon.Test{{Name: "custom", Size: 10007, Count: 20, Iterations: 2}}
			rsCheckRows(t, server, want)
			rsCheckRows(t, client, want)
		})
	}
}

// --------------------------------------------------------------- rcopy --

// rcopy both ways: a file whose size is a multiple of no buffer size
// (3 MiB + 12345 bytes, random), copied and compared byte for byte; the
// lines both ends print are C's.
func TestRcopyInterop(t *testing.T) {
	testutil.Device(t)
	addr := testutil.Addr(t)
	testutil.LookPath(t, "rcopy")
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	data := make([]byte, 3<<20+12345)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	if err := os.WriteFile(src, data, 0o640); err != nil {
		t.Fatal(err)
	}
	for _, impls := range rsImplPairs {
		t.Run(impls[0]+"-server/"+impls[1]+"-client", func(t *testing.T) {
			port := cmPort()
			dst := filepath.Join(dir, "dst-"+impls[0]+"-"+impls[1])
			server := cmStart(t, impls[0], "rcopy", "-p", strconv.Itoa(port))
			cmWaitListen(t, server, "TCP", port)
			client := cmStart(t, impls[1], "rcopy", src, addr+":"+dst, "-p", strconv.Itoa(port))
			if err := client.Wait(); err != nil {
				t.Fatalf("client failed: %v\n\nserver %v", client, server)
			}
			// The server serves clients until it is killed; it has
			// answered CLOSE, and prints "done" right after, then
			// "waiting for connection..." once the client's
			// disconnect has reached it and it has closed the
			// connection: killing it at "done" raced that (seen on
			// rxe, 2 runs in 5, go-server/c-client).
			deadline := time.Now().Add(30 * time.Second)
			for !strings.HasSuffix(server.Stdout.String(), "done\nwaiting for connection...") && time.Now().Before(deadline) && !server.Exited() {
				time.Sleep(20 * time.Millisecond)
			}
			server.Cmd.Process.Kill()
			server.Wait()
			got, err := os.ReadFile(dst)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				t.Fatalf("%s has %d bytes, not the %d of the source, or others", dst, len(got), len(data))
			}
			if st, err := os.Stat(dst); err != nil || st.Mode().Perm() != 0o640&^umask() {
				t.Errorf("destination mode %v (%v), want 0640 less the umask", st.Mode(), err)
			}
			cl := client.Lines()
			if len(cl) != 2 || cl[0] != "opening...transferring...closing...done" ||
				!strings.HasPrefix(cl[1], fmt.Sprintf("%d bytes in ", len(data))) || !strings.HasSuffix(cl[1], " Gb/sec") {
				t.Errorf("client printed %q", client.Stdout.String())
			}
			wantSrv := fmt.Sprintf("waiting for connection...client: %s\nopening: %s, transferring...%d bytes...closing...done\nwaiting for connection...",
				addr, dst, len(data))
			if s := server.Stdout.String(); s != wantSrv {
				t.Errorf("server printed %q, want %q", s, wantSrv)
			}
		})
	}
}

func umask() os.FileMode {
	m := syscallUmask(0)
	syscallUmask(m)
	return os.FileMode(m)
}

// ----------------------------------------------------------------- siw --

// rsockets on an iWARP device (siw), where librdmacm and the rsocket
// package send every message as an RDMA WRITE and a 4-byte SEND of its
// message word (RS_OPT_MSG_SEND): rstream C against C first, as the
// baseline, then the Go tools against C's both ways and against each
// other (rsInterop's cases run on siw too).
func TestRsIWARP(t *testing.T) {
	if testutil.Device(t).NodeType.Transport() != verbs.TransportIWARP {
		testutil.SkipOptIn(t, "an iWARP test: it runs on the siw bed (make test-siw)")
	}
	addr := testutil.Addr(t)
	testutil.LookPath(t, "rstream")
	for _, impls := range [][2]string{{"c", "c"}, {"c", "go"}, {"go", "c"}, {"go", "go"}} {
		t.Run(impls[0]+"-server/"+impls[1]+"-client", func(t *testing.T) {
			port := cmPort()
			common := []string{"-p", strconv.Itoa(port), "-T", "v", "-T", "b", "-S", "4097", "-C", "20", "-I", "2"}
			server, client := rsRun(t, "rstream", port, impls, append([]string{"-b", addr}, common...), append([]string{"-s", addr}, common...))
			want := []rscommon.Test{rsCustom(common)}
			rsCheckRows(t, server, want)
			rsCheckRows(t, client, want)
		})
	}
}

func syscallUmask(m int) int { return syscall.Umask(m) }
