// Command testsum prints the summary of a `make test` run: one row a stage
// (its result, time and test counts, and where its full log is), then every
// failed test with the last lines of its output, then one closing line with
// the totals. hack/test-stages.sh runs it after the last stage.
//
// Usage:
//
//	testsum [-tail N] [-failures FILE] STAGES.tsv
//	testsum -rerun-plan [-rerun-max N] LOG
//
// STAGES.tsv has one line a stage, tab-separated: name, exit status, seconds,
// kind and log file. The kind is "tests" for a stage whose log is `go test
// -v` output (possibly from two VMs, each line behind "a| " or "b| "),
// "plain" for a stage that runs no tests (vet, gofmt, the arm64 build), and
// "bed" for a test stage whose test bed could not be built (its tests did
// not run; the log's last lines are the bed's error). -failures writes each
// failed test's whole output (up to 400 lines) to FILE, for .ci/run to
// print.
//
// A stage may run its failed tests once more (hack/rerun-failed.sh, which
// test-siw uses): the log then has a line beginning "rerun-failed: " and
// the reruns' output after it. A failed test whose rerun passed is counted
// and listed as flaky, not failed, with its first run's output; one that
// failed again is a failure twice over. hack/vm/batch.sh runs the entries a
// guest kernel panic left in new guests after a line beginning
// "rerun-panicked: ": a package that failed outside any test (its guest
// died under it) and passed after that line is flaky in the same way.
//
// -rerun-plan prints what hack/rerun-failed.sh should run again from a go
// test -v LOG: one line per failed test, tab-separated: its package, a
// -run pattern that selects that test alone, and its name. It prints nothing and exits
// 1, saying why on stderr, when there is nothing a rerun could settle: no
// failed test, a package that failed outside any test (a build failure, a
// panic, a timeout, a VM that died), or more than -rerun-max failed tests
// (that is a regression, not a flake).
//
// Exit status: 0, or 2 on bad usage or an unreadable file. Whether the run
// passed is the caller's to say (the stages' own exit statuses).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// stage is one line of STAGES.tsv and what its log says.
type stage struct {
	name    string
	status  int
	seconds int
	kind    string // "tests", "plain" or "bed"
	log     string

	counts
	failures []failure
	flakes   []failure // failed, then passed when run again
	// stageRerun: the whole stage ran again after a guest kernel panic
	// (the log has stageRerunMark); flakes are then the earlier runs'
	// failures.
	stageRerun bool
	tail       []string // the log's last lines, for a stage that failed with no failed test
}

type counts struct {
	passed, failed, skipped, flaky int
	// tests is set once any test result was seen: a stage whose log
	// holds none prints "-" instead of zeros.
	tests bool
}

// failure is one failed test, or a package that failed with no failed test
// (a build failure, a panic outside a test, a timeout, a VM that died).
type failure struct {
	pkg    string // import path, or the stream's label
	test   string // "" for a package-level failure
	output []string
}

const maxOutput = 400 // lines of one test's output kept for -failures

var (
	resultRE  = regexp.MustCompile(`^ *--- (PASS|FAIL|SKIP): (\S+)`)
	startRE   = regexp.MustCompile(`^=== (RUN|CONT|NAME|PAUSE) +(\S+)`)
	packageRE = regexp.MustCompile("^(ok|FAIL|\\?) *\t(\\S+)")
	// rerunMark begins the line hack/rerun-failed.sh prints before it
	// runs failed tests again.
	rerunMark = "rerun-failed: "
	// panicRerunMark begins the line hack/vm/batch.sh prints before it
	// runs the entries a guest kernel panic left in new guests.
	panicRerunMark = "rerun-panicked: "
	// stageRerunMark begins the line hack/vm/two-host.sh prints before it
	// runs its command again on both VMs, after a guest kernel panic.
	stageRerunMark = "rerun-stage: "
	streamRE       = regexp.MustCompile(`^([a-z])\| `)
	// exitRE is hack/vm/two-host.sh's status line for one VM (0 for a VM
	// that powered itself off on request).
	exitRE = regexp.MustCompile(`^two-host: VM ([a-z]) exited with ([0-9]+)$`)
	// What the test bed's scripts say (hack/vm/*.sh), and errors.
	bedRE = regexp.MustCompile(`^(vm|rootfs|fetch-kernel|build-siw|apt|install-deps|uapi-headers|go-test-exec|two-host|make): |^E: |error`)
)

