package apicheck

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// coverageDoc is the map of libibverbs and librdmacm onto goverbs.
var coverageDoc = filepath.Join("..", "..", "..", "docs", "api-coverage.md")

// symbolLists are the committed symbol lists of rdma-core v44's map files.
var symbolLists = []string{"testdata/libibverbs.map.symbols", "testdata/librdmacm.map.symbols"}

// coverageStatus is what the goverbs column says when it names no call.
var coverageStatus = []string{"not supported", "not needed", "internal"}

// goName matches a goverbs name cited in backquotes: package.Name,
// package.Type.Method or package.Type.Field.
var goName = regexp.MustCompile("`([a-z]+)\\.([A-Z][A-Za-z0-9_]*(?:\\.[A-Z][A-Za-z0-9_]*)?)`")

// stdlib are the standard library packages the document may cite.
var stdlib = map[string]bool{"context": true, "net": true}

// coverageRow is one row of a table of docs/api-coverage.md.
type coverageRow struct {
	line         int
	symbol       string
	goverbs, why string
}

func readCoverage(t *testing.T) []coverageRow {
	t.Helper()
	f, err := os.Open(coverageDoc)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []coverageRow
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		if len(cells) != 3 {
			t.Errorf("%s:%d: want 3 cells, got %d: %s", coverageDoc, n, len(cells), line)
			continue
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		sym := strings.Trim(cells[0], "`")
		if sym == "" || strings.ContainsAny(sym, "` ") {
			t.Errorf("%s:%d: bad symbol cell %q", coverageDoc, n, cells[0])
			continue
		}
		rows = append(rows, coverageRow{line: n, symbol: sym, goverbs: cells[1], why: cells[2]})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

func readSymbols(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var syms []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 0 && !strings.HasPrefix(f[0], "#") {
			syms = append(syms, f[0])
		}
	}
	return syms
}

// TestAPICoverage keeps docs/api-coverage.md in step with rdma-core's map
// files and with the code: every exported symbol has exactly one row, each
// row names a goverbs call or a status with its reason, and every goverbs
// name the document cites exists.
func TestAPICoverage(t *testing.T) {
	rows := readCoverage(t)
	known := map[string]map[string]bool{}
	for _, p := range load(t) {
		names := map[string]bool{}
		for _, n := range exported(p) {
			names[n] = true
		}
		known[filepath.Base(p.path)] = names
	}

	bySymbol := map[string]coverageRow{}
	for _, r := range rows {
		if prev, dup := bySymbol[r.symbol]; dup {
			t.Errorf("%s:%d: %s has a row already at line %d", coverageDoc, r.line, r.symbol, prev.line)
		}
		bySymbol[r.symbol] = r
		cited := goName.FindAllStringSubmatch(r.goverbs, -1)
		status := ""
		for _, s := range coverageStatus {
			if strings.HasPrefix(r.goverbs, s) {
				status = s
			}
		}
		switch {
		case status == "" && len(cited) == 0:
			t.Errorf("%s:%d: %s: the goverbs column %q names no goverbs call and no status (%s)",
				coverageDoc, r.line, r.symbol, r.goverbs, strings.Join(coverageStatus, ", "))
		case status != "" && strings.TrimSpace(r.why) == "":
			t.Errorf("%s:%d: %s is %q without a reason", coverageDoc, r.line, r.symbol, status)
		}
		for _, cell := range []string{r.goverbs, r.why} {
			for _, m := range goName.FindAllStringSubmatch(cell, -1) {
				names, ok := known[m[1]]
				if !ok {
					if stdlib[m[1]] {
						continue
					}
					t.Errorf("%s:%d: %s cites %s: no public package %q", coverageDoc, r.line, r.symbol, m[0], m[1])
					continue
				}
				if !names[m[2]] {
					t.Errorf("%s:%d: %s cites %s, which package %s does not export", coverageDoc, r.line, r.symbol, m[0], m[1])
				}
			}
		}
	}
	want := map[string]bool{}
	for _, list := range symbolLists {
		syms := readSymbols(t, list)
		if len(syms) < 60 {
			t.Fatalf("%s: only %d symbols", list, len(syms))
		}
		for _, s := range syms {
			want[s] = true
			if _, ok := bySymbol[s]; !ok {
				t.Errorf("%s: %s (from %s) has no row", coverageDoc, s, list)
			}
		}
	}
	for _, r := range rows {
		if !want[r.symbol] {
			t.Errorf("%s:%d: %s is in neither map file's symbol list", coverageDoc, r.line, r.symbol)
		}
	}
}
