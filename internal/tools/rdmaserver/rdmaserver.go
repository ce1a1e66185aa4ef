// Package rdmaserver is goverbs rdma_server: rdma-core's rdma_server
// (librdmacm/examples/rdma_server.c, rdma-core 44), the passive side of the
// smallest program built on rdma_getaddrinfo, rdma_create_ep and the
// rdma_verbs.h helpers. Either end may be the C tool (rdma_client).
//
// It listens on the wildcard address at port -p (7471), takes one
// connection request, posts a 16-byte receive, accepts, waits for the
// client's 16-byte message, answers with 16 bytes (inline when the QP
// allows 16 bytes inline, as the C tool checks), waits for that send to
// complete and disconnects. Its output is the C tool's: "rdma_server:
// start" and "rdma_server: end N", N 0 on success, with perror-style lines
// on standard error for a failed step.
package rdmaserver

import (
	"context"
	"fmt"
	"io"

	"github.com/goverbs/goverbs/cm"
	"github.com/goverbs/goverbs/internal/tools/rdmaep"
	"github.com/goverbs/goverbs/verbs"
)

// Summary is goverbs rdma_server's line in goverbs' command list.
const Summary = "one RC message each way over rdma_create_ep, like rdma_server"

// Main is goverbs rdma_server: args are its arguments after the
// subcommand; it returns the exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	return rdmaep.Main("rdma_server", args, "p:", "\t[-p port_number]\n", stdout, stderr, func(ctx context.Context, opts map[byte]string) int {
		port := "7471"
		if p, ok := opts['p']; ok {
			port = p
		}
		return run(ctx, port, stdout, stderr)
	})
}

func run(ctx context.Context, port string, stdout, stderr io.Writer) int {
	perror := rdmaep.Perror(stderr)
	info, err := cm.GetAddrInfo(ctx, "", port, &cm.Hints{Flags: cm.AIPassive, PortSpace: cm.TCP})
	if err != nil {
		fmt.Fprintf(stdout, "rdma_getaddrinfo: %v\n", err)
		return -1
	}
	listen, err := cm.CreateEP(ctx, info, nil, &rdmaep.Caps)
	if err != nil {
		return perror("rdma_create_ep", err)
	}
	defer listen.Close()
	if err := listen.Listen(0); err != nil {
		return perror("rdma_listen", err)
	}
	conn, _, err := listen.GetRequest(ctx)
	if err != nil {
		return perror("rdma_get_request", err)
	}
	defer conn.Close()
	e := conn.Queues()
	m, err := rdmaep.NewMessages("rdma_server", e, stdout)
	if err != nil {
		return perror("rdma_reg_msgs for recv_msg", err)
	}
	defer m.MR.Close()
	if err := e.PostRecv(0, m.Recv, m.MR); err != nil {
		return perror("rdma_post_recv", err)
	}
	if err := conn.ID().Accept(ctx, cm.ConnParam{}); err != nil {
		return perror("rdma_accept", err)
	}
	defer conn.ID().Disconnect()
	if _, err := e.GetRecvComp(ctx); err != nil {
		return perror("rdma_get_recv_comp", err)
	}
	if err := e.PostSend(0, m.Send, m.SendMR, m.Flags|verbs.SendSignaled); err != nil {
		return perror("rdma_post_send", err)
	}
	if _, err := e.GetSendComp(ctx); err != nil {
		return perror("rdma_get_send_comp", err)
	}
	return 0
}
