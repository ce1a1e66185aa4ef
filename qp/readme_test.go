package qp_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// maxReadmeLines is the most the README's first program may have: one
// screen.
const maxReadmeLines = 60

// TestReadmeProgram: the README's first program is this package's Example
// (example_loopback_test.go), as a whole program: package main, func main,
// without the Output comment that go test checks. So the program the README
// shows is the one the test bed runs, and it fits on one screen.
func TestReadmeProgram(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```go\n(.*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no ```go block")
	}
	shown := string(m[1])
	src, err := os.ReadFile("example_loopback_test.go")
	if err != nil {
		t.Fatal(err)
	}
	want := asProgram(t, string(src))
	if shown != want {
		t.Errorf("README.md's first program differs from example_loopback_test.go; it should read:\n%s", want)
	}
	if n := strings.Count(shown, "\n"); n > maxReadmeLines {
		t.Errorf("README.md's first program has %d lines, more than %d", n, maxReadmeLines)
	}
}

// asProgram turns the example file into the program it shows.
func asProgram(t *testing.T, src string) string {
	t.Helper()
	var out []string
	for _, line := range strings.SplitAfter(src, "\n") {
		switch {
		case line == "package qp_test\n":
			line = "package main\n"
		case line == "func Example() {\n":
			line = "func main() {\n"
		case strings.HasPrefix(strings.TrimSpace(line), "// Output:"):
			continue
		}
		out = append(out, line)
	}
	prog := strings.Join(out, "")
	if !strings.Contains(prog, "package main\n") || !strings.Contains(prog, "func main() {\n") {
		t.Fatal("example_loopback_test.go is not package qp_test with func Example")
	}
	return prog
}
