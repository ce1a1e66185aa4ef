package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type got struct {
	Pkg, Test string
	Last      string // the failure's last output line
}

// parseRaw parses testdata/name.
func parseRaw(t *testing.T, name string) (counts, []failure) {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, fails, err := parse(f)
	if err != nil {
		t.Fatal(err)
	}
	return c, fails
}

func parseFile(t *testing.T, name string) (counts, []got) {
	t.Helper()
	c, fails := parseRaw(t, name)
	var out []got
	for _, f := range leaves(fails) {
		last := ""
		if len(f.output) > 0 {
			last = strings.TrimSpace(f.output[len(f.output)-1])
		}
		out = append(out, got{f.Pkg(), f.test, last})
	}
	return c, out
}

func (f failure) Pkg() string { return strings.TrimPrefix(f.pkg, "example.com/tsx/") }

// sampleFailures is what testdata/verbose.log and quiet.log (one go test
// run over the same three packages, with and without -v) hold: a failed
// subtest (its parent not repeated), a parallel test, a panic in a test
// and a package that panicked in init.
var sampleFailures = []got{
	{"a", "TestBad/sub2", "a_test.go:6: boom: want 1, got 2"},
	{"a", "TestPar1", "a_test.go:9: par1 died"},
	{"b", "TestPanic", "/usr/local/go/src/testing/testing.go:2101 +0x4c5"},
	{"c", "", "/src/tsx/c/c_test.go:4 +0x25"},
}

func TestParseVerbose(t *testing.T) {
	c, fails := parseFile(t, "verbose.log")
	if diff := cmp.Diff(counts{passed: 3, failed: 4, skipped: 1, tests: true}, c, cmp.AllowUnexported(counts{})); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(sampleFailures, fails); diff != "" {
		t.Errorf("failures (-want +got):\n%s", diff)
	}
}

func TestParseQuiet(t *testing.T) {
	c, fails := parseFile(t, "quiet.log")
	if c.passed != 0 || c.failed != 4 {
		t.Errorf("counts = %+v, want 0 passed, 4 failed", c)
	}
	if diff := cmp.Diff(sampleFailures, fails); diff != "" {
		t.Errorf("failures (-want +got):\n%s", diff)
	}
}

func TestParseTwoHost(t *testing.T) {
	c, fails := parseFile(t, "two-host.log")
	if c.passed != 1 || c.failed != 1 {
		t.Errorf("counts = %+v, want 1 passed, 1 failed", c)
	}
	want := []got{{"VM b", "TestStream", "stream_test.go:77: role b: peer vanished"}}
	if diff := cmp.Diff(want, fails); diff != "" {
		t.Errorf("failures (-want +got):\n%s", diff)
	}
}

// TestParseTwoHostDied: VM a died in the middle of a test, printing no
// result for it and no FAIL line; only two-host.sh's status line says so.
// b's failures, which follow from it, are listed too.
func TestParseTwoHostDied(t *testing.T) {
	c, fails := parseFile(t, "two-host-died.log")
	if c.passed != 2 || c.failed != 2 {
		t.Errorf("counts = %+v, want 2 passed, 2 failed", c)
	}
	want := []got{
		{"VM b", "TestKill", "kill_test.go:30: a's done: i/o timeout"},
		{"VM b", "TestLast", "bed_test.go:139: waiting for a's test: accept tcp4 169.254.77.12:7471: i/o timeout"},
		{"VM a", "", "two-host: VM a exited with 125"},
	}
	if diff := cmp.Diff(want, fails); diff != "" {
		t.Errorf("failures (-want +got):\n%s", diff)
	}
	_, all := parseRaw(t, "two-host-died.log")
	// What a's failure shows: its last test and the VM's last words.
	out := strings.Join(all[len(all)-1].output, "\n")
	for _, s := range []string{"(its last test: TestKill)", "vm: the guest stopped after 79s", "BUG: kernel NULL pointer dereference"} {
		if !strings.Contains(out, s) {
			t.Errorf("a's failure output lacks %q:\n%s", s, out)
		}
	}
}

