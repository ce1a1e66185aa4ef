// Package mckey is goverbs mckey: rdma-core's mckey
// (librdmacm/examples/mckey.c, rdma-core 44): UD datagrams to a multicast
// group joined through the RDMA connection manager. Either end may be the
// C tool.
//
// Each of -c IDs (binding to -b first, if given) resolves the group
// address -m, creates its UD QP, posts -C receives (the receiver), and
// joins the group (-o: as a send-only full member, which attaches no QP);
// the join's event gives the group's address handle, QP number and Q_Key.
// After three seconds (the C tool's pause for the subnet manager) the
// sender (-s) sends -C messages of -S bytes to the group from each ID, as
// SEND_WITH_IMM whose immediate data is its QP number; the receiver waits
// until each ID has -C completions. Then every ID leaves the group.
//
// Not supported: -M (AF_IB unmapped group addresses), -l (blocking
// multicast loopback needs IBV_QP_CREATE_BLOCK_SELF_MCAST_LB, which
// goverbs' QPs do not take), and -p 0x2 (the IPoIB port space).
package mckey

import (
	"context"
	"io"
	"net/netip"
	"strconv"
	"time"

	"github.com/goverbs/goverbs/cm"
	"github.com/goverbs/goverbs/internal/tools/cmcommon"
)

const usage = `usage: %s
	-m multicast_address
	[-M unmapped_multicast_address]
	 replaces -m and requires -b
	[-s(ender)]
	[-b bind_address]
	[-c connections]
	[-C message_count]
	[-S message_size]
	[-p port_space - %#x for UDP (default), %#x for IPOIB]
	[-o join as a send-only full-member]
	[-l join without multicast loopback]
`

// Summary is goverbs mckey's line in goverbs' command list.
const Summary = "UD multicast over the RDMA CM, like mckey"

// joinPause is the C tool's sleep(3) between joining and the transfers
// ("to give SM chance to configure switches"): it is also what gives a
// receiver started at about the same time the chance to join first.
var joinPause = 3 * time.Second

type test struct {
	*cmcommon.Test
	sender   bool
	sendOnly bool
	group    string
}

// Main is goverbs mckey: args are its arguments after the subcommand; it
// returns the exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	t := test{Test: &cmcommon.Test{Prog: "mckey", Out: &cmcommon.Out{W: stdout}, Errw: &cmcommon.Out{W: stderr}, UD: true,
		Connections: 1, Count: 10, Size: 100}}
	if st := t.parse(args); st >= 0 {
		return st
	}
	t.ConnectsLeft = t.Connections
	ch, _ := cmcommon.NewChannel(t.Errw)
	if ch == nil {
		return 1
	}
	t.Ch = ch
	t.Channels = append(t.Channels, ch)
	if err := t.AllocNodes(true); err != nil {
		t.Errw.Printf("goverbs mckey: %v\n", err)
		t.CloseChannels()
		return 1
	}
	ret := t.run()
	t.Out.Printf("test complete\n")
	t.DestroyNodes()
	t.CloseChannels()
	t.Out.Printf("return status %d\n", ret)
	return cmcommon.Exit(ret)
}

// parse reads the command line as mckey's main does; a status >= 0 means
// stop with it.
func (t *test) parse(args []string) int {
	unmapped := false
	opts, _ := cmcommon.Getopt(args, "m:M:sb:c:C:S:p:ol")
	for _, op := range opts {
		var err error
		switch op.Opt {
		case 'm':
			t.group = op.Arg
		case 'M':
			unmapped, t.group = true, op.Arg
		case 's':
			t.sender = true
		case 'b':
			t.Src = op.Arg
		case 'c':
			t.Connections, err = cmcommon.Atoi(op.Arg)
		case 'C':
			t.Count, err = cmcommon.Atoi(op.Arg)
		case 'S':
			t.Size, err = cmcommon.Atoi(op.Arg)
		case 'p':
			v, perr := strconv.ParseInt(op.Arg, 0, 32)
			if perr != nil || v != cmcommon.PSUDP {
				t.Errw.Printf("goverbs mckey: -p %s: port space not supported (only %#x, UDP)\n", op.Arg, cmcommon.PSUDP)
				return 1
			}
		case 'o':
			t.sendOnly = true
		case 'l':
			t.Errw.Printf("goverbs mckey: -l: joining without multicast loopback is not supported\n")
			return 1
		default:
			cmcommon.GetoptError(t.Errw, "goverbs mckey", op)
			t.Out.Printf(usage, "goverbs mckey", cmcommon.PSUDP, cmcommon.PSIPoIB)
			return 1
		}
		if err != nil || t.Connections < 0 || t.Count < 0 || t.Size < 0 {
			t.Errw.Printf("goverbs mckey: invalid -%c %q\n", op.Opt, op.Arg)
			return 1
		}
	}
	if unmapped && t.Src == "" {
		t.Out.Printf("unmapped multicast address requires binding to source address\n")
		return 1
	}
	if unmapped {
		t.Errw.Printf("goverbs mckey: -M: AF_IB (unmapped) multicast addresses are not supported\n")
		return 1
	}
	if t.group == "" {
		// The C tool would pass getaddrinfo a NULL name.
		t.Errw.Printf("goverbs mckey: -m multicast_address is required\n")
		return 1
	}
	if t.Size == 0 {
		t.Count = 0 // create_message: nothing to send
	}
	return -1
}

