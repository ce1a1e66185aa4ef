package uverbs

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// copyGenerator copies what mkabi.sh -check reads into a temporary directory
// and returns it, so a test can tamper with the copy.
func copyGenerator(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatal("bash is needed to run mkabi.sh (and by make)")
	}
	dir := t.TempDir()
	for _, f := range []string{"mkabi.sh", "uapi-headers.sh", "types_linux.go", "ztypes_linux.go", "zconsts_linux.go", "abi.pin"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// runCheck runs mkabi.sh -check in dir and returns its status and stderr.
// The digest checks come before anything is fetched, so these tests need no
// network; the cache is pointed at an empty directory all the same.
func runCheck(t *testing.T, dir string) (error, string) {
	t.Helper()
	cmd := exec.Command("bash", filepath.Join(dir, "mkabi.sh"), "-check")
	cmd.Env = append(os.Environ(), "GOVERBS_ABI_CACHE="+t.TempDir())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	return err, stderr.String()
}

func edit(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if !strings.Contains(s, old) {
		t.Fatalf("%s does not contain %q", path, old)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(s, old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestGenerateCheckCatchesHandEdit: a generated file edited by hand fails
// make test's generation check, whatever headers the machine has.
func TestGenerateCheckCatchesHandEdit(t *testing.T) {
	dir := copyGenerator(t)
	// The value of one constant, however gofmt aligned its line.
	path := filepath.Join(dir, "zconsts_linux.go")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`IB_UVERBS_WR_FLUSH +=`).Find(b)
	if line == nil {
		t.Fatalf("%s has no IB_UVERBS_WR_FLUSH", path)
	}
	edit(t, path, string(line)+" 0xe", string(line)+" 0xf")
	err, stderr := runCheck(t, dir)
	if err == nil {
		t.Fatalf("mkabi.sh -check passed on a hand-edited zconsts_linux.go; stderr:\n%s", stderr)
	}
	if !strings.Contains(stderr, "not edited by hand") {
		t.Errorf("mkabi.sh -check failed with %v but did not say why:\n%s", err, stderr)
	}
}

// TestGenerateCheckCatchesStaleInput: a struct added to the godefs input
// without regenerating fails the check.
func TestGenerateCheckCatchesStaleInput(t *testing.T) {
	dir := copyGenerator(t)
	edit(t, filepath.Join(dir, "types_linux.go"), "SiwCqCtrl         C.struct_siw_cq_ctrl", "SiwCqCtrl         C.struct_siw_cq_ctrl\n\tSiwUrespAllocCtx2 C.struct_siw_uresp_alloc_ctx")
	err, stderr := runCheck(t, dir)
	if err == nil {
		t.Fatalf("mkabi.sh -check passed with an input changed after generation; stderr:\n%s", stderr)
	}
	if !strings.Contains(stderr, "run make generate") {
		t.Errorf("mkabi.sh -check failed with %v but did not say why:\n%s", err, stderr)
	}
}