// TestReport runs the whole summary over a run with a passing stage, a
// failed one, a plain one that failed and a bed that could not be built.
func TestReport(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	verbose, err := os.ReadFile(filepath.Join("testdata", "verbose.log"))
	if err != nil {
		t.Fatal(err)
	}
	okLog := write("ok.log", "=== RUN   TestA\n--- PASS: TestA (0.00s)\nPASS\nok  \texample.com/x\t0.1s\n")
	failLog := write("fail.log", string(verbose))
	vetLog := write("vet.log", "# example.com/x\nx.go:3:2: unreachable code\n")
	bedLog := write("bed.log", "Setting up qemu-system-x86 ...\nrootfs: downloading 28 arm64 packages\n/usr/bin/as: libz.so.1\nrootfs: error: libraries missing from the arm64 tree\nProcessing triggers for man-db\n")
	tsv := write("stages.tsv", strings.Join([]string{
		"vet\t1\t3\tplain\t" + vetLog,
		"integration-6.12\t0\t700\ttests\t" + okLog,
		"integration-6.1\t1\t690\ttests\t" + failLog,
		"test-arm64\t1\t20\tbed\t" + bedLog,
	}, "\n")+"\n")
	stages, err := readStages(tsv)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range stages {
		if err := st.load(5); err != nil {
			t.Fatal(err)
		}
	}
	var b strings.Builder
	total, failedStages := report(&b, stages, 5)
	out := b.String()
	if total.passed != 4 || total.failed != 4 || failedStages != 3 {
		t.Errorf("total %+v, %d failed stages; want 4 passed, 4 failed, 3 failed stages", total, failedStages)
	}
	for _, want := range []string{
		"integration-6.12   ok",
		"integration-6.1    FAIL",
		"test-arm64         BED FAILED",
		"x.go:3:2: unreachable code",
		"--- example.com/tsx/a TestBad/sub2",
		"boom: want 1, got 2",
		"--- example.com/tsx/c (the package failed outside any test)",
		"the test bed could not be built",
		"rootfs: error: libraries missing",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Setting up") || strings.Contains(out, "man-db") {
		t.Errorf("a bed failure's headline carries apt's progress:\n%s", out)
	}
	if strings.Contains(out, "--- example.com/tsx/a TestBad\n") {
		t.Errorf("summary repeats the parent of a failed subtest:\n%s", out)
	}
	if err := writeFailures(filepath.Join(dir, "failures.txt"), stages); err != nil {
		t.Fatal(err)
	}
}

// siwRun is a stage log in which two tests failed and were run again: one
// passed then, one failed again.
const siwRun = `=== RUN   TestPersistent
=== RUN   TestPersistent/c-server
    x_test.go:541: concurrent client: exit status 255
--- FAIL: TestPersistent (1.00s)
    --- FAIL: TestPersistent/c-server (1.00s)
=== RUN   TestOther
--- PASS: TestOther (0.00s)
FAIL
FAIL	example.com/cmd	2.0s
=== RUN   TestBroken
    y_test.go:9: broken
--- FAIL: TestBroken (0.00s)
FAIL
FAIL	example.com/lib	1.0s
rerun-failed: running each failed test of siw.log once more:
rerun-failed: example.com/cmd -run '^TestPersistent$/^c-server$'
=== RUN   TestPersistent
=== RUN   TestPersistent/c-server
--- PASS: TestPersistent (1.00s)
    --- PASS: TestPersistent/c-server (1.00s)
PASS
ok  	example.com/cmd	1.5s
rerun-failed: example.com/lib -run '^TestBroken$'
=== RUN   TestBroken
    y_test.go:9: broken again
--- FAIL: TestBroken (0.00s)
FAIL
FAIL	example.com/lib	1.0s
`

