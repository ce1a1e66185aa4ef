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
	"os"
	"os/signal"

	"github.com/goverbs/goverbs/cm"
	"github.com/goverbs/goverbs/internal/tools/rdmaep"
	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/verbs"
)

// Summary is goverbs rdma_client's line in goverbs' command list.
const Summary = "one RC message each way over rdma_create_ep, like rdma_client"

// Main is goverbs rdma_client: args are its arguments after the
// subcommand; it returns the exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	opts, ok := rdmaep.Parse(args, "s:p:", stdout, stderr, "goverbs rdma_client", "\t[-s server_address]\n\t[-p port_number]\n")
	if !ok {
		return 1
	}
	server, port := "127.0.0.1", "7471"
	if s, ok := opts['s']; ok {
		server = s
	}
	if p, ok := opts['p']; ok {
		port = p
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	fmt.Fprintf(stdout, "rdma_client: start\n")
	ret := run(ctx, server, port, stdout, stderr)
	fmt.Fprintf(stdout, "rdma_client: end %d\n", ret)
	return ret & 0xff
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
	e := ep.Endpoint()
	var flags verbs.SendFlags
	if e.QP().Caps().MaxInlineData >= rdmaep.MsgSize {
		flags = verbs.SendInline
	} else {
		fmt.Fprintf(stdout, "rdma_client: device doesn't support IBV_SEND_INLINE, using sge sends\n")
	}
	msgs, err := mr.New(e.PD(), 2*rdmaep.MsgSize, mr.LocalWrite)
	if err != nil {
		return perror("rdma_reg_msgs for recv_msg", err)
	}
	defer msgs.Close()
	recvMsg, sendMsg := msgs.Bytes()[:rdmaep.MsgSize], msgs.Bytes()[rdmaep.MsgSize:]
	if err := e.PostRecv(0, recvMsg, msgs); err != nil {
		return perror("rdma_post_recv", err)
	}
	if _, err := ep.ID().Connect(ctx, cm.ConnParam{}); err != nil {
		return perror("rdma_connect", err)
	}
	defer ep.ID().Disconnect()
	sendMR := msgs
	if flags&verbs.SendInline != 0 {
		sendMR = nil
	}
	if err := e.PostSend(0, sendMsg, sendMR, flags|verbs.SendSignaled); err != nil {
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
