package main

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/internal/testutil"
)

// cmtimeRow is one step's line of cmtime's table: the step and four
// numbers, as the C tool prints them ("%-13s: %11.2f%11.2f%11.2f%11.2f").
var cmtimeRow = regexp.MustCompile(`^([a-z ]{13}): ( *-?[0-9]+\.[0-9]{2}){4}$`)

// cmtimeCheck checks a cmtime client's output: the steps announced, the
// table's header and one row per step (bind addr only with -b).
func cmtimeCheck(t *testing.T, p *cmProc, bind bool) {
	t.Helper()
	lines := cmLines(p.Stdout.String())
	want := []string{"creating id", "resolving address", "resolving route", "creating qp", "connecting", "disconnecting", "destroying id"}
	steps := []string{"create id", "resolve addr", "resolve route", "create qp", "connect", "disconnect", "destroy"}
	if bind {
		want = append(want[:1], append([]string{"binding source address"}, want[1:]...)...)
		steps = append(steps[:1], append([]string{"bind addr"}, steps[1:]...)...)
	}
	want = append(want, "step              total ms     max ms     min us  us / conn")
	if len(lines) != len(want)+len(steps) {
		t.Fatalf("%s: %d lines, want %d:\n%s", p.Name, len(lines), len(want)+len(steps), p.Stdout.String())
	}
	for i, w := range want {
		if lines[i] != w {
			t.Errorf("%s: line %d %q, want %q", p.Name, i+1, lines[i], w)
		}
	}
	for i, s := range steps {
		l := lines[len(want)+i]
		m := cmtimeRow.FindStringSubmatch(l)
		if m == nil || strings.TrimSpace(m[1]) != s {
			t.Errorf("%s: row %q, want step %q and four numbers", p.Name, l, s)
			continue
		}
		if strings.Contains(l, "999999999") {
			t.Errorf("%s: row %q: no connection timed in this step", p.Name, l)
		}
	}
	if p.Impl != "go" && p.Stderr.TrimSuffix(cmtimeExitRace) {
		t.Logf("%s: rdma-core's cmtime lost its exit race (exit %d; unfixed upstream): %q removed from its stderr",
			p.Name, p.Status(), strings.TrimSpace(cmtimeExitRace))
	}
	if s := p.Stderr.String(); s != "" {
		t.Errorf("%s: stderr %q", p.Name, s)
	}
}

// cmtimeExitRace is what rdma-core's cmtime client prints when it loses
// its own exit race, the one rping has (cmRpingExitRace): its event
// thread is still in rdma_get_cm_event when the main thread destroys the
// event channel at the end of a run, fails with EBADF and prints this
// (perror) before the process exits with the main thread's status. In
// rdma-core 44 the thread then returns, so the exit status is not
// touched; upstream (2025) still has the race and exits 1 there. Seen once
// in CI on siw, after a run that had printed every row. Ours stops its
// event goroutine before closing the channel.
const cmtimeExitRace = "failure in rdma_get_cm_event in process_server_events: Bad file descriptor\n"

// goverbs cmtime against rdma-core's, each side either: the client times
// -c connections through every step against a server that accepts them.
func TestCmtimeInterop(t *testing.T) {
	addr := testutil.Addr(t)
	for _, c := range []struct {
		n    int
		bind bool
	}{{1, false}, {25, false}, {10, true}} {
		for _, impls := range cmImplPairs {
			t.Run(fmt.Sprintf("%s-server/%s-client/c%d/bind%v", impls[0], impls[1], c.n, c.bind), func(t *testing.T) {
				port := cmPort()
				server := cmStart(t, impls[0], "cmtime", "-p", strconv.Itoa(port))
				cmWaitListen(t, server, "TCP", port)
				args := []string{"-s", addr, "-p", strconv.Itoa(port), "-c", strconv.Itoa(c.n)}
				if c.bind {
					args = append(args, "-b", addr)
				}
				client := cmStart(t, impls[1], "cmtime", args...)
				if err := client.Wait(); err != nil {
					t.Fatalf("client: %v\n\nserver %v", client, server)
				}
				cmtimeCheck(t, client, c.bind)
				if server.Exited() {
					t.Fatalf("the server exited: %v", server)
				}
				if s := server.Stdout.String() + server.Stderr.String(); s != "" {
					t.Errorf("server printed %q", s)
				}
				// Like C's, goverbs' server makes one CQ pair for all
				// its QPs and keeps it until it ends.
				if impls[0] == "go" {
					if n := cqsOf(t, server.Cmd.Process.Pid); n != 2 {
						t.Errorf("the server holds %d CQs after %d connections, want 2 (one pair)", n, c.n)
					}
				}
			})
		}
	}
}

// cqsOf counts the CQs the kernel lists (rdma -j resource show cq) for
// process pid. The kernel names the thread that created an object, so
// every thread of the process counts.
func cqsOf(t *testing.T, pid int) int {
	t.Helper()
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatalf("threads of %d: %v", pid, err)
	}
	testutil.LookPath(t, "rdma")
	cqs, err := rdmaResources("cq")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, cq := range cqs {
		// JSON numbers decode as float64; a CQ of the kernel's own has no pid.
		if p, ok := cq["pid"].(float64); ok && slices.ContainsFunc(tasks, func(e os.DirEntry) bool { return e.Name() == strconv.Itoa(int(p)) }) {
			n++
		}
	}
	return n
}

// A client without a server: every connection is refused, each
// reported as the C tool reports it (InfiniBand and RoCE: a REJECTED
// event; iWARP: rdma_connect itself fails, and the exit status is -1),
// and the table still follows.
func TestCmtimeNoServer(t *testing.T) {
	addr := testutil.Addr(t)
	port := strconv.Itoa(cmPort())
	var out [2]string
	var status [2]int
	for i, impl := range []string{"c", "go"} {
		p := cmStart(t, impl, "cmtime", "-s", addr, "-p", port, "-c", "3")
		p.Wait()
		status[i] = p.Status()
		// Numbers differ; the words must not.
		out[i] = regexp.MustCompile(` *-?[0-9]+\.[0-9]{2}|error: -?[0-9]+`).ReplaceAllString(p.Stdout.String(), " N")
	}
	if status[0] != status[1] {
		t.Errorf("exit status: C %d, Go %d", status[0], status[1])
	}
	if out[0] != out[1] {
		t.Errorf("C and Go differ:\nC:\n%s\nGo:\n%s", out[0], out[1])
	}
}

// Bad options get getopt's words and the C tool's usage, exit 1.
func TestCmtimeArgs(t *testing.T) {
	for _, c := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"cmtime", "-x"}, "goverbs cmtime: invalid option -- 'x'\n"},
		{[]string{"cmtime", "-c"}, "goverbs cmtime: option requires an argument -- 'c'\n"},
	} {
		var stdout, stderr bytes.Buffer
		if rc := run(c.args, &stdout, &stderr); rc != 1 || stderr.String() != c.stderr ||
			stdout.String() != "usage: goverbs cmtime\n\t[-s server_address]\n\t[-b bind_address]\n\t[-c connections]\n\t[-p port_number]\n\t[-r retries]\n\t[-t timeout_ms]\n" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", c.args, rc, stdout.String(), stderr.String())
		}
	}
}
