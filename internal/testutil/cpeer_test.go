package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// BuildC builds once per boot: the same sources give the same executable,
// unbuilt again; an edited source gives another, which runs the edit.
func TestBuildCOncePerBoot(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "peer.c")
	write := func(code int) {
		t.Helper()
		c := "#include <librpma.h>\nint main(void) { return " + strconv.Itoa(code) + "; }\n"
		if err := os.WriteFile(src, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	status := func(bin string) int {
		t.Helper()
		err := exec.Command(bin).Run()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return 0
	}
	write(3)
	first := BuildC(t, "peer", src)
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(first)) })
	fi, err := os.Stat(first)
	if err != nil {
		t.Fatal(err)
	}
	if got := status(first); got != 3 {
		t.Fatalf("%s exited %d, want 3", first, got)
	}
	again := BuildC(t, "peer", src)
	if again != first {
		t.Fatalf("the same build gave %s, then %s", first, again)
	}
	if fi2, err := os.Stat(again); err != nil || !fi2.ModTime().Equal(fi.ModTime()) {
		t.Fatalf("the same build was built again (%v)", err)
	}
	write(4)
	edited := BuildC(t, "peer", src)
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(edited)) })
	if edited == first {
		t.Fatalf("an edited source gave the old build %s", edited)
	}
	if got := status(edited); got != 4 {
		t.Fatalf("%s exited %d, want 4", edited, got)
	}
	if parts, _ := filepath.Glob(filepath.Join(filepath.Dir(edited), "*.part")); len(parts) != 0 {
		t.Fatalf("partial builds left: %v", parts)
	}
}