// stream is the parser's state for one go test output stream: the whole
// log, or one VM's lines in a two-host log.
type stream struct {
	label   string
	cur     string
	out     map[string][]string // test name -> its output so far
	pending []failure           // failed tests waiting for their package's name
	passes  []string            // tests passed in a rerun, waiting for their package's name
	pkgBuf  []string            // the current package's last lines
	sawFail bool                // a test of the current package failed
}

func newStream(label string) *stream {
	return &stream{label: label, out: map[string][]string{}}
}

func appendCapped(s []string, line string, limit int) []string {
	s = append(s, line)
	if len(s) > limit {
		s = s[len(s)-limit:]
	}
	return s
}

// parse reads a go test -v log and returns its counts and failures.
func parse(r io.Reader) (counts, []failure, error) {
	c, fails, _, err := parseReruns(r)
	return c, fails, err
}

// testKey names a test of a package.
type testKey struct{ pkg, test string }

// parseReruns is parse, and also returns the tests that passed after the
// log's rerun mark, and (test "") the packages that passed after its
// panicRerunMark.
func parseReruns(r io.Reader) (counts, []failure, map[testKey]bool, error) {
	var c counts
	var fails []failure
	rerunPassed := map[testKey]bool{}
	inRerun, inPanicRerun := false, false
	streams := map[string]*stream{}
	get := func(label string) *stream {
		s := streams[label]
		if s == nil {
			s = newStream(label)
			streams[label] = s
		}
		return s
	}
	exits := map[string]string{} // VM label -> two-host.sh's non-zero status line
	// endPackage names the pending failures of s after pkg; a package that
	// failed without a failed test is a failure of its own.
	endPackage := func(s *stream, pkg string, failed bool) {
		for _, f := range s.pending {
			f.pkg = pkg
			f.output = s.out[f.test]
			fails = append(fails, f)
		}
		for _, t := range s.passes {
			rerunPassed[testKey{pkg, t}] = true
		}
		if inPanicRerun && !failed {
			rerunPassed[testKey{pkg, ""}] = true
		}
		if failed && !s.sawFail {
			fails = append(fails, failure{pkg: pkg, output: packageExcerpt(s.pkgBuf)})
		}
		label := s.label
		*s = *newStream(label)
	}

	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1024*1024), 16*1024*1024)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		label := ""
		if m := streamRE.FindStringSubmatch(line); m != nil {
			label = m[1]
			line = line[len(m[0]):]
		}
		if strings.HasPrefix(line, rerunMark) {
			inRerun = true
		}
		if strings.HasPrefix(line, panicRerunMark) {
			inPanicRerun = true
		}
		if m := exitRE.FindStringSubmatch(line); m != nil && label == "" {
			if m[2] != "0" {
				exits[m[1]] = line
			}
			continue
		}
		s := get(label)
		if m := packageRE.FindStringSubmatch(line); m != nil {
			endPackage(s, m[2], m[1] == "FAIL")
			continue
		}
		// A test binary run by hand (the two-host faults, one stream a VM)
		// ends with a bare PASS or FAIL instead of go test's package line;
		// under go test that bare line comes just before the package line.
		if line == "PASS" || line == "FAIL" {
			if label != "" {
				endPackage(s, "VM "+label, line == "FAIL")
			}
			continue
		}
		s.pkgBuf = appendCapped(s.pkgBuf, line, 200)

		if m := startRE.FindStringSubmatch(line); m != nil {
			s.cur = m[2]
			continue
		}
		if m := resultRE.FindStringSubmatch(line); m != nil {
			c.tests = true
			name := m[2]
			switch m[1] {
			case "PASS":
				c.passed++
				if inRerun {
					s.passes = append(s.passes, name)
				}
			case "SKIP":
				c.skipped++
			case "FAIL":
				c.failed++
				s.sawFail = true
				s.pending = append(s.pending, failure{test: name})
			}
			// Non-verbose output puts a failed test's lines after its
			// result line, indented.
			s.cur = name
			continue
		}
		if s.cur != "" {
			s.out[s.cur] = appendCapped(s.out[s.cur], line, maxOutput)
		}
	}
	if err := sc.Err(); err != nil {
		return c, fails, rerunPassed, err
	}
	// A log cut short (the stage killed, a VM that never came back) may
	// leave failures with no package line after them.
	for label, s := range streams {
		if len(s.pending) > 0 {
			pkg := "(no package line: log cut short)"
			if label != "" {
				pkg = "VM " + label + " " + pkg
			}
			endPackage(s, pkg, false)
		}
	}
	// A VM whose command failed with no failed test and no FAIL line (its
	// kernel died, its test binary was killed, the VM timed out): a failure
	// of its own, with its last test and lines. Its peer's failures are
	// usually only the consequence.
	for _, label := range slices.Sorted(maps.Keys(exits)) {
		vm := "VM " + label
		if slices.ContainsFunc(fails, func(f failure) bool { return f.pkg == vm || strings.HasPrefix(f.pkg, vm+" ") }) {
			continue
		}
		s := get(label)
		out := packageExcerpt(s.pkgBuf)
		if s.cur != "" {
			out = append([]string{"(its last test: " + s.cur + ")"}, out...)
		}
		fails = append(fails, failure{pkg: vm, output: append(out, exits[label])})
	}
	return c, fails, rerunPassed, nil
}