func TestRerunPlan(t *testing.T) {
	first := siwRun[:strings.Index(siwRun, "rerun-failed:")]
	plan, err := rerunPlan(strings.NewReader(first), 3)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"example.com/cmd\t^TestPersistent$/^c-server$\tTestPersistent/c-server",
		"example.com/lib\t^TestBroken$\tTestBroken",
	}
	if diff := cmp.Diff(want, plan); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
	// Names are quoted for -run.
	plan, err = rerunPlan(strings.NewReader("--- FAIL: TestX/a+b(1) (0.00s)\nFAIL\nFAIL\tp\t1s\n"), 3)
	if err != nil || len(plan) != 1 || plan[0] != `p	^TestX$/^a\+b\(1\)$	TestX/a+b(1)` {
		t.Errorf("plan = %q, %v", plan, err)
	}
	for name, log := range map[string]string{
		"none failed":  "--- PASS: TestA (0.00s)\nPASS\nok  \tp\t1s\n",
		"build failed": "# p\nx.go:1: syntax error\nFAIL\tp [build failed]\n",
		"timeout":      "=== RUN   TestHang\npanic: test timed out after 1s\nFAIL\tp\t1s\n",
		"too many":     "--- FAIL: TestA (0s)\n--- FAIL: TestB (0s)\n--- FAIL: TestC (0s)\n--- FAIL: TestD (0s)\nFAIL\nFAIL\tp\t1s\n",
	} {
		if plan, err := rerunPlan(strings.NewReader(log), 3); err == nil {
			t.Errorf("%s: plan %q, want no rerun", name, plan)
		}
	}
}

// A failed test whose rerun passed is flaky, not failed; one that failed
// again is a failure (twice); tests that passed before the rerun mark do
// not make a failure flaky.
func TestFlaky(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "siw.log")
	if err := os.WriteFile(log, []byte(siwRun), 0o644); err != nil {
		t.Fatal(err)
	}
	st := &stage{name: "test-siw", kind: "tests", log: log}
	if err := st.load(5); err != nil {
		t.Fatal(err)
	}
	if st.passed != 3 || st.failed != 2 || st.counts.flaky != 1 {
		t.Errorf("counts %+v, want 3 passed, 2 failed, 1 flaky (a subtest; its parent is neither)", st.counts)
	}
	var flaky, failed []string
	for _, f := range st.flakes {
		flaky = append(flaky, f.pkg+" "+f.test)
	}
	for _, f := range st.failures {
		failed = append(failed, f.pkg+" "+f.test)
	}
	if diff := cmp.Diff([]string{"example.com/cmd TestPersistent/c-server"}, flaky); diff != "" {
		t.Errorf("flaky (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"example.com/lib TestBroken", "example.com/lib TestBroken"}, failed); diff != "" {
		t.Errorf("failed (-want +got):\n%s", diff)
	}
	var b strings.Builder
	total, _ := report(&b, []*stage{st}, 5)
	if total.flaky != 1 || !strings.Contains(b.String(), "== test-siw: 1 flaky") || !strings.Contains(b.String(), "concurrent client: exit status 255") {
		t.Errorf("total %+v; summary:\n%s", total, b.String())
	}
}

// stageRerunRun is a faults log in which VM b's kernel panicked, a's
// failures followed from it, and hack/vm/two-host.sh ran both again.
const stageRerunRun = `a| === RUN   TestFirst
b| === RUN   TestFirst
a| --- PASS: TestFirst (1.10s)
b| --- PASS: TestFirst (1.12s)
a| === RUN   TestKill
b| === RUN   TestKill
b| vm: the guest kernel panicked after 81s, before the command reported an exit status (qemu status 0). Kernel log: /x/kernel-crash.log
b| vm:   Oops: double fault: 0000 [#1] PREEMPT SMP NOPTI
a|     kill_test.go:30: the stream failed before the fault
a| --- FAIL: TestKill (3.00s)
a| FAIL
two-host: VM a exited with 1
two-host: VM b exited with 125
rerun-stage: the kernel of VM b panicked (its oops is above); both VMs run the command once more
a| === RUN   TestFirst
b| === RUN   TestFirst
a| --- PASS: TestFirst (1.10s)
b| --- PASS: TestFirst (1.12s)
a| === RUN   TestKill
b| === RUN   TestKill
a| --- PASS: TestKill (2.00s)
b| --- PASS: TestKill (2.00s)
a| PASS
b| PASS
two-host: VM a exited with 0
two-host: VM b exited with 0
`

