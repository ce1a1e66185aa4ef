package testutil

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// No test skips by itself: a skip goes through Unavailable (which fails
// when the device is required), SkipUnlessCap (which names a capability
// the device lacks) or SkipUnlessOptIn, so that no skip on the test bed
// can hide a missing capability.
func TestNoDirectSkips(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root not found: %v", err)
	}
	skip := regexp.MustCompile(`\.(Skip|Skipf|SkipNow)\(`)
	self := filepath.Join(root, "internal", "testutil")
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") || filepath.Dir(path) == self {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		checked++
		for i, line := range strings.Split(string(b), "\n") {
			if skip.MatchString(line) {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s:%d: skips directly (use testutil.Unavailable, SkipUnlessCap or SkipUnlessOptIn): %s", rel, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 10 {
		t.Fatalf("only %d test files found under %s", checked, root)
	}
}

func TestSkipUnlessCap(t *testing.T) {
	var lacking, having bool
	t.Run("lacking", func(t *testing.T) {
		defer func() { lacking = t.Skipped() }()
		SkipUnlessCap(t, false, "IBV_DEVICE_MEM_WINDOW_TYPE_2B")
	})
	t.Run("having", func(t *testing.T) {
		defer func() { having = t.Skipped() }()
		SkipUnlessCap(t, true, "IBV_DEVICE_MEM_WINDOW_TYPE_2B")
	})
	if !lacking || having {
		t.Fatalf("skipped when lacking: %v, when having: %v", lacking, having)
	}
	if got := capabilityMessage("X"); got != CapabilityMarker+" X" {
		t.Fatalf("skip message %q does not begin with the marker", got)
	}
}
