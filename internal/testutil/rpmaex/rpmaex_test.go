package rpmaex

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/internal/testutil/proc"
)

// examples/rpma holds librpma 1.2's examples, each in the directory of
// librpma's name, with the tests that run it against C librpma; the
// matrix knows them all.
func TestRPMAExampleList(t *testing.T) {
	want := []string{
		"01-connection", "02-read-to-volatile", "03-read-to-persistent", "04-write-to-persistent",
		"05-flush-to-persistent", "06-multiple-connections", "06scch-multiple-connections",
		"07-atomic-write", "08-messages-ping-pong", "08srq-simple-messages-ping-pong-with-srq",
		"09-flush-to-persistent-GPSPM", "09scch-flush-to-persistent-GPSPM", "10-send-with-imm",
		"11-write-with-imm", "12-receive-completion-queue", "12scch-receive-completion-queue",
		"13-messages-ping-pong-with-srq",
	}
	dir := filepath.Join(repoRoot(t), "examples", "rpma")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		if e.IsDir() && e.Name() != "internal" {
			got = append(got, e.Name())
			for _, f := range []string{"main.go", "main_test.go"} {
				if _, err := os.Stat(filepath.Join(dir, e.Name(), f)); err != nil {
					t.Errorf("%s: %v", e.Name(), err)
				}
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("examples/rpma (-want +got):\n%s", diff)
	}
	var matrix []string
	for name := range cSources {
		matrix = append(matrix, name)
	}
	slices.Sort(matrix)
	if diff := cmp.Diff(want, matrix); diff != "" {
		t.Errorf("the matrix's examples (-want +got):\n%s", diff)
	}
	for _, c := range rpxCases() {
		if !slices.Contains(want, c.example) {
			t.Errorf("case of unknown example %s", c.example)
		}
	}
}

// A C end of an scch example that met the completions of a message and
// its answer the other way round is a reason to run the cell again; the
// same words from a Go end, or from an example without the shared
// channel, are not.
func TestCCompletionOrder(t *testing.T) {
	const order = "unexpected wc.opcode value (128 != 0)\n"
	end := func(name, stderr string) *proc.Proc {
		p := &proc.Proc{Name: name}
		p.Stderr.Write([]byte(stderr))
		return p
	}
	scch := &rpxCase{example: "12scch-receive-completion-queue"}
	for _, tc := range []struct {
		name string
		c    *rpxCase
		cell rpxCell
		srv  *proc.Proc
		cli  *proc.Proc
		want bool
	}{
		{"c client", scch, rpxCell{srv: []string{"go"}, cli: []string{"c"}}, end("server", "rpma_conn_wait: context deadline exceeded\n"), end("client", order), true},
		{"c server, other way", scch, rpxCell{srv: []string{"c"}, cli: []string{"go"}}, end("server", "unexpected wc.opcode value (0 != 128)\n"), end("client", ""), true},
		{"go client", scch, rpxCell{srv: []string{"c"}, cli: []string{"go"}}, end("server", ""), end("client", order), false},
		{"other failure", scch, rpxCell{srv: []string{"go"}, cli: []string{"c"}}, end("server", ""), end("client", "rpma_send() failed\n"), false},
		{"no shared channel", &rpxCase{example: "12-receive-completion-queue"}, rpxCell{srv: []string{"go"}, cli: []string{"c"}}, end("server", ""), end("client", order), false},
	} {
		got := cCompletionOrder(tc.c, tc.cell, tc.srv, []*proc.Proc{tc.cli})
		if (got != "") != tc.want {
			t.Errorf("%s: cCompletionOrder = %q, want a reason: %v", tc.name, got, tc.want)
		}
	}
}
