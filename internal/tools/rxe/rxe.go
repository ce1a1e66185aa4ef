// Package rxe is goverbs rxe: add, delete and list Soft-RoCE (rxe)
// devices over RDMA netlink, as iproute2's rdma link does:
//
//	goverbs rxe add NAME NETDEV   like rdma link add NAME type rxe netdev NETDEV
//	goverbs rxe del NAME          like rdma link delete NAME
//	goverbs rxe list              the rxe devices and their netdevs, as rdma link show prints them
package rxe

import (
	"fmt"
	"io"

	"github.com/goverbs/goverbs/internal/tools/cli"
	"github.com/goverbs/goverbs/verbs"
)

const rxeUsage = `usage: goverbs rxe add NAME NETDEV   create rxe device NAME on network device NETDEV
       goverbs rxe del NAME          delete rxe device NAME
       goverbs rxe list              list rxe devices`

// Summary is goverbs rxe's line in goverbs' command list.
const Summary = "add, delete and list Soft-RoCE (rxe) devices over RDMA netlink"

// Main is goverbs rxe: args are its arguments after the subcommand; it
// returns the exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, rxeUsage)
		return 2
	}
	switch {
	case args[0] == "add" && len(args) == 3:
		if err := verbs.AddLink(args[1], verbs.DriverRXE, args[2]); err != nil {
			cli.Errorf(stderr, "rxe", "%v", err)
			return 1
		}
		return 0
	case args[0] == "del" && len(args) == 2:
		dev, err := verbs.LookupDevice(args[1])
		if err != nil {
			cli.Errorf(stderr, "rxe", "%v", err)
			return 1
		}
		if dev.Driver != verbs.DriverRXE {
			cli.Errorf(stderr, "rxe", "%s is a %s device, not rxe", dev.Name, dev.Driver)
			return 1
		}
		if err := verbs.DeleteLink(args[1]); err != nil {
			cli.Errorf(stderr, "rxe", "%v", err)
			return 1
		}
		return 0
	case args[0] == "list" && len(args) == 1:
		links, err := verbs.Links()
		if err != nil {
			cli.Errorf(stderr, "rxe", "%v", err)
			return 1
		}
		// The format of "rdma link show": link DEV/PORT state STATE physical_state PHYS netdev NETDEV
		for _, l := range links {
			if l.Driver != verbs.DriverRXE {
				continue
			}
			fmt.Fprintf(stdout, "link %s/%d state %s physical_state %s netdev %s\n",
				l.Name, l.Port, linkState(l.State), physState(l.PhysState), l.Netdev)
		}
		return 0
	}
	fmt.Fprintln(stderr, rxeUsage)
	return 2
}

// linkState and physState print port states the way iproute2's rdma tool
// does.
func linkState(s verbs.PortState) string {
	switch s {
	case verbs.PortNop:
		return "NOP"
	case verbs.PortDown:
		return "DOWN"
	case verbs.PortInit:
		return "INIT"
	case verbs.PortArmed:
		return "ARMED"
	case verbs.PortActive:
		return "ACTIVE"
	case verbs.PortActiveDefer:
		return "ACTIVE_DEFER"
	}
	return fmt.Sprintf("UNKNOWN(%d)", s)
}

func physState(s uint8) string {
	names := []string{"NOP", "SLEEP", "POLLING", "DISABLED", "ARMED", "LINK_UP", "LINK_ERROR_RECOVER", "PHY_TEST"}
	if int(s) < len(names) {
		return names[s]
	}
	return fmt.Sprintf("UNKNOWN(%d)", s)
}
