package main

import (
	"io"
	"testing"

	"github.com/goverbs/goverbs/examples/rpma/internal/common"
	"github.com/goverbs/goverbs/internal/testutil/rpmaex"
)

// The test binary is the example when rpmaex.EnvRunMain is set: the
// interop tests run it as the Go end.
func TestMain(m *testing.M) { rpmaex.Main(m, main) }

// TestRPMAExamples runs the example with Go and C librpma ends on the
// test bed's device (rpmaex.Examples).
func TestRPMAExamples(t *testing.T) { rpmaex.Examples(t, example.Name) }

// TestRPMAExampleUsage checks the command-line errors.
func TestRPMAExampleUsage(t *testing.T) {
	rpmaex.Usage(t, example.Name, func(args []string, stdout, stderr io.Writer) int {
		return common.Run(example, args, stdout, stderr)
	})
}
