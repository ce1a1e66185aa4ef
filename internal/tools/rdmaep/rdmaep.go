// Package rdmaep holds what goverbs rdma_server and rdma_client share: the
// QP both C programs ask rdma_create_ep for, their message size, and their
// getopt and perror conventions.
package rdmaep

import (
	"fmt"
	"io"
	"strings"

	"github.com/goverbs/goverbs/internal/tools/cmcommon"
	"github.com/goverbs/goverbs/qp"
)

// MsgSize is the size of the one message each side sends.
const MsgSize = 16

// Caps are the capacities rdma_server.c and rdma_client.c pass to
// rdma_create_ep: one work request and one SGE each way, 16 bytes inline.
var Caps = qp.Caps{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: MsgSize}

// Parse parses args with the getopt string spec (letters, each followed by
// ':' as all of these take an argument) as glibc's getopt does: -p7471 or
// -p 7471, bundling not needed. On a bad option it prints getopt's message
// on stderr and the C tool's usage on stdout, and reports false.
func Parse(args []string, spec string, stdout, stderr io.Writer, prog, usage string) (map[byte]string, bool) {
	opts := map[byte]string{}
	bad := func(format string, a ...any) (map[byte]string, bool) {
		fmt.Fprintf(stderr, format, a...)
		fmt.Fprintf(stdout, "usage: %s\n%s", prog, usage)
		return nil, false
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if len(a) < 2 || a[0] != '-' {
			continue // operands are ignored, as by the C tools
		}
		c := a[1]
		if !strings.ContainsRune(strings.ReplaceAll(spec, ":", ""), rune(c)) {
			return bad("%s: invalid option -- '%c'\n", prog, c)
		}
		switch {
		case len(a) > 2:
			opts[c] = a[2:]
		case i+1 < len(args):
			i++
			opts[c] = args[i]
		default:
			return bad("%s: option requires an argument -- '%c'\n", prog, c)
		}
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
