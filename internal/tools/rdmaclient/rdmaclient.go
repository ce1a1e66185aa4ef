// Package rdmaclient is goverbs rdma_client: rdma-core's rdma_client
// (librdmacm/examples/rdma_client.c, rdma-core 44), the active side of the
// smallest program built on rdma_getaddrinfo, rdma_create_ep and the
// rdma_verbs.h helpers. Either end may be the C tool (rdma_server).
//
// It resolves -s (127.0.0.1) port -p (7471) into an endpoint with a QP,
// posts a 16-byte receive, connects, sends 16 bytes (inline when the QP
// allows 16 bytes inline), waits for that send and then for the server's
// answer, and disconnects. Its output is the C tool's: "rdma_client:
// start" and "rdma_client: end N", N 0 on success, with perror-style lines
// on standard error for a failed step.
package rdmaclient

import (
	"context"
	"fmt"
	"io"

	"github.com/goverbs/goverbs/cm"
	"github.com/goverbs/goverbs/internal/tools/rdmaep"
	"github.com/goverbs/goverbs/verbs"
)

// Summary is goverbs rdma_client's line in goverbs' command list.
const Summary = "one RC message each way over rdma_create_ep, like rdma_client"

// Main is goverbs rdma_client: args are its arguments after the
// subcommand; it returns the exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	return rdmaep.Main("rdma_client", args, "s:p:", "\t[-s server_address]\n\t[-p port_number]\n", stdout, stderr, func(ctx context.Context, opts map[byte]string) int {
		server, port := "127.0.0.1", "7471"
		if s, ok := opts['s']; ok {
			server = s
		}
		if p, ok := opts['p']; ok {
			port = p
		}
		return run(ctx, server, port, stdout, stderr)
	})
}

func run(ctx context.Context, server, port string, stdout, stderr io.Writer) int {
	perror := rdmaep.Perror(stderr)
	info, err := cm.GetAddrInfo(ctx, server, port, &cm.Hints{PortSpace: cm.TCP})
	if err != nil {
		fmt.Fprintf(stdout, "rdma_getaddrinfo: %v\n", err)
		return -1
	}
	ep, err := cm.CreateEP(ctx, info, nil, &rdmaep.Caps)
	if err != nil {
		return perror("rdma_create_ep", err)
	}
	defer ep.Close()
	e := ep.Queues()
	m, err := rdmaep.NewMessages("rdma_client", e, stdout)
	if err != nil {
		return perror("rdma_reg_msgs for recv_msg", err)
	}
	defer m.MR.Close()
	if err := e.PostRecv(0, m.Recv, m.MR); err != nil {
		return perror("rdma_post_recv", err)
	}
	if _, err := ep.ID().Connect(ctx, cm.ConnParam{}); err != nil {
		return perror("rdma_connect", err)
	}
	defer ep.ID().Disconnect()
	if err := e.PostSend(0, m.Send, m.SendMR, m.Flags|verbs.SendSignaled); err != nil {
		return perror("rdma_post_send", err)
	}
	if _, err := e.GetSendComp(ctx); err != nil {
		return perror("rdma_get_send_comp", err)
	}
	if _, err := e.GetRecvComp(ctx); err != nil {
		return perror("rdma_get_recv_comp", err)
	}
	return 0
}