// splitStageRerun reads a stage's log and splits it at its stageRerunMark
// lines: earlier holds the log of each run before the last (none when
// there is no mark), last the last run's, its mark included.
func splitStageRerun(r io.Reader) (earlier []string, last string, err error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, "", err
	}
	s := string(b)
	for {
		i := strings.Index(s, "\n"+stageRerunMark)
		if i < 0 {
			return earlier, s, nil
		}
		earlier = append(earlier, s[:i+1])
		s = s[i+1:]
	}
}

// splitFlaky separates the failed tests that passed when run again (and
// takes them out of c's failed count, which counts parents too) from the
// others.
func splitFlaky(c *counts, fails []failure, rerunPassed map[testKey]bool) (failed, flaky []failure) {
	for _, f := range fails {
		if rerunPassed[testKey{f.pkg, f.test}] {
			flaky = append(flaky, f)
			if f.test != "" { // a package-level failure is not counted
				c.failed--
			}
			continue
		}
		failed = append(failed, f)
	}
	return failed, flaky
}

// rerunPlan is -rerun-plan: the failed tests of a go test -v log, one
// per line, package and -run pattern, or why a rerun cannot settle them.
func rerunPlan(r io.Reader, max int) ([]string, error) {
	c, fails, rerunPassed, err := parseReruns(r)
	if err != nil {
		return nil, err
	}
	// What a rerun already settled (hack/vm/batch.sh's, after a panic).
	fails, _ = splitFlaky(&c, fails, rerunPassed)
	fails = leaves(fails)
	switch {
	case len(fails) == 0:
		return nil, fmt.Errorf("no failed test")
	case len(fails) > max:
		return nil, fmt.Errorf("%d failed tests, more than %d", len(fails), max)
	}
	var plan []string
	for _, f := range fails {
		if f.test == "" {
			return nil, fmt.Errorf("%s failed outside any test", f.pkg)
		}
		if strings.Contains(f.pkg, " ") {
			return nil, fmt.Errorf("%s: not a package", f.pkg)
		}
		var pat []string
		for _, e := range strings.Split(f.test, "/") {
			pat = append(pat, "^"+regexp.QuoteMeta(e)+"$")
		}
		plan = append(plan, f.pkg+"\t"+strings.Join(pat, "/")+"\t"+f.test)
	}
	return plan, nil
}

