package main

import (
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

// The names the clients pick with the seeds of the fact sheet, as the C
// clients do with glibc's rand().
func TestRPMAExampleGlibcRand(t *testing.T) {
	for seed, want := range map[uint32]string{1: "Andy", 2: "Kacper", 3: "Oksana"} {
		if got := names[uint64(common.GlibcRand(seed)())%uint64(len(names))]; got != want {
			t.Errorf("seed %d names %s, want %s", seed, got, want)
		}
	}
}