// firstRun is stageRerunRun up to its rerun mark (the run that
// panicked), and rerun the rest: the mark and the run after it.
var firstRun, rerun = func() (string, string) {
	i := strings.Index(stageRerunRun, "rerun-stage:")
	return stageRerunRun[:i], stageRerunRun[i:]
}()

// panicTwice is stageRerunRun's panicked run, its rerun mark, and the same
// run again: a log whose first two runs panicked.
var panicTwice = firstRun + rerun[:strings.Index(rerun, "\n")+1] + firstRun

// After a stage rerun, the last run's results count; the earlier runs'
// failures (the panicked VM's among them) are flaky when the stage then
// passed, and failures too when it did not.
func TestStageRerun(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name            string
		log             string
		status          int
		passed, failed  int
		flaky, failures []string
	}{
		{"passed", stageRerunRun, 0, 4, 0, []string{"VM a TestKill", "VM b "}, nil},
		{
			"failed again",
			strings.Replace(stageRerunRun, "a| --- PASS: TestKill (2.00s)\n", "a| --- FAIL: TestKill (2.00s)\n", 1), 1,
			3, 2, nil, []string{"VM a TestKill", "VM b ", "VM a TestKill"},
		},
		{"no rerun", firstRun, 1, 2, 1, nil, []string{"VM a TestKill", "VM b "}},
		{"passed on the second rerun", panicTwice + rerun, 0, 4, 0,
			[]string{"VM a TestKill", "VM b ", "VM a TestKill", "VM b "}, nil},
		{
			"failed on both reruns",
			panicTwice + strings.Replace(rerun,
				"a| --- PASS: TestKill (2.00s)\n", "a| --- FAIL: TestKill (2.00s)\n", 1), 1,
			3, 3, nil, []string{"VM a TestKill", "VM b ", "VM a TestKill", "VM b ", "VM a TestKill"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := filepath.Join(dir, tc.name+".log")
			if err := os.WriteFile(log, []byte(tc.log), 0o644); err != nil {
				t.Fatal(err)
			}
			st := &stage{name: "faults", kind: "tests", status: tc.status, log: log}
			if err := st.load(5); err != nil {
				t.Fatal(err)
			}
			if st.passed != tc.passed || st.failed != tc.failed || st.counts.flaky != len(tc.flaky) {
				t.Errorf("counts %+v, want %d passed, %d failed, %d flaky", st.counts, tc.passed, tc.failed, len(tc.flaky))
			}
			names := func(fs []failure) (out []string) {
				for _, f := range fs {
					out = append(out, f.pkg+" "+f.test)
				}
				return out
			}
			if diff := cmp.Diff(tc.flaky, names(st.flakes)); diff != "" {
				t.Errorf("flaky (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.failures, names(st.failures)); diff != "" {
				t.Errorf("failed (-want +got):\n%s", diff)
			}
			if tc.name != "passed" {
				return
			}
			var b strings.Builder
			report(&b, []*stage{st}, 5)
			for _, s := range []string{"== faults: 2 flaky: a guest kernel panicked", "Oops: double fault"} {
				if !strings.Contains(b.String(), s) {
					t.Errorf("summary lacks %q:\n%s", s, b.String())
				}
			}
		})
	}
}

// batchPanicRun is a hack/vm/batch.sh log in which a guest's kernel
// panicked under example.com/cmd, and that entry and one nobody had taken
// ran again in a new guest.
const batchPanicRun = `=== RUN   TestA
--- PASS: TestA (0.10s)
PASS
ok  	example.com/lib	0.2s
batch: the kernel of guest 1 panicked; its log:
batch: guest 1: vm: the guest kernel panicked after 81s, before the command reported an exit status (qemu status 0). Kernel log: /x/kernel-crash.log
=== RUN   TestFirst
--- PASS: TestFirst (1.00s)
=== RUN   TestSecond
batch: the kernel of the guest running example.com/cmd panicked under it
FAIL	example.com/cmd	0.000s
rerun-panicked: a guest kernel panicked; the 2 entries left run again in 1 new guests (rerun 1 of at most 2)
=== RUN   TestFirst
--- PASS: TestFirst (1.00s)
=== RUN   TestSecond
--- PASS: TestSecond (1.00s)
PASS
ok  	example.com/cmd	2.0s
=== RUN   TestB
--- PASS: TestB (0.10s)
PASS
ok  	example.com/other	0.2s
`

