// Command goverbs is goverbs' command-line tool: one static binary with
// subcommands modelled on rdma-core's tools.
//
//	goverbs devinfo [-d DEV] [-i PORT] [-l] [-v]   like ibv_devinfo
//	goverbs rxe add NAME NETDEV                    like rdma link add NAME type rxe netdev NETDEV
//	goverbs rxe del NAME                           like rdma link delete NAME
//	goverbs rxe list                               the rxe devices and their netdevs
package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/goverbs/goverbs/verbs"
)

type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

var commands = map[string]command{
	"devinfo":  {"print device and port attributes, like ibv_devinfo", runDevinfo},
	"pingpong": {"RC/UC/UD/SRQ ping-pong, like ibv_{rc,uc,ud,srq}_pingpong", runPingpong},
	"rxe":      {"add, delete and list Soft-RoCE (rxe) devices over RDMA netlink", runRXE},
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

// errorf prints a "goverbs CMD: ..." line.
func errorf(w io.Writer, cmd, format string, args ...any) {
	fmt.Fprintf(w, "goverbs %s: %s\n", cmd, strings.TrimSpace(fmt.Sprintf(format, args...)))
}

// pickDevice is how the C tools choose a device: the one named, or the
// first listed when no name is given; nil when there is none.
func pickDevice(devs []verbs.Device, name string) *verbs.Device {
	for i := range devs {
		if name == "" || devs[i].Name == name {
			return &devs[i]
		}
	}
	return nil
}
