package main

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/internal/testutil"
)

// rdma_server and rdma_client (rdma_getaddrinfo, rdma_create_ep and the
// rdma_verbs.h helpers), each end the C program or ours, in all four
// pairings: one 16-byte message each way, and the C programs' output.
func TestRdmaServerClientInterop(t *testing.T) {
	addr := testutil.Addr(t)
	for _, impls := range cmImplPairs {
		t.Run(fmt.Sprintf("%s-server/%s-client", impls[0], impls[1]), func(t *testing.T) {
			port := strconv.Itoa(cmPort())
			server, client := cmPair(t, "rdma_server", "TCP", cmNextPort, impls[0], impls[1],
				[]string{"-p", port}, []string{"-s", addr, "-p", port})
			cmCheckLines(t, server, []string{"rdma_server: start", "rdma_server: end 0"})
			cmCheckLines(t, client, []string{"rdma_client: start", "rdma_client: end 0"})
		})
	}
}

// Bad options get getopt's words and the C programs' usage, exit 1.
func TestRdmaServerClientArgs(t *testing.T) {
	for _, c := range []struct {
		args   []string
		stdout string
		stderr string
	}{
		{[]string{"rdma_server", "-x"}, "usage: goverbs rdma_server\n\t[-p port_number]\n", "goverbs rdma_server: invalid option -- 'x'\n"},
		{[]string{"rdma_server", "-p"}, "usage: goverbs rdma_server\n", "option requires an argument -- 'p'\n"},
		{[]string{"rdma_client", "-q", "1"}, "usage: goverbs rdma_client\n\t[-s server_address]\n\t[-p port_number]\n", "invalid option -- 'q'\n"},
		{[]string{"rdma_client", "-s"}, "usage: goverbs rdma_client\n", "option requires an argument -- 's'\n"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if rc := run(c.args, &stdout, &stderr); rc != 1 || !strings.Contains(stdout.String(), c.stdout) || !strings.Contains(stderr.String(), c.stderr) {
				t.Errorf("exit %d, stdout %q, stderr %q; want 1, %q, %q", rc, stdout.String(), stderr.String(), c.stdout, c.stderr)
			}
		})
	}
}

// A client with nobody listening fails the step the C program fails
// (rdma_connect, or on iWARP the same call refused at once) and says so.
func TestRdmaClientNoServer(t *testing.T) {
	addr := testutil.Addr(t)
	port := strconv.Itoa(cmPort())
	for _, impl := range []string{"go", "c"} {
		t.Run(impl, func(t *testing.T) {
			p := cmStart(t, impl, "rdma_client", "-s", addr, "-p", port)
			p.Wait()
			if p.Status() != 255 {
				t.Errorf("exit %d, want 255\n%v", p.Status(), p)
			}
			if got := cmLines(p.Stdout.String()); len(got) != 2 || got[0] != "rdma_client: start" || got[1] != "rdma_client: end -1" {
				t.Errorf("stdout %q", got)
			}
			if !strings.HasPrefix(p.Stderr.String(), "rdma_connect: ") {
				t.Errorf("stderr %q, want rdma_connect's perror", p.Stderr.String())
			}
		})
	}
}
