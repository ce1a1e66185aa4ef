// Command goverbs is goverbs' command-line tool: one static binary with
// subcommands modelled on rdma-core's, librdmacm's and perftest's tools,
// whose wire protocols and output they follow, so that either end of each
// can be the C program or ours.
//
//	goverbs devinfo [-d DEV] [-i PORT] [-l] [-v]   like ibv_devinfo
//	goverbs rxe add NAME NETDEV                    like rdma link add NAME type rxe netdev NETDEV
//	goverbs rxe del NAME                           like rdma link delete NAME
//	goverbs rxe list                               the rxe devices and their netdevs
//	goverbs pingpong -t rc|uc|ud|srq [...]         like ibv_{rc,uc,ud,srq}_pingpong
//	goverbs perf TEST [...]                        like perftest's ib_*_{bw,lat}
//	goverbs rping | udaddy | ucmatose | mckey [...] like librdmacm's examples
//	goverbs rdma_server | rdma_client [...]        likewise (rdma_create_ep)
//	goverbs cmtime [...]                           likewise: connection set-up timing
//	goverbs rstream | riostream | rcopy [...]      like librdmacm's rsocket examples
//
// This file only routes: each tool lives in its own package,
// internal/tools/NAME, which exports Main and Summary.
package main

import (
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/goverbs/goverbs/internal/tools/cmtime"
	"github.com/goverbs/goverbs/internal/tools/devinfo"
	"github.com/goverbs/goverbs/internal/tools/mckey"
	"github.com/goverbs/goverbs/internal/tools/perf"
	"github.com/goverbs/goverbs/internal/tools/pingpong"
	"github.com/goverbs/goverbs/internal/tools/rcopy"
	"github.com/goverbs/goverbs/internal/tools/rdmaclient"
	"github.com/goverbs/goverbs/internal/tools/rdmaserver"
	"github.com/goverbs/goverbs/internal/tools/riostream"
	"github.com/goverbs/goverbs/internal/tools/rping"
	"github.com/goverbs/goverbs/internal/tools/rstream"
	"github.com/goverbs/goverbs/internal/tools/rxe"
	"github.com/goverbs/goverbs/internal/tools/ucmatose"
	"github.com/goverbs/goverbs/internal/tools/udaddy"
)

type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

// commands are the subcommands, by name.
var commands = map[string]command{
	"cmtime":      {cmtime.Summary, cmtime.Main},
	"devinfo":     {devinfo.Summary, devinfo.Main},
	"mckey":       {mckey.Summary, mckey.Main},
	"perf":        {perf.Summary, perf.Main},
	"pingpong":    {pingpong.Summary, pingpong.Main},
	"rdma_client": {rdmaclient.Summary, rdmaclient.Main},
	"rdma_server": {rdmaserver.Summary, rdmaserver.Main},
	"rping":       {rping.Summary, rping.Main},
	"rxe":         {rxe.Summary, rxe.Main},
	"ucmatose":    {ucmatose.Summary, ucmatose.Main},
	"udaddy":      {udaddy.Summary, udaddy.Main},
	"rcopy":       {rcopy.Summary, rcopy.Main},
	"riostream":   {riostream.Summary, riostream.Main},
	"rstream":     {rstream.Summary, rstream.Main},
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: goverbs COMMAND [ARGS]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "goverbs: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
	return cmd.run(args[1:], stdout, stderr)
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