// run is mckey's run.
func (t *test) run() int {
	role := "server"
	if t.sender {
		role = "client"
	}
	t.Out.Printf("mckey: starting %s\n", role)
	var src netip.Addr
	if t.Src != "" {
		a, err := cmcommon.Lookup(t.Src)
		if err != nil {
			t.Out.Printf("getaddrinfo failed (%s) - invalid hostname or IP address\n", err)
			return -2 // EAI_NONAME
		}
		src = a
	}
	group, err := cmcommon.Lookup(t.group)
	if err != nil {
		t.Out.Printf("getaddrinfo failed (%s) - invalid hostname or IP address\n", err)
		return -2
	}
	t.Out.Printf("mckey: joining\n")
	ctx := context.Background()
	ret := 0
	for _, n := range t.Nodes {
		var srcAP netip.AddrPort
		if src.IsValid() {
			srcAP = netip.AddrPortFrom(src, 0)
			if err := n.ID.Bind(srcAP); err != nil {
				t.Errw.Printf("mckey: addr bind failure: %s\n", cmcommon.Strerror(err))
				t.ConnectsLeft--
				return -1
			}
		}
		if err := n.ID.ResolveAddr(ctx, srcAP, netip.AddrPortFrom(group, 0)); err != nil {
			if ee, ok := cmcommon.EventError(err); ok {
				ret = t.EventError(ee)
				break
			}
			t.Errw.Printf("mckey: resolve addr failure: %s\n", cmcommon.Strerror(err))
			t.ConnectsLeft--
			return -1
		}
		if ret = t.addrHandler(ctx, n, group); ret != 0 {
			break
		}
	}
	if ret == 0 {
		time.Sleep(joinPause)
		if t.Count != 0 {
			if t.sender {
				t.Out.Printf("initiating data transfers\n")
				for _, n := range t.Nodes {
					if ret = t.PostSends(n, 0); ret != 0 {
						break
					}
				}
				// The C tool leaves (and destroys the QP) right away;
				// give the sends a bounded chance to leave first (6.12's
				// rxe transmits from a workqueue).
				for _, n := range t.Nodes {
					if n.QP != nil {
						wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
						_ = n.QP.WaitSent(wctx)
						cancel()
					}
				}
			} else {
				t.Out.Printf("receiving data transfers\n")
				ret = t.PollCQs(cmcommon.RecvCQ)
			}
			if ret == 0 {
				t.Out.Printf("data transfers complete\n")
			}
		}
	}
	// out: like the C tool, the status is the last leave's.
	for _, n := range t.Nodes {
		ret = 0
		if err := n.ID.LeaveMulticast(group); err != nil {
			t.Errw.Printf("mckey: failure leaving: %s\n", cmcommon.Strerror(err))
			ret = -1
		}
	}
	return ret
}

// addrHandler readies a node and joins the group (addr_handler), then
// takes the join (join_handler).
func (t *test) addrHandler(ctx context.Context, n *cmcommon.Node, group netip.Addr) int {
	ret := t.verifyParams(n)
	if ret == 0 {
		ret = t.InitNode(n)
	}
	if ret == 0 && !t.sender {
		ret = t.PostRecvs(n)
	}
	if ret != 0 {
		t.ConnectsLeft--
		return ret
	}
	flags := cm.JoinFullMember
	if t.sendOnly {
		flags = cm.JoinSendOnlyFullMember
	}
	ev, err := n.ID.JoinMulticast(ctx, group, flags)
	if err != nil {
		if ee, ok := cmcommon.EventError(err); ok {
			return t.EventError(ee)
		}
		t.Errw.Printf("mckey: failure joining: %s\n", cmcommon.Strerror(err))
		t.ConnectsLeft--
		return -1
	}
	// join_handler
	ah := ev.UD.AH
	t.Out.Printf("mckey: joined dgid: %s mlid 0x%x sl %d\n", netip.AddrFrom16(ah.GRH.DGID), ah.DLID, ah.SL)
	n.RemoteQPN, n.RemoteQKey = ev.UD.QPNum, ev.UD.QKey
	if n.AH, err = n.PD.CreateAH(&ah); err != nil {
		t.Out.Printf("mckey: failure creating address handle\n")
		t.ConnectsLeft--
		return -1
	}
	n.Connected = true
	t.ConnectsLeft--
	return 0
}

// verifyParams checks that a message fits the active MTU
// (verify_test_params).
func (t *test) verifyParams(n *cmcommon.Node) int {
	port, err := n.ID.Context().QueryPort(int(n.ID.Port()))
	if err != nil {
		return -1
	}
	if mtu := port.ActiveMTU.Bytes(); t.Count != 0 && t.Size > mtu {
		t.Out.Printf("mckey: message_size %d is larger than active mtu %d\n", t.Size, mtu)
		return -22 // -EINVAL
	}
	return 0
}
