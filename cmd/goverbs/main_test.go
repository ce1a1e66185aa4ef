package main

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/verbs"
)

func goverbs(t *testing.T, args ...string) (stdout, stderr string, rc int) {
	t.Helper()
	var o, e bytes.Buffer
	rc = run(args, &o, &e)
	return o.String(), e.String(), rc
}

func runTool(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(testutil.LookPath(t, name), args...).Output()
	if err != nil {
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return string(out)
}

// goverbs devinfo must print what rdma-core's ibv_devinfo prints, field for
// field, in every mode.
func TestDevinfoMatchesIbvDevinfo(t *testing.T) {
	dev := testutil.Device(t)
	for _, args := range [][]string{
		{"-d", dev.Name},
		{"-v", "-d", dev.Name},
		{"-d", dev.Name, "-i", "1"},
		{"-l"},
		{"-v"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			want := runTool(t, "ibv_devinfo", args...)
			got, stderr, rc := goverbs(t, append([]string{"devinfo"}, args...)...)
			if rc != 0 {
				t.Fatalf("goverbs devinfo %v: exit %d: %s", args, rc, stderr)
			}
			if diff := cmp.Diff(strings.Split(want, "\n"), strings.Split(got, "\n")); diff != "" {
				t.Errorf("goverbs devinfo %v differs from ibv_devinfo (-ibv_devinfo +goverbs):\n%s", args, diff)
			}
		})
	}
}

func TestDevinfoErrors(t *testing.T) {
	dev := testutil.Device(t)
	if _, stderr, rc := goverbs(t, "devinfo", "-d", "nosuchdev9"); rc == 0 || !strings.Contains(stderr, "IB device 'nosuchdev9' wasn't found") {
		t.Errorf("missing device: rc %d, %q", rc, stderr)
	}
	if _, stderr, rc := goverbs(t, "devinfo", "-d", dev.Name, "-i", "7"); rc != 4 || !strings.Contains(stderr, "Invalid port") {
		t.Errorf("invalid port: rc %d, %q", rc, stderr)
	}
}

func TestUsage(t *testing.T) {
	if _, _, rc := goverbs(t); rc != 2 {
		t.Errorf("no command: rc %d", rc)
	}
	if _, stderr, rc := goverbs(t, "frobnicate"); rc != 2 || !strings.Contains(stderr, "unknown command") {
		t.Errorf("unknown command: rc %d %q", rc, stderr)
	}
	if _, _, rc := goverbs(t, "rxe", "add", "onlyname"); rc != 2 {
		t.Errorf("rxe add with one argument: rc %d", rc)
	}
	if _, _, rc := goverbs(t, "devinfo", "-x"); rc != 2 {
		t.Errorf("devinfo -x: rc %d", rc)
	}
}

// goverbs rxe list prints what "rdma link show" prints for rxe devices.
func TestRXEListMatchesRdmaLink(t *testing.T) {
	testutil.Device(t)
	want := runTool(t, "rdma", "link", "show")
	got, stderr, rc := goverbs(t, "rxe", "list")
	if rc != 0 {
		t.Fatalf("rxe list: %d %s", rc, stderr)
	}
	var wantRXE []string
	links, err := verbs.Links()
	if err != nil {
		t.Fatal(err)
	}
	rxe := map[string]bool{}
	for _, l := range links {
		if l.Driver == verbs.DriverRXE {
			rxe[l.Name] = true
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(want), "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && rxe[strings.Split(f[1], "/")[0]] {
			wantRXE = append(wantRXE, strings.TrimSpace(line))
		}
	}
	if diff := cmp.Diff(wantRXE, strings.Split(strings.TrimSpace(got), "\n")); diff != "" {
		t.Errorf("rxe list differs from rdma link show (-rdma +goverbs):\n%s", diff)
	}
}

// goverbs rxe add/del create and delete a working rxe device, and refuse
// bad requests with clear errors.
func TestRXEAddDel(t *testing.T) {
	testutil.Device(t)
	ip := testutil.LookPath(t, "ip")
	if out, err := exec.Command(ip, "link", "add", "gvtest0", "type", "veth", "peer", "name", "gvtest1").CombinedOutput(); err != nil {
		t.Fatalf("creating veth pair: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command(ip, "link", "del", "gvtest0").Run() })
	exec.Command(ip, "link", "set", "gvtest0", "up").Run()

	if _, stderr, rc := goverbs(t, "rxe", "add", "gvrxe0", "gvtest0"); rc != 0 {
		t.Fatalf("rxe add: %d %s", rc, stderr)
	}
	t.Cleanup(func() { verbs.DeleteLink("gvrxe0") })
	list, _, _ := goverbs(t, "rxe", "list")
	if !strings.Contains(list, "link gvrxe0/1 ") || !strings.Contains(list, "netdev gvtest0") {
		t.Fatalf("rxe list after add:\n%s", list)
	}
	if !strings.Contains(runTool(t, "rdma", "link", "show", "gvrxe0/1"), "netdev gvtest0") {
		t.Fatal("rdma link show does not see gvrxe0")
	}
	ctx, err := verbs.Open("gvrxe0")
	if err != nil {
		t.Fatalf("opening the new device: %v", err)
	}
	ctx.Close()

	if _, stderr, rc := goverbs(t, "rxe", "add", "gvrxe0", "gvtest0"); rc == 0 || !strings.Contains(stderr, "exists") {
		t.Errorf("adding gvrxe0 twice: rc %d %q", rc, stderr)
	}
	if _, stderr, rc := goverbs(t, "rxe", "add", "gvrxe9", "nosuchnetdev"); rc == 0 || !strings.Contains(stderr, "no network device") {
		t.Errorf("adding on a missing netdev: rc %d %q", rc, stderr)
	}
	if _, stderr, rc := goverbs(t, "rxe", "del", "gvrxe0"); rc != 0 {
		t.Fatalf("rxe del: %d %s", rc, stderr)
	}
	if _, err := verbs.LookupDevice("gvrxe0"); err == nil {
		t.Fatal("gvrxe0 still exists after del")
	}
	if _, stderr, rc := goverbs(t, "rxe", "del", "gvrxe0"); rc == 0 || !strings.Contains(stderr, "no such RDMA device") {
		t.Errorf("deleting a missing device: rc %d %q", rc, stderr)
	}
}
