package main

import (
	"testing"

	"github.com/goverbs/goverbs/internal/testutil/rpmaex"
)

// The test binary is the example when rpmaex.EnvRunMain is set: the
// interop tests run it as the Go end.
func TestMain(m *testing.M) { rpmaex.Main(m, main) }

// TestRPMAExamples runs the example with Go and C librpma ends on the
// test bed's device (rpmaex.Examples).
func TestRPMAExamples(t *testing.T) { rpmaex.Examples(t, example.Name) }

// TestLibrpmaClientEnding runs the Go server against a C client that ends
// as librpma's own example does, whose last message 6.12 can lose: the
// server must end every run (rpmaex.LibrpmaEnding).
func TestLibrpmaClientEnding(t *testing.T) { rpmaex.LibrpmaEnding(t, example.Name, 10) }