// packageExcerpt picks what explains a package-level failure: from the
// first panic or VM message on, else the last lines.
func packageExcerpt(buf []string) []string {
	for i, l := range buf {
		if strings.HasPrefix(l, "panic: ") || strings.HasPrefix(l, "vm: ") || strings.HasPrefix(l, "go-test-exec: ") {
			return buf[i:]
		}
	}
	return buf
}

// parentOf reports whether a is a parent test of b ("TestX" of "TestX/sub").
func parentOf(a, b string) bool { return strings.HasPrefix(b, a+"/") }

// leaves drops failed tests whose failure is a failed subtest's: the
// subtest is reported, with its output, and the parent would repeat it.
func leaves(fs []failure) []failure {
	var out []failure
	for i, f := range fs {
		shadowed := false
		for j, g := range fs {
			if i != j && f.test != "" && f.pkg == g.pkg && parentOf(f.test, g.test) {
				shadowed = true
				break
			}
		}
		if !shadowed {
			out = append(out, f)
		}
	}
	return out
}

func lastLines(path string, n int) []string {
	f, err := os.Open(path)
	if err != nil {
		return []string{fmt.Sprintf("(no log: %v)", err)}
	}
	defer f.Close()
	var buf []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1024*1024), 16*1024*1024)
	for sc.Scan() {
		buf = appendCapped(buf, sc.Text(), n)
	}
	return buf
}

func readStages(path string) ([]*stage, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []*stage
	for i, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		if line == "" {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 5 {
			return nil, fmt.Errorf("%s:%d: want 5 tab-separated fields, got %d", path, i+1, len(f))
		}
		st := &stage{name: f[0], kind: f[3], log: f[4]}
		if st.status, err = strconv.Atoi(f[1]); err != nil {
			return nil, fmt.Errorf("%s:%d: status: %v", path, i+1, err)
		}
		if st.seconds, err = strconv.Atoi(f[2]); err != nil {
			return nil, fmt.Errorf("%s:%d: seconds: %v", path, i+1, err)
		}
		switch st.kind {
		case "tests", "plain", "bed":
		default:
			return nil, fmt.Errorf("%s:%d: kind %q: want tests, plain or bed", path, i+1, st.kind)
		}
		out = append(out, st)
	}
	return out, nil
}

func (st *stage) load(tail int) error {
	if st.kind == "tests" {
		f, err := os.Open(st.log)
		if err != nil {
			return err
		}
		earlier, last, err := splitStageRerun(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %v", st.log, err)
		}
		c, fails, rerunPassed, err := parseReruns(strings.NewReader(last))
		if err != nil {
			return fmt.Errorf("%s: %v", st.log, err)
		}
		failed, flaky := splitFlaky(&c, fails, rerunPassed)
		st.counts, st.failures, st.flakes = c, leaves(failed), leaves(flaky)
		// The stage ran again after a guest kernel panic: what counts is
		// the last run. The earlier runs' failures are flaky when the last
		// passed, failures as well when it did not.
		st.stageRerun = len(earlier) > 0
		passed := st.status == 0 && len(st.failures) == 0
		var before []failure
		for _, run := range earlier {
			c1, fails1, err := parse(strings.NewReader(run))
			if err != nil {
				return fmt.Errorf("%s: %v", st.log, err)
			}
			before = append(before, leaves(fails1)...)
			if !passed {
				st.counts.failed += c1.failed
			}
		}
		if passed {
			st.flakes = append(before, st.flakes...)
		} else {
			st.failures = append(before, st.failures...)
		}
		st.counts.flaky = len(st.flakes) // as failures are listed: leaves
	}
	if st.status != 0 && len(st.failures) == 0 {
		st.tail = lastLines(st.log, 400)
		if st.kind == "bed" {
			// The bed scripts' own messages, not apt's progress around them.
			var own []string
			for _, l := range st.tail {
				if bedRE.MatchString(l) {
					own = append(own, l)
				}
			}
			if len(own) > 0 {
				st.tail = own
			}
		}
		if len(st.tail) > tail {
			st.tail = st.tail[len(st.tail)-tail:]
		}
	}
	return nil
}

