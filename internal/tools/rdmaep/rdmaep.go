// Package rdmaep holds what goverbs rdma_server and rdma_client share: the
// QP both C programs ask rdma_create_ep for, their message size, and their
// getopt and perror conventions.
package rdmaep

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/goverbs/goverbs/cm"
	"github.com/goverbs/goverbs/internal/tools/cmcommon"
	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/verbs"
)

// MsgSize is the size of the one message each side sends.
const MsgSize = 16

// Caps are the capacities rdma_server.c and rdma_client.c pass to
// rdma_create_ep: one work request and one SGE each way, 16 bytes inline.
var Caps = qp.Caps{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: MsgSize}

// Parse parses args with the getopt string spec as glibc's getopt does
// (cmcommon.Getopt), keeping each option's last value. On a bad option it
// prints getopt's message on stderr and the C tool's usage on stdout, and
// reports false. Operands are ignored, as by the C tools.
func Parse(args []string, spec string, stdout, stderr io.Writer, prog, usage string) (map[byte]string, bool) {
	parsed, _ := cmcommon.Getopt(args, spec)
	opts := map[byte]string{}
	for _, o := range parsed {
		if o.Opt == '?' {
			cmcommon.GetoptError(&cmcommon.Out{W: stderr}, prog, o)
			fmt.Fprintf(stdout, "usage: %s\n%s", prog, usage)
			return nil, false
		}
		opts[o.Opt] = o.Arg
	}
	return opts, true
}

// Perror returns a function that prints "what: error" on w as perror(3)
// does (the error's errno in C's words where there is one) and returns
// -1, the C programs' failure value.
func Perror(w io.Writer) func(what string, err error) int {
	return func(what string, err error) int {
		fmt.Fprintf(w, "%s: %s\n", what, cmcommon.Strerror(err))
		return -1
	}
}

// Main is the C programs' main: it parses args (spec, usage: see Parse),
// prints "PROG: start", runs run with the options (interrupted by
// SIGINT), prints "PROG: end N" with run's result and returns it as the
// exit status, as C's return from main does.
func Main(prog string, args []string, spec, usage string, stdout, stderr io.Writer, run func(ctx context.Context, opts map[byte]string) int) int {
	opts, ok := Parse(args, spec, stdout, stderr, "goverbs "+prog, usage)
	if !ok {
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	fmt.Fprintf(stdout, "%s: start\n", prog)
	ret := run(ctx, opts)
	fmt.Fprintf(stdout, "%s: end %d\n", prog, ret)
	return ret & 0xff
}

// Messages are the two 16-byte messages of one side, registered together
// (rdma_reg_msgs), and how they are sent.
type Messages struct {
	MR         *mr.MR
	Recv, Send []byte
	// Flags has verbs.SendInline when the QP takes 16 bytes inline (then
	// SendMR is nil, as the C programs pass no MR for an inline send).
	Flags  verbs.SendFlags
	SendMR *mr.MR
}

// NewMessages checks the inline size the QP got, as the C programs do
// (printing their line when it is too small), and registers the messages on
// the endpoint's PD. Close the MR when done.
func NewMessages(prog string, e *cm.Queues, stdout io.Writer) (*Messages, error) {
	m := &Messages{}
	if e.QP().Caps().MaxInlineData >= MsgSize {
		m.Flags = verbs.SendInline
	} else {
		fmt.Fprintf(stdout, "%s: device doesn't support IBV_SEND_INLINE, using sge sends\n", prog)
	}
	var err error
	if m.MR, err = mr.New(e.PD(), 2*MsgSize, mr.LocalWrite); err != nil {
		return nil, err
	}
	m.Recv, m.Send = m.MR.Bytes()[:MsgSize], m.MR.Bytes()[MsgSize:]
	if m.Flags&verbs.SendInline == 0 {
		m.SendMR = m.MR
	}
	return m, nil
}
