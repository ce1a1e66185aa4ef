package main

import (
	"fmt"
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
	deadline := time.Now().Add(90 * time.Second)
	for !strings.Contains(recv.Stdout.String(), "mckey: joined") {
		if recv.Exited() {
			t.Fatalf("receiver exited before joining: %v", recv)
		}
		if time.Now().After(deadline) {
			t.Fatalf("receiver not joined after 90 s: %v", recv)
		}
		time.Sleep(20 * time.Millisecond)
	}
	send := cmStart(t, sendImpl, "mckey", sendArgs...)
	if err := send.Wait(); err != nil {
		t.Fatalf("sender: %v\n\nreceiver: %v", send, recv)
	}
	if err := recv.Wait(); err != nil {
		t.Fatalf("receiver: %v\n\nsender: %v", recv, send)
	}
	cmCheckLines(t, recv, mckeyLines(false, conns, group, count))
	cmCheckLines(t, send, mckeyLines(true, conns, group, count))
}

// The receiver (-b the test device's address) and the sender (-b the
// other end of its veth pair), each the C tool or ours, on their own
// group per run; the send-only join (-o) where the kernel allows it.
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
		{[]string{"-C", "30", "-S", "1024"}, false, 1, 30},
		{[]string{"-c", "2", "-C", "3", "-S", "50"}, false, 2, 3},
		{[]string{"-C", "5"}, true, 1, 5},
		{[]string{"-C", "0"}, false, 1, 0},
	} {
		for _, impls := range cmImplPairs { // receiver, sender
			g++
			group := fmt.Sprintf("239.77.0.%d", g)
			name := fmt.Sprintf("%s-recv/%s-send/%s", impls[0], impls[1], strings.Join(tc.args, ""))
			if tc.sendOnly {
				name += "-o"
			}
			t.Run(name, func(t *testing.T) {
				recvArgs := append([]string{"-m", group, "-b", recvAddr}, tc.args...)
				sendArgs := append([]string{"-m", group, "-b", sendAddr, "-s"}, tc.args...)
				if tc.sendOnly {
					sendArgs = append(sendArgs, "-o")
				}
				mckeyRun(t, impls[0], impls[1], recvArgs, sendArgs, tc.conns, group, tc.count)
			})
		}
	}
}