func (st *stage) result() string {
	switch {
	case st.kind == "bed":
		return "BED FAILED"
	case st.status != 0:
		return "FAIL"
	}
	return "ok"
}

func report(w io.Writer, stages []*stage, tail int) (total counts, failedStages int) {
	fmt.Fprintln(w, "== summary of make test")
	fmt.Fprintf(w, "%-18s %-10s %6s %7s %6s %7s  %s\n", "stage", "result", "time", "passed", "failed", "skipped", "log")
	for _, st := range stages {
		p, f, s := "-", "-", "-"
		if st.tests {
			p, f, s = strconv.Itoa(st.passed), strconv.Itoa(st.failed), strconv.Itoa(st.skipped)
		}
		fmt.Fprintf(w, "%-18s %-10s %5ds %7s %6s %7s  %s\n", st.name, st.result(), st.seconds, p, f, s, st.log)
		total.passed += st.passed
		total.failed += st.failed
		total.skipped += st.skipped
		total.flaky += st.counts.flaky
		if st.status != 0 || st.kind == "bed" {
			failedStages++
		}
	}
	for _, st := range stages {
		if len(st.flakes) == 0 {
			continue
		}
		fmt.Fprintln(w)
		if st.stageRerun {
			fmt.Fprintf(w, "== %s: %d flaky: a guest kernel panicked, and the stage passed when run again (hack/vm/two-host.sh); the earlier runs' failures:\n", st.name, len(st.flakes))
		} else {
			fmt.Fprintf(w, "== %s: %d flaky: failed, then passed when run again (hack/rerun-failed.sh, or hack/vm/batch.sh after a guest kernel panic); the first run's output:\n", st.name, len(st.flakes))
		}
		printFailures(w, st, st.flakes, tail)
	}
	for _, st := range stages {
		if st.status == 0 && st.kind != "bed" {
			continue
		}
		fmt.Fprintln(w)
		switch {
		case st.kind == "bed":
			fmt.Fprintf(w, "== %s: the test bed could not be built; no test of this stage ran. Its error:\n", st.name)
		case len(st.failures) == 0:
			fmt.Fprintf(w, "== %s failed (exit status %d) with no failed test; the log's last lines:\n", st.name, st.status)
		default:
			fmt.Fprintf(w, "== %s: %d failed\n", st.name, len(st.failures))
		}
		for _, l := range st.tail {
			fmt.Fprintf(w, "    %s\n", l)
		}
		printFailures(w, st, st.failures, tail)
	}
	return total, failedStages
}

// printFailures prints each of fs (failed tests of st) with its output's
// last tail lines.
func printFailures(w io.Writer, st *stage, fs []failure, tail int) {
	for _, f := range fs {
		name := f.pkg
		if f.test != "" {
			name += " " + f.test
		} else {
			name += " (the package failed outside any test)"
		}
		fmt.Fprintf(w, "--- %s\n", name)
		out := f.output
		if len(out) > tail {
			fmt.Fprintf(w, "    ... (%d lines before these; the whole output is in %s)\n", len(out)-tail, st.log)
			out = out[len(out)-tail:]
		}
		if len(out) == 0 {
			fmt.Fprintln(w, "    (the test printed nothing)")
		}
		for _, l := range out {
			fmt.Fprintf(w, "    %s\n", l)
		}
	}
}