// A package whose guest panicked under it is flaky when its rerun in a new
// guest passed, and a failure when that failed too; the rerun plan leaves
// a settled package out.
func TestBatchPanicRerun(t *testing.T) {
	dir := t.TempDir()
	failedAgain := strings.Replace(batchPanicRun, "--- PASS: TestSecond (1.00s)\nPASS\nok  \texample.com/cmd",
		"    x_test.go:1: broken\n--- FAIL: TestSecond (1.00s)\nFAIL\nFAIL\texample.com/cmd", 1)
	if failedAgain == batchPanicRun {
		t.Fatal("failedAgain: no replacement")
	}
	for _, tc := range []struct {
		name           string
		log            string
		status         int
		failed, flaky  int
		flakes, failes []string
	}{
		{"passed", batchPanicRun, 0, 0, 1, []string{"example.com/cmd "}, nil},
		{"failed again", failedAgain, 1, 1, 0, nil, []string{"example.com/cmd ", "example.com/cmd TestSecond"}},
	} {
		log := filepath.Join(dir, "batch.log")
		if err := os.WriteFile(log, []byte(tc.log), 0o644); err != nil {
			t.Fatal(err)
		}
		st := &stage{name: "integration-6.12", kind: "tests", status: tc.status, log: log}
		if err := st.load(5); err != nil {
			t.Fatal(err)
		}
		if st.passed != 5-tc.failed || st.failed != tc.failed || st.counts.flaky != tc.flaky {
			t.Errorf("%s: counts %+v, want %d passed, %d failed, %d flaky", tc.name, st.counts, 5-tc.failed, tc.failed, tc.flaky)
		}
		var flaky, failed []string
		for _, f := range st.flakes {
			flaky = append(flaky, f.pkg+" "+f.test)
		}
		for _, f := range st.failures {
			failed = append(failed, f.pkg+" "+f.test)
		}
		if diff := cmp.Diff(tc.flakes, flaky); diff != "" {
			t.Errorf("%s: flaky (-want +got):\n%s", tc.name, diff)
		}
		if diff := cmp.Diff(tc.failes, failed); diff != "" {
			t.Errorf("%s: failed (-want +got):\n%s", tc.name, diff)
		}
	}
	// The panicked package's rerun settled it: nothing to run again.
	if plan, err := rerunPlan(strings.NewReader(batchPanicRun), 3); err == nil {
		t.Errorf("plan %q for a settled log, want none", plan)
	}
	plan, err := rerunPlan(strings.NewReader(failedAgain), 3)
	if err == nil {
		t.Errorf("plan %q with a package-level failure left, want none", plan)
	}
}

func TestBudgetLines(t *testing.T) {
	stages := []*stage{{name: "unit", seconds: 100}, {name: "integration-6.12", seconds: 900}}
	got := budgetLines(stages, 1010, 3000, 5400)
	want := []string{"time: 1010 s in all (stages 1000 s); budget 3000 s, 1990 s to spare; CI's limit 5400 s, 4390 s left"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("within the budget (-want +got):\n%s", diff)
	}
	// No clock from the caller: the stages' sum stands for the run.
	got = budgetLines(stages, -1, 800, 5400)
	if len(got) != 2 || !strings.HasPrefix(got[0], "time: 1000 s in all (stages 1000 s); budget 800 s, 200 s over;") ||
		!strings.HasPrefix(got[1], "WARNING: this run took 1000 s, 200 s over the 800 s budget") {
		t.Errorf("over the budget: %q", got)
	}
}
