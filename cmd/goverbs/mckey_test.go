package main

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/verbs"
)

// ---------------------------------------------------------------- mckey --

// mckeyLines is what mckey prints in a successful run of conns IDs.
func mckeyLines(sender bool, conns int, group string, count int) []string {
	role, data := "server", "receiving data transfers"
	if sender {
		role, data = "client", "initiating data transfers"
	}
	lines := []string{"mckey: starting " + role, "mckey: joining"}
	for range conns {
		lines = append(lines, "mckey: joined dgid: ::ffff:"+group+" mlid 0x0 sl 0")
	}
	if count > 0 {
		lines = append(lines, data, "data transfers complete")
	}
	return append(lines, "test complete", "return status 0")
}

// mckeyRun runs a receiver and then a sender of the same group, each end
// the C tool or ours, and checks what both print. The receiver finishes
// only once each of its IDs has received count messages; it must join
// before the sender's three-second pause ends.
func mckeyRun(t *testing.T, recvImpl, sendImpl string, recvArgs, sendArgs []string, conns int, group string, count int) {
	t.Helper()
	recv := cmStart(t, cmLineBuffered(recvImpl), "mckey", recvArgs...)
	if _, err := recv.WaitReady("receiver joined", listenWithin, func() bool {
		return strings.Contains(recv.Stdout.String(), "mckey: joined")
	}); err != nil {
		t.Fatal(err)
	}
	// UD multicast is unreliable, and rdma-core's sender drops what is
	// still queued when it exits (see cSenderFactor): while the receiver
	// still waits 5 s after a C sender ended, another C sender runs, up
	// to cSenderRuns in all. Ours sends exactly -C once.
	var send *cmProc
	for try := 1; ; try++ {
		send = cmStart(t, sendImpl, "mckey", sendArgs...)
		if err := send.Wait(); err != nil {
			t.Fatalf("sender: %v\n\nreceiver: %v", send, recv)
		}
		if sendImpl != "c" || try == cSenderRuns {
			break
		}
		select {
		case <-recv.Done():
		case <-time.After(5 * time.Second):
			t.Logf("the receiver still waits 5 s after C sender run %d ended; running the C sender again", try)
			continue
		}
		break
	}
	if err := recv.Wait(); err != nil {
		t.Fatalf("receiver: %v\n\nsender: %v", recv, send)
	}
	cmCheckLines(t, recv, mckeyLines(false, conns, group, count))
	cmCheckLines(t, send, mckeyLines(true, conns, group, count))
}

// cSenderFactor is how many times more messages rdma-core's mckey sends
// than the receiver waits for. The C sender posts its sends unsignaled,
// then leaves the group and destroys its QP at once; 6.12's rxe transmits
// from a workqueue after the doorbell (docs/kernels.md, 1), so what is
// still queued then is dropped: with as many sends as the receiver waits
// for, it waited for ever in most runs (C to C too; 4 times as many were
// not enough either). Only the sends transmitted while the C tool is
// still posting arrive, so it posts many. Ours waits until its sends have
// left (qp.QP.WaitSent) and sends exactly -C. Even so, on 6.12 a Go
// receiver waited for ever for one C sender in 2 of 15 such runs (go test
// -count=3; never on 6.1): mckeyRun runs the C sender again while the
// receiver still waits.
const cSenderFactor = 50

// cSenderRuns is how many times at most the C sender runs for one receiver
// (mckeyRun).
const cSenderRuns = 10

// The receiver (-b the test device's address) and the sender (-b the
// other end of its veth pair), each the C tool or ours, on their own
// group per run; the send-only join (-o). The receiver ends only once
// each of its IDs has received its -C messages ("data transfers
// complete").
func TestMckeyInterop(t *testing.T) {
	dev := testutil.Device(t)
	testutil.SkipUnlessCap(t, dev.NodeType.Transport() != verbs.TransportIWARP, "multicast (transport iWARP has no UD QPs and no multicast)")
	recvAddr, sendAddr := testutil.Addr(t), testutil.MulticastPeerAddr(t)
	g := 0
	for _, tc := range []struct {
		args     []string
		sendOnly bool
		conns    int
		count    int
	}{
		{nil, false, 1, 10},
		{[]string{"-S", "1024"}, false, 1, 10},
		{[]string{"-c", "2", "-S", "50"}, false, 2, 3},
		{nil, true, 1, 5},
		{nil, false, 1, 0},
	} {
		// C to C is rdma-core's business, and its sender's losses (see
		// cSenderFactor) made it fail once in 20 runs on 6.12: left out.
		for _, impls := range [][2]string{{"go", "go"}, {"go", "c"}, {"c", "go"}} { // receiver, sender
			g++
			group := fmt.Sprintf("239.77.0.%d", g)
			name := fmt.Sprintf("%s-recv/%s-send/C%d%s", impls[0], impls[1], tc.count, strings.Join(tc.args, ""))
			if tc.sendOnly {
				name += "-o"
			}
			t.Run(name, func(t *testing.T) {
				sent := tc.count
				if impls[1] == "c" {
					sent *= cSenderFactor
				}
				recvArgs := append([]string{"-m", group, "-b", recvAddr, "-C", strconv.Itoa(tc.count)}, tc.args...)
				sendArgs := append([]string{"-m", group, "-b", sendAddr, "-s", "-C", strconv.Itoa(sent)}, tc.args...)
				if tc.sendOnly {
					sendArgs = append(sendArgs, "-o")
				}
				mckeyRun(t, impls[0], impls[1], recvArgs, sendArgs, tc.conns, group, tc.count)
			})
		}
	}
}

// What goverbs mckey refuses on the command line, as the C tool does or
// where it has no counterpart (-M, -l, the IPoIB port space).
func TestMckeyArgs(t *testing.T) {
	for _, c := range []struct {
		args   []string
		stdout string
		stderr string
	}{
		{[]string{"-x"}, "usage: goverbs mckey\n\t-m multicast_address\n", "goverbs mckey: invalid option -- 'x'\n"},
		{[]string{"-m"}, "[-l join without multicast loopback]\n", "option requires an argument -- 'm'"},
		{[]string{"-m", "239.1.1.1", "-p", "2"}, "", "port space not supported"},
		{[]string{"-m", "239.1.1.1", "-l"}, "", "-l: joining without multicast loopback is not supported"},
		{[]string{"-M", "ff12::1"}, "unmapped multicast address requires binding to source address\n", ""},
		{[]string{"-M", "ff12::1", "-b", "169.254.77.1"}, "", "AF_IB (unmapped) multicast addresses are not supported"},
		{[]string{"-C", "many"}, "", "invalid -C \"many\""},
		{nil, "", "-m multicast_address is required"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			rc := run(append([]string{"mckey"}, c.args...), &stdout, &stderr)
			if rc != 1 || !strings.Contains(stdout.String(), c.stdout) || !strings.Contains(stderr.String(), c.stderr) {
				t.Errorf("exit %d, stdout %q, stderr %q; want 1, %q, %q", rc, stdout.String(), stderr.String(), c.stdout, c.stderr)
			}
		})
	}
}