func writeFailures(path string, stages []*stage) error {
	var b strings.Builder
	for _, st := range stages {
		for _, f := range st.flakes {
			fmt.Fprintf(&b, "=== %s: %s %s (flaky: passed when run again; its first run)\n", st.name, f.pkg, f.test)
			for _, l := range f.output {
				b.WriteString(l)
				b.WriteByte('\n')
			}
		}
		for _, f := range st.failures {
			fmt.Fprintf(&b, "=== %s: %s %s\n", st.name, f.pkg, f.test)
			for _, l := range f.output {
				b.WriteString(l)
				b.WriteByte('\n')
			}
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// budgetLines says how long the run took against its budget and CI's
// limit: the stages' sum, and the whole run's time (elapsed, when known:
// it also counts what ran before the first stage). Past the budget it adds
// a warning; the run's result is the stages' alone.
func budgetLines(stages []*stage, elapsed, budget, limit int) []string {
	sum := 0
	for _, st := range stages {
		sum += st.seconds
	}
	total := elapsed
	if total < sum {
		total = sum
	}
	spare := fmt.Sprintf("%d s to spare", budget-total)
	if total > budget {
		spare = fmt.Sprintf("%d s over", total-budget)
	}
	lines := []string{fmt.Sprintf("time: %d s in all (stages %d s); budget %d s, %s; CI's limit %d s, %d s left",
		total, sum, budget, spare, limit, limit-total)}
	if total > budget {
		lines = append(lines, fmt.Sprintf("WARNING: this run took %d s, %d s over the %d s budget: a slower machine or one more stage can exceed CI's %d s (docs/testing.md: where the time goes)",
			total, total-budget, budget, limit))
	}
	return lines
}

func main() {
	tail := flag.Int("tail", 25, "lines of a failed test's output (or a failed stage's log) in the summary")
	failuresFile := flag.String("failures", "", "write every failed test's output to this file")
	plan := flag.Bool("rerun-plan", false, "print the failed tests of the go test -v log named by the argument, for hack/rerun-failed.sh")
	planMax := flag.Int("rerun-max", 3, "with -rerun-plan: most failed tests a rerun may settle")
	rotation := flag.String("rotation", "", "the rotation slot this run chose, for the summary")
	elapsed := flag.Int("elapsed", -1, "seconds the whole run took so far (CI's clock), for the budget lines")
	budget := flag.Int("budget", 3000, "the seconds a per-submission run should take: past it the summary warns")
	limit := flag.Int("limit", 5400, "CI's limit in seconds")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: testsum [-tail N] [-failures FILE] STAGES.tsv")
		fmt.Fprintln(os.Stderr, "       testsum -rerun-plan [-rerun-max N] LOG")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 || *tail < 1 {
		flag.Usage()
		os.Exit(2)
	}
	if *plan {
		f, err := os.Open(flag.Arg(0))
		if err != nil {
			fmt.Fprintln(os.Stderr, "testsum:", err)
			os.Exit(2)
		}
		lines, err := rerunPlan(f, *planMax)
		f.Close()
		if err != nil {
			fmt.Fprintln(os.Stderr, "testsum: no rerun:", err)
			os.Exit(1)
		}
		for _, l := range lines {
			fmt.Println(l)
		}
		return
	}
	stages, err := readStages(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsum:", err)
		os.Exit(2)
	}
	for _, st := range stages {
		if err := st.load(*tail); err != nil {
			fmt.Fprintln(os.Stderr, "testsum:", err)
			os.Exit(2)
		}
	}
	total, failedStages := report(os.Stdout, stages, *tail)
	if *failuresFile != "" {
		if err := writeFailures(*failuresFile, stages); err != nil {
			fmt.Fprintln(os.Stderr, "testsum:", err)
			os.Exit(2)
		}
	}
	fmt.Println()
	if *rotation != "" {
		fmt.Printf("rotation: %s\n", *rotation)
	}
	for _, l := range budgetLines(stages, *elapsed, *budget, *limit) {
		fmt.Println(l)
	}
	fmt.Printf("stages: %d run, %d failed\n", len(stages), failedStages)
	// The closing line: failed counts failed tests, and a failed stage in
	// which no test failed (vet, a bed, a package that did not build) as
	// one more, so that a red run never closes on "0 failed".
	failed := total.failed
	for _, st := range stages {
		if (st.status != 0 || st.kind == "bed") && st.failed == 0 {
			failed++
		}
	}
	flakyNote := ""
	if total.flaky > 0 {
		flakyNote = fmt.Sprintf(", %d flaky (passed when run again)", total.flaky)
	}
	fmt.Printf("total: %d passed, %d failed, %d skipped%s\n", total.passed, failed, total.skipped, flakyNote)
}
