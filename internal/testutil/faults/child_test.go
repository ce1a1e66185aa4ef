package faults

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/verbs"
)

// serveChild serves a stream from a child process (this test binary again,
// with envChild set) so that a can have it killed mid-stream, then reports
// to a whether it died of SIGKILL and whether b's kernel released its
// objects.
func serveChild(t *testing.T, c *ctl, su setup, base baseline) {
	rep := runChild(t, c, su, base, nil)
	if err := c.send(rep); err != nil {
		t.Error(err)
	}
}

// runChild runs the child process, which inherits the control connection
// as fd 3 and extra (if not nil) as fd 4, waits for its death and returns
// what serveChild reports to a.
func runChild(t *testing.T, c *ctl, su setup, base baseline, extra *os.File) report {
	f, err := c.c.(*net.TCPConn).File()
	if err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(su)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"="+string(js))
	cmd.ExtraFiles = []*os.File{f} // fd 3
	if extra != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, extra) // fd 4
	}
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	err = cmd.Run()
	f.Close()
	var rep report
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			rep.Killed = true
		}
	}
	if !rep.Killed {
		rep.Err = fmt.Sprintf("peer process: %v, want death by SIGKILL", err)
	}
	// The kernel releases the dead process's objects when its files close.
	base.check(t, "b (after the peer process died)")
	rep.Baseline = base.diff(t)
	if rep.Err != "" {
		t.Error(rep.Err)
	}
	return rep
}

// childMain is the child process: the responder on the inherited control
// connection. It returns only if a never killed it.
func childMain() int {
	var su setup
	if err := json.Unmarshal([]byte(os.Getenv(envChild)), &su); err != nil {
		fmt.Fprintln(os.Stderr, "faults child:", err)
		return 2
	}
	conn, err := net.FileConn(os.NewFile(3, "control"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults child:", err)
		return 2
	}
	dev, err := verbs.LookupDevice(os.Getenv(testutil.EnvDevice))
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults child:", err)
		return 2
	}
	switch su.Mode {
	case "cmkill":
		err = cmRespond(newCtl(conn), su, os.Getenv(testutil.EnvAddr))
	case "rpmakill":
		err = rpmaChild(newCtl(conn), su)
	case "rskill":
		err = rsRespond(newCtl(conn), os.Getenv(testutil.EnvAddr))
	default:
		err = respond(newCtl(conn), su, dev, os.Getenv(testutil.EnvAddr))
	}
	fmt.Fprintln(os.Stderr, "faults child: not killed:", err)
	return 1
}
