package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/internal/testutil/proc"
	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/verbs"
)

// envRunMain makes the test binary behave as the goverbs command, so tests
// can run our side of a ping-pong as a process of its own (pinned to a CPU,
// killed on a hang), like the C tool at the other end.
const envRunMain = "GOVERBS_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envRunMain) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// ---------------------------------------------------------- the test bed --

// ppBed is what a device ping-pong needs: the device, the GID index of the
// test address, the C tools and taskset.
type ppBed struct {
	dev     string
	gid     int
	addr    string
	mtu     int // active MTU of port 1, in bytes
	taskset string
	// lacks holds, per transport, what the device lacks to run it, as its
	// own answers say (see offers); events is false where completion
	// events never come (a model bug nothing the device reports reveals).
	lacks  map[string]lack
	events bool
	// udShared is false where UD works from one PD per GID only, so
	// never between the two ends of a ping-pong (a model bug too).
	udShared bool
}

// lack is the device's answer to a create call a transport needs
// (verbs.ErrNotCapable when it lacks it) and the capability it names.
type lack struct {
	err        error
	capability string
}

func newPPBed(t *testing.T) *ppBed {
	t.Helper()
	dev := testutil.Device(t)
	ctx, err := verbs.OpenDevice(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	// The ibv_*_pingpong tools connect QPs by modify with the exchanged
	// QPN and GID: not on iWARP.
	testutil.SkipUnlessModifyConnects(t, ctx)
	gid, _ := testutil.GIDIndex(t, ctx)
	port, err := ctx.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	b := &ppBed{dev: dev.Name, gid: gid, addr: testutil.Addr(t), mtu: port.ActiveMTU.Bytes(), lacks: map[string]lack{}}
	for _, typ := range []string{"uc", "ud"} {
		b.lacks[typ] = offers(t, ctx, typ)
	}
	// Both ends of -e sleep on events of a CQ armed for every completion.
	b.events = !testutil.HasModelBug(t, ctx, testutil.QemuPvrdmaArmDisarms)
	// The two ends of a UD ping-pong are two PDs sending to one GID.
	b.udShared = !testutil.HasModelBug(t, ctx, testutil.QemuPvrdmaAHCache)
	for _, typ := range []string{"rc", "uc", "ud", "srq"} {
		testutil.LookPath(t, "ibv_"+typ+"_pingpong")
	}
	if p, err := exec.LookPath("taskset"); err == nil {
		b.taskset = p
	} else {
		t.Logf("no taskset: the ends are not pinned (%v)", err)
	}
	return b
}

// offers asks the device for what a pingpong of transport typ creates
// beyond an RC QP: a UC QP (CREATE_QP), a UD QP and an address handle
// (verbs.PD.CreateAH). It returns the first refusal, verbs.ErrNotCapable
// where the device lacks it (qemu's pvrdma model: no UC).
func offers(t *testing.T, dev *verbs.Context, typ string) lack {
	t.Helper()
	pd, err := dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Close()
	c, err := cq.New(dev, cq.Options{CQE: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	qt := map[string]qp.Type{"uc": qp.UC, "ud": qp.UD}[typ]
	q, err := qp.New(pd, qp.Options{Type: qt, SendCQ: c, RecvCQ: c, Caps: qp.Caps{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return lack{err, strings.ToUpper(typ) + " QPs (CREATE_QP)"}
	}
	q.Close()
	if typ == "ud" {
		path := testutil.Path(t, dev)
		ah, err := pd.CreateAH(&path)
		if err != nil {
			return lack{err, "address handles (CREATE_AH), which the Go side's UD uses"}
		}
		ah.Close()
	}
	return lack{}
}

// skipUnlessOffers skips the test where the device refused what typ
// needs as not capable, and fails it on any other refusal.
func (b *ppBed) skipUnlessOffers(t *testing.T, typ string) {
	t.Helper()
	l := b.lacks[typ]
	testutil.SkipIfNotCapable(t, l.err, l.capability)
	if l.err != nil {
		t.Fatalf("%s: %v", l.capability, l.err)
	}
}

// runs reports whether the ping-pongs of transport typ are run here:
// not UD where the model bug udShared names breaks it (the bed logged
// which bug when it was set up); the cases are left out, not skipped.
func (b *ppBed) runs(typ string) bool { return typ != "ud" || b.udShared }

// eventModes is whether to sleep on completion events (-e), both ways
// where the device raises them.
func (b *ppBed) eventModes() []bool {
	if !b.events {
		return []bool{false}
	}
	return []bool{false, true}
}

var ppNextPort = 18600

func ppPort() int {
	ppNextPort++
	return ppNextPort
}

// ppProc is one end of a ping-pong running as a process.

// start runs one end: impl "go" (this binary as goverbs) or "c" (the
// rdma-core tool), pinned to cpu.
func (b *ppBed) start(t *testing.T, impl, typ string, cpu int, args ...string) *ppProc {
	t.Helper()
	var argv []string
	var env []string
	switch impl {
	case "go":
		argv = append([]string{os.Args[0], "pingpong", "-t", typ}, args...)
		env = append(os.Environ(), envRunMain+"=1")
	case "c":
		argv = append([]string{testutil.LookPath(t, "ibv_"+typ+"_pingpong")}, args...)
	default:
		t.Fatalf("bad impl %q", impl)
	}
	if b.taskset != "" && cpu >= 0 {
		argv = append([]string{b.taskset, "-c", strconv.Itoa(cpu)}, argv...)
	}
	p, err := proc.Start(t, impl+" "+strings.Join(args, " "), argv, env, ppGuard)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// pair runs a server (impl srv) and a client (impl cli) with the same
// arguments, the server on CPU 0 and the client on CPU 1, and returns
// both once they exited 0.
func (b *ppBed) pair(t *testing.T, typ, srv, cli string, args ...string) (server, client *ppProc) {
	t.Helper()
	port := ppPort()
	args = append([]string{"-d", b.dev, "-g", strconv.Itoa(b.gid), "-p", strconv.Itoa(port)}, args...)
	server = b.start(t, srv, typ, 0, args...)
	waitListening(t, server, port, func() bool { return proc.TCPListening(port) })
	for try := 0; ; try++ {
		client = b.start(t, cli, typ, 1, append(args, b.addr)...)
		err := client.Wait()
		if err != nil && try < 20 && strings.Contains(client.Stderr.String(), "Couldn't connect") && !server.Exited() {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if err != nil {
			server.Cmd.Process.Kill()
			server.Wait()
			t.Fatalf("client failed: %v\n\nserver %v", client, server)
		}
		break
	}
	if err := server.Wait(); err != nil {
		t.Fatal(proc.ServerFailed(server, client))
	}
	return server, client
}

// listenWithin bounds the wait for a server to listen (a hang, not a
// timing check). The slowest bed is the nested pvrdma one, and there the
// srq servers, ours and rdma-core's alike, are the slowest to start (they
// post 500 receives, each rung with an MMIO doorbell that both levels of
// emulation trap: the likely cost, not timed step by step). Measured
// there (2026-11-28): rc and srq servers at 12388 bytes listened 8 to
// 19 s after their start in runs of the ping-pong test alone, but 25 to
// 55 s in some runs of the whole test-pvrdma set, still running (state
// R, no kernel stack) when 25 s had passed; and once, in CI, a Go srq
// server had not listened after 90 s. So more than twice that.
const listenWithin = 240 * time.Second

// ppGuard is how long a ping-pong or perftest end may run in all before
// it counts as hung: listenWithin, then the exchange (10 to 25 s in the
// pvrdma bed, where the slowest whole case took 76 s), with room.
const ppGuard = 6 * time.Minute

// waitListening waits for server to listen on port (listening reports
// it), logs how long that took, and fails the test with what the server
// was doing if it does not within listenWithin.
func waitListening(t *testing.T, server *proc.Proc, port int, listening func() bool) {
	t.Helper()
	took, err := server.WaitReady(fmt.Sprintf("server listening on %d", port), listenWithin, listening)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("server listening after %.1f s", took.Seconds())
}

// ppOutput is what a pingpong printed.
type ppOutput struct {
	local, remote []string // "QPN PSN GID" per line
	bytes, iters  int64
	invalid       []string // "invalid data in page N" lines
}

var (
	ppLocalRE  = regexp.MustCompile(`^  local address:  LID 0x[0-9a-f]{4}, QPN 0x([0-9a-f]{6}), PSN 0x([0-9a-f]{6})([,:]) GID (\S+)$`)
	ppRemoteRE = regexp.MustCompile(`^  remote address: LID 0x[0-9a-f]{4}, QPN 0x([0-9a-f]{6}), PSN 0x([0-9a-f]{6}), GID (\S+)$`)
	ppBytesRE  = regexp.MustCompile(`^(\d+) bytes in (\d+\.\d\d) seconds = (\d+\.\d\d) Mbit/sec$`)
	ppItersRE  = regexp.MustCompile(`^(\d+) iters in (\d+\.\d\d) seconds = (\d+\.\d\d) usec/iter$`)
	ppInvalRE  = regexp.MustCompile(`^invalid data in page \d+$`)
)

// parsePPOutput checks every line of a pingpong's stdout against the C
// tools' formats.
func parsePPOutput(t *testing.T, typ string, p *ppProc) ppOutput {
	t.Helper()
	var o ppOutput
	if s := p.Stderr.String(); s != "" {
		t.Errorf("%s wrote to stderr: %q", p.Name, s)
	}
	wantSep := ","
	if typ == "ud" {
		wantSep = ":"
	}
	for _, line := range strings.Split(strings.TrimSuffix(p.Stdout.String(), "\n"), "\n") {
		if m := ppLocalRE.FindStringSubmatch(line); m != nil {
			if m[3] != wantSep {
				t.Errorf("%s: local address line %q: want %q before GID", p.Name, line, wantSep)
			}
			o.local = append(o.local, m[1]+" "+m[2]+" "+m[4])
		} else if m := ppRemoteRE.FindStringSubmatch(line); m != nil {
			o.remote = append(o.remote, m[1]+" "+m[2]+" "+m[3])
		} else if m := ppBytesRE.FindStringSubmatch(line); m != nil && o.bytes == 0 {
			o.bytes, _ = strconv.ParseInt(m[1], 10, 64)
		} else if m := ppItersRE.FindStringSubmatch(line); m != nil && o.iters == 0 {
			o.iters, _ = strconv.ParseInt(m[1], 10, 64)
		} else if ppInvalRE.MatchString(line) {
			o.invalid = append(o.invalid, line)
		} else {
			t.Errorf("%s: unexpected output line %q", p.Name, line)
		}
	}
	if o.bytes == 0 && o.iters == 0 {
		t.Errorf("%s: no closing lines in\n%s", p.Name, p.Stdout.String())
	}
	return o
}

// checkPair checks both outputs: the formats, the closing numbers, and
// that each side saw the addresses the other printed.
func checkPair(t *testing.T, typ string, size, iters, qps int, bed *ppBed, server, client *ppProc) (so, co ppOutput) {
	t.Helper()
	so, co = parsePPOutput(t, typ, server), parsePPOutput(t, typ, client)
	for _, o := range []struct {
		name string
		out  ppOutput
	}{{"server", so}, {"client", co}} {
		if o.out.bytes != int64(size)*int64(iters)*2 || o.out.iters != int64(iters) {
			t.Errorf("%s: %d bytes, %d iters; want %d, %d", o.name, o.out.bytes, o.out.iters, size*iters*2, iters)
		}
		if len(o.out.local) != qps {
			t.Errorf("%s: %d local address lines, want %d", o.name, len(o.out.local), qps)
		}
		for _, l := range o.out.local {
			if want := " ::ffff:" + bed.addr; !strings.HasSuffix(l, want) {
				t.Errorf("%s: local address %q, want GID %s", o.name, l, want)
			}
		}
	}
	if diff := cmp.Diff(so.local, co.remote); diff != "" {
		t.Errorf("client's remote addresses differ from the server's local ones (-server +client):\n%s", diff)
	}
	if diff := cmp.Diff(co.local, so.remote); diff != "" {
		t.Errorf("server's remote addresses differ from the client's local ones (-client +server):\n%s", diff)
	}
	return so, co
}

var ppImplPairs = [][2]string{{"go", "go"}, {"go", "c"}, {"c", "go"}} // server, client

// Each transport, each pairing of our side with rdma-core's, polling and
// sleeping on events, small, page-sized and multi-packet messages: both
// ends finish and print what the C tools print.
func TestPingpongInterop(t *testing.T) {
	bed := newPPBed(t)
	const iters = 100
	for _, typ := range []string{"rc", "uc", "ud", "srq"} {
		if !bed.runs(typ) {
			continue
		}
		sizes := []int{1, 4096, 3*4096 + 100} // the last spans pages and packets
		qps := 1
		if typ == "ud" {
			sizes = []int{1, bed.mtu} // UD messages are one packet
		}
		if typ == "srq" {
			qps = 16 // the C tool's default
		}
		for _, impls := range ppImplPairs {
			for _, events := range bed.eventModes() {
				for _, size := range sizes {
					args := []string{"-n", strconv.Itoa(iters), "-s", strconv.Itoa(size)}
					name := fmt.Sprintf("%s/%s-server/%s-client/s%d", typ, impls[0], impls[1], size)
					if events {
						args = append(args, "-e")
						name += "/events"
					}
					t.Run(name, func(t *testing.T) {
						bed.skipUnlessOffers(t, typ)
						server, client := bed.pair(t, typ, impls[0], impls[1], args...)
						checkPair(t, typ, size, iters, qps, bed, server, client)
					})
				}
			}
		}
	}
}

// srq with other QP counts and a small receive queue that must be refilled
// often (routs <= num_qp), and rc/uc/ud with a tiny rx depth (refill at 1).
func TestPingpongRxDepth(t *testing.T) {
	bed := newPPBed(t)
	for _, c := range []struct {
		typ  string
		args []string
		qps  int
	}{
		{"srq", []string{"-q", "1", "-r", "2"}, 1},
		{"srq", []string{"-q", "5", "-r", "7"}, 5},
		{"rc", []string{"-r", "2"}, 1},
		{"uc", []string{"-r", "3", "-m", "256"}, 1},
		{"ud", []string{"-r", "2", "-s", "100"}, 1},
	} {
		if !bed.runs(c.typ) {
			continue
		}
		for _, impls := range ppImplPairs[1:] {
			t.Run(fmt.Sprintf("%s/%s-server/%s", c.typ, impls[0], strings.Join(c.args, "")), func(t *testing.T) {
				bed.skipUnlessOffers(t, c.typ)
				args := append([]string{"-n", "200"}, c.args...)
				size := 4096
				if c.typ == "ud" {
					size = 100
				}
				server, client := bed.pair(t, c.typ, impls[0], impls[1], args...)
				checkPair(t, c.typ, size, 200, c.qps, bed, server, client)
			})
		}
	}
}

// -c: the client marks the start of each page, the server checks the
// marks. Without -c on the client the server must complain about every
// page, which proves both fill their buffers as the C tools do (0x7b;
// ibv_srq_pingpong zeroes, so its server finds nothing to complain about).
func TestPingpongValidate(t *testing.T) {
	bed := newPPBed(t)
	page := os.Getpagesize()
	for _, typ := range []string{"rc", "uc", "ud", "srq"} {
		if !bed.runs(typ) {
			continue
		}
		size := 3*page + 7
		if typ == "ud" {
			size = bed.mtu
		}
		pages := (size + page - 1) / page
		for _, impls := range ppImplPairs {
			t.Run(fmt.Sprintf("%s/%s-server/%s-client", typ, impls[0], impls[1]), func(t *testing.T) {
				bed.skipUnlessOffers(t, typ)
				args := []string{"-n", "20", "-s", strconv.Itoa(size), "-c"}
				server, client := bed.pair(t, typ, impls[0], impls[1], args...)
				so, co := checkPair(t, typ, size, 20, map[bool]int{true: 16, false: 1}[typ == "srq"], bed, server, client)
				if len(so.invalid)+len(co.invalid) != 0 {
					t.Errorf("invalid data reported: server %q, client %q", so.invalid, co.invalid)
				}
			})
			if impls[0] == impls[1] {
				continue
			}
			t.Run(fmt.Sprintf("%s/%s-server/%s-client/client-without-c", typ, impls[0], impls[1]), func(t *testing.T) {
				bed.skipUnlessOffers(t, typ)
				port := ppPort()
				common := []string{"-d", bed.dev, "-g", strconv.Itoa(bed.gid), "-p", strconv.Itoa(port), "-n", "20", "-s", strconv.Itoa(size)}
				server := bed.start(t, impls[0], typ, 0, append(common, "-c")...)
				for !proc.TCPListening(port) && !server.Exited() {
					time.Sleep(20 * time.Millisecond)
				}
				client := bed.start(t, impls[1], typ, 1, append(common, bed.addr)...)
				if err := client.Wait(); err != nil {
					t.Fatalf("client: %v\nserver: %v", client, server)
				}
				if err := server.Wait(); err != nil {
					t.Fatalf("server: %v", server)
				}
				so := parsePPOutput(t, typ, server)
				want := pages
				if typ == "srq" {
					want = 0
				}
				if len(so.invalid) != want {
					t.Errorf("server reported %d invalid pages, want %d: %q", len(so.invalid), want, so.invalid)
				}
			})
		}
	}
}

// Bad input fails cleanly: a message on stderr, exit status 1, no panic,
// nothing left behind on the device.
func TestPingpongErrors(t *testing.T) {
	bed := newPPBed(t)
	dev, err := verbs.LookupDevice(bed.dev)
	if err != nil {
		t.Fatal(err)
	}
	busy, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	before := testutil.Resources(t, dev)
	fds := testutil.OpenFDs(t)

	busyPort := strconv.Itoa(busy.Addr().(*net.TCPAddr).Port)
	g := strconv.Itoa(bed.gid)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-d", "nosuchdev9"}, "IB device nosuchdev9 not found"},
		{[]string{"-t", "xrc"}, "unknown transport type"},
		{[]string{"-m", "1000"}, "MTU must be"},
		{[]string{"-t", "ud", "-m", "1024"}, "has no such option"},
		{[]string{"-o"}, "goverbs pingpong: -o is not supported"},
		{[]string{"-d", bed.dev, "-g", g, "-p", busyPort}, "Couldn't listen to port " + busyPort},
		{[]string{"-t", "srq", "-d", bed.dev, "-g", g, "-p", busyPort}, "Couldn't listen to port " + busyPort},
		{[]string{"-d", bed.dev, "-g", g, "-p", strconv.Itoa(ppPort()), bed.addr}, "Couldn't connect to " + bed.addr},
		{[]string{"-t", "ud", "-d", bed.dev, "-s", strconv.Itoa(bed.mtu + 1)}, fmt.Sprintf("Requested size larger than port MTU (%d)", bed.mtu)},
		{[]string{"-t", "srq", "-q", "600"}, "rx_depth 500 is too small for 600 QPs"},
		{[]string{"-t", "srq", "-q", "256", "-r", "1000"}, "num_qp 256 must be less than 255"},
		// (-p busyPort: should they get past the error, they fail soon.)
		{[]string{"-d", bed.dev, "-g", "5000", "-p", busyPort}, "can't read sgid of index 5000"},
		{[]string{"-t", "ud", "-d", bed.dev, "-g", "5000", "-p", busyPort}, "Could not get local gid for gid index 5000"},
		{[]string{"-d", bed.dev, "-i", "9", "-p", busyPort}, "Failed to modify QP to INIT"},
		{[]string{"-d", bed.dev, "-p", busyPort, "-n", "-1", "x"}, "invalid iteration count"},
		{[]string{"-d", bed.dev, "-g", g, "-p", busyPort, "-s", "0"}, "Couldn't register MR"},
		{[]string{"-t", "uc", "-d", bed.dev, "-g", g, "-p", busyPort, "-s", "0"}, "Couldn't register MR"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			rc := run(append([]string{"pingpong"}, c.args...), &stdout, &stderr)
			if rc != 1 || !strings.Contains(stderr.String(), c.want) {
				t.Errorf("exit %d, stderr %q; want 1 and %q", rc, stderr.String(), c.want)
			}
		})
	}
	if after := testutil.Resources(t, dev); !cmp.Equal(before, after) {
		t.Errorf("device resources before %v, after the failed runs %v", before, after)
	}
	if n := testutil.OpenFDs(t); n != fds {
		t.Errorf("%d fds open before, %d after: %s", fds, n, testutil.FDTargets())
	}
}

// An unused GID slot reads as the zero GID (libibverbs' ibv_query_gid does
// so): the tool goes on without a GRH, which RoCE refuses at RTR.
func TestPingpongUnusedGID(t *testing.T) {
	bed := newPPBed(t)
	ctx, err := verbs.Open(bed.dev)
	if err != nil {
		t.Fatal(err)
	}
	port, err := ctx.QueryPort(1)
	ctx.Close()
	if err != nil {
		t.Fatal(err)
	}
	unused := port.GIDTblLen - 1
	server := bed.start(t, "go", "rc", 0, "-d", bed.dev, "-g", strconv.Itoa(unused), "-p", strconv.Itoa(ppPort()))
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(server.Stdout.String(), "local address") && !server.Exited() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	server.Cmd.Process.Kill()
	server.Wait()
	if !strings.Contains(server.Stdout.String(), "GID ::\n") {
		t.Errorf("local address with unused GID index %d: %v", unused, server)
	}
}

// A whole ping-pong with our server in this process: it must release
// everything it created.
func TestPingpongInProcessNoLeak(t *testing.T) {
	bed := newPPBed(t)
	dev, err := verbs.LookupDevice(bed.dev)
	if err != nil {
		t.Fatal(err)
	}
	before := testutil.Resources(t, dev)
	fds := testutil.OpenFDs(t)
	// One subtest per type: a type the device refuses as not capable skips
	// there, naming the capability; the leak check below covers them all.
	for _, typ := range []string{"rc", "ud", "srq"} {
		if !bed.runs(typ) {
			continue
		}
		t.Run(typ, func(t *testing.T) {
			bed.skipUnlessOffers(t, typ)
			port := ppPort()
			args := []string{"pingpong", "-t", typ, "-d", bed.dev, "-g", strconv.Itoa(bed.gid), "-p", strconv.Itoa(port), "-n", "50", "-s", "64"}
			if bed.events { // the completion channel too, where events fire
				args = append(args, "-e")
			}
			var stdout, stderr bytes.Buffer
			var rc int
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				rc = run(args, &stdout, &stderr)
			}()
			for !proc.TCPListening(port) {
				time.Sleep(20 * time.Millisecond)
			}
			client := bed.start(t, "c", typ, -1, append(append([]string(nil), args[3:]...), bed.addr)...)
			cerr := client.Wait()
			wg.Wait()
			if rc != 0 || cerr != nil {
				t.Fatalf("%s: server exit %d: %s%s\nclient %v", typ, rc, stdout.String(), stderr.String(), client)
			}
		})
	}
	if after := testutil.Resources(t, dev); !cmp.Equal(before, after) {
		t.Errorf("device resources before %v, after %v", before, after)
	}
	if n := testutil.OpenFDs(t); n != fds {
		t.Errorf("%d fds open before, %d after: %s", fds, n, testutil.FDTargets())
	}
}

// TestPingpongBench measures rc latency and bandwidth of every pairing of
// our side and rdma-core's (GOVERBS_PINGPONG_BENCH=1; it asserts nothing
// about the numbers).
func TestPingpongBench(t *testing.T) {
	testutil.SkipUnlessOptIn(t, "GOVERBS_PINGPONG_BENCH")
	bed := newPPBed(t)
	reps, _ := strconv.Atoi(os.Getenv("GOVERBS_PINGPONG_BENCH_REPS"))
	reps = max(reps, 3)
	for _, size := range []int{1, 4096} {
		for _, impls := range [][2]string{{"c", "c"}, {"go", "go"}, {"go", "c"}, {"c", "go"}} {
			var usecs, mbits []float64
			for range reps {
				_, client := bed.pair(t, "rc", impls[0], impls[1], "-n", "1000", "-s", strconv.Itoa(size))
				out := client.Stdout.String()
				for _, line := range strings.Split(out, "\n") {
					if m := ppItersRE.FindStringSubmatch(line); m != nil {
						v, _ := strconv.ParseFloat(m[3], 64)
						usecs = append(usecs, v)
					}
					if m := ppBytesRE.FindStringSubmatch(line); m != nil {
						v, _ := strconv.ParseFloat(m[3], 64)
						mbits = append(mbits, v)
					}
				}
			}
			sort.Float64s(usecs)
			sort.Float64s(mbits)
			t.Logf("BENCH rc -s %d server=%s client=%s: median %.2f usec/iter %.2f Mbit/s; all usec %v Mbit %v",
				size, impls[0], impls[1], usecs[len(usecs)/2], mbits[len(mbits)/2], usecs, mbits)
		}
	}
}

// Without -g there is no GRH, which RoCE refuses at RTR: the server says
// so, and the client, whose server hung up, says it got no address.
func TestPingpongNoGID(t *testing.T) {
	bed := newPPBed(t)
	for _, impls := range ppImplPairs[1:] {
		t.Run(impls[0]+"-server", func(t *testing.T) {
			port := ppPort()
			args := []string{"-d", bed.dev, "-p", strconv.Itoa(port), "-n", "10"}
			server := bed.start(t, impls[0], "rc", 0, args...)
			for !proc.TCPListening(port) && !server.Exited() {
				time.Sleep(20 * time.Millisecond)
			}
			client := bed.start(t, impls[1], "rc", 1, append(args, bed.addr)...)
			if err := client.Wait(); err == nil || !strings.Contains(client.Stderr.String(), "Couldn't read/write remote address") {
				t.Errorf("client: want exit 1 and \"Couldn't read/write remote address\": %v", client)
			}
			if err := server.Wait(); err == nil || !strings.Contains(server.Stderr.String(), "Failed to modify QP to RTR") ||
				!strings.Contains(server.Stderr.String(), "Couldn't connect to remote QP") {
				t.Errorf("server: want exit 1 and a failed RTR: %v", server)
			}
			for _, p := range []*ppProc{server, client} {
				if p.Cmd.ProcessState != nil && p.Cmd.ProcessState.ExitCode() != 1 {
					t.Errorf("%s: exit code %d, want 1", p.Name, p.Cmd.ProcessState.ExitCode())
				}
			}
		})
	}
}
