// Package devinfo is goverbs devinfo: rdma-core's ibv_devinfo, whose
// output it prints field for field so that the two can be diffed.
//
//	goverbs devinfo [-d DEV] [-i PORT] [-l] [-v]
package devinfo

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/goverbs/goverbs/internal/tools/cli"
	"github.com/goverbs/goverbs/verbs"
)

// Summary is goverbs devinfo's line in goverbs' command list.
const Summary = "print device and port attributes, like ibv_devinfo"

// Main is goverbs devinfo: it prints what ibv_devinfo (rdma-core 44)
// prints, field for field, so the two can be diffed. args are its
// arguments after the subcommand; it returns the exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("devinfo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		devName string
		port    int
		list    bool
		verbose bool
	)
	fs.StringVar(&devName, "d", "", "use IB device `dev` (default: all devices)")
	fs.StringVar(&devName, "ib-dev", "", "same as -d")
	fs.IntVar(&port, "i", 0, "use `port` of the IB device (default: all ports)")
	fs.IntVar(&port, "ib-port", 0, "same as -i")
	fs.BoolVar(&list, "l", false, "print only the IB device names")
	fs.BoolVar(&list, "list", false, "same as -l")
	fs.BoolVar(&verbose, "v", false, "print all the attributes of the IB device(s)")
	fs.BoolVar(&verbose, "verbose", false, "same as -v")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		cli.Errorf(stderr, "devinfo", "unexpected argument %q", fs.Arg(0))
		return 2
	}
	if port < 0 {
		cli.Errorf(stderr, "devinfo", "invalid port %d", port)
		return 2
	}
	devs, err := verbs.Devices()
	if err != nil {
		cli.Errorf(stderr, "devinfo", "failed to get IB devices list: %v", err)
		return 1
	}
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	if list {
		plural := "s"
		if len(devs) == 1 {
			plural = ""
		}
		fmt.Fprintf(w, "%d HCA%s found:\n", len(devs), plural)
		for _, d := range devs {
			fmt.Fprintf(w, "\t%s\n", d.Name)
		}
		fmt.Fprintln(w)
		return 0
	}
	if devName != "" {
		for _, d := range devs {
			if d.Name == devName {
				return printDevice(w, stderr, d, port, verbose)
			}
		}
		w.Flush()
		fmt.Fprintf(stderr, "IB device '%s' wasn't found\n", devName)
		return 1
	}
	if len(devs) == 0 {
		w.Flush()
		fmt.Fprintln(stderr, "No IB devices found")
		return 1
	}
	rc := 0
	for _, d := range devs {
		rc |= printDevice(w, stderr, d, port, verbose)
	}
	return rc
}

func printDevice(w *bufio.Writer, stderr io.Writer, d verbs.Device, onlyPort int, verbose bool) int {
	ctx, err := verbs.OpenDevice(d)
	if err != nil {
		w.Flush()
		cli.Errorf(stderr, "devinfo", "failed to open device: %v", err)
		return 1
	}
	defer ctx.Close()
	a, err := ctx.QueryDevice()
	if err != nil {
		w.Flush()
		cli.Errorf(stderr, "devinfo", "failed to query device props: %v", err)
		return 2
	}
	if onlyPort > a.PhysPortCnt {
		w.Flush()
		fmt.Fprintln(stderr, "Invalid port requested for device")
		return 4
	}
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	transport := d.NodeType.Transport()
	p("hca_id:\t%s\n", d.Name)
	p("\ttransport:\t\t\t%s (%d)\n", transport, transport)
	if a.FWVersion != "" {
		p("\tfw_ver:\t\t\t\t%s\n", a.FWVersion)
	}
	p("\tnode_guid:\t\t\t%s\n", a.NodeGUID)
	p("\tsys_image_guid:\t\t\t%s\n", a.SysImageGUID)
	p("\tvendor_id:\t\t\t0x%04x\n", a.VendorID)
	p("\tvendor_part_id:\t\t\t%d\n", a.VendorPartID)
	p("\thw_ver:\t\t\t\t0x%X\n", a.HWVersion)
	if s := boardID(d); s != "" {
		p("\tboard_id:\t\t\t%s\n", s)
	}
	p("\tphys_port_cnt:\t\t\t%d\n", a.PhysPortCnt)
	if verbose {
		printVerboseDevice(p, a, ctx.NumCompVectors())
	}
	for port := 1; port <= a.PhysPortCnt; port++ {
		if onlyPort != 0 && port != onlyPort {
			continue
		}
		pa, err := ctx.QueryPort(port)
		if err != nil {
			w.Flush()
			fmt.Fprintf(stderr, "Failed to query port %d props\n", port)
			return 1
		}
		p("\t\tport:\t%d\n", port)
		p("\t\t\tstate:\t\t\t%s (%d)\n", pa.State, pa.State)
		p("\t\t\tmax_mtu:\t\t%s (%d)\n", pa.MaxMTU, pa.MaxMTU)
		p("\t\t\tactive_mtu:\t\t%s (%d)\n", pa.ActiveMTU, pa.ActiveMTU)
		p("\t\t\tsm_lid:\t\t\t%d\n", pa.SMLID)
		p("\t\t\tport_lid:\t\t%d\n", pa.LID)
		p("\t\t\tport_lmc:\t\t0x%02x\n", pa.LMC)
		p("\t\t\tlink_layer:\t\t%s\n", pa.LinkLayer)
		if verbose {
			p("\t\t\tmax_msg_sz:\t\t0x%x\n", pa.MaxMsgSize)
			p("\t\t\tport_cap_flags:\t\t0x%08x\n", pa.PortCapFlags)
			p("\t\t\tport_cap_flags2:\t0x%04x\n", pa.PortCapFlags2)
			p("\t\t\tmax_vl_num:\t\t%s (%d)\n", vlString(pa.MaxVLNum), pa.MaxVLNum)
			p("\t\t\tbad_pkey_cntr:\t\t0x%x\n", pa.BadPkeyCntr)
			p("\t\t\tqkey_viol_cntr:\t\t0x%x\n", pa.QkeyViolCntr)
			p("\t\t\tsm_sl:\t\t\t%d\n", pa.SMSL)
			p("\t\t\tpkey_tbl_len:\t\t%d\n", pa.PkeyTblLen)
			p("\t\t\tgid_tbl_len:\t\t%d\n", pa.GIDTblLen)
			p("\t\t\tsubnet_timeout:\t\t%d\n", pa.SubnetTimeout)
			p("\t\t\tinit_type_reply:\t%d\n", pa.InitTypeReply)
			p("\t\t\tactive_width:\t\t%sX (%d)\n", widthString(pa.ActiveWidth), pa.ActiveWidth)
			p("\t\t\tactive_speed:\t\t%s (%d)\n", speedString(pa.ActiveSpeed), pa.ActiveSpeed)
			if transport == verbs.TransportIB {
				p("\t\t\tphys_state:\t\t%s (%d)\n", physStateString(pa.PhysState), pa.PhysState)
			}
			if err := printGIDs(p, ctx, port, pa); err != nil {
				w.Flush()
				cli.Errorf(stderr, "devinfo", "%v", err)
				return 1
			}
		}
		p("\n")
	}
	return 0
}

func printVerboseDevice(p func(string, ...any), a *verbs.DeviceAttr, numCompVectors int) {
	p("\tmax_mr_size:\t\t\t0x%x\n", a.MaxMRSize)
	p("\tpage_size_cap:\t\t\t0x%x\n", a.PageSizeCap)
	p("\tmax_qp:\t\t\t\t%d\n", a.MaxQP)
	p("\tmax_qp_wr:\t\t\t%d\n", a.MaxQPWR)
	p("\tdevice_cap_flags:\t\t0x%08x\n", a.DeviceCapFlags)
	printFlags(p, uint64(a.DeviceCapFlags), deviceCapNames, "%X")
	p("\tmax_sge:\t\t\t%d\n", a.MaxSGE)
	p("\tmax_sge_rd:\t\t\t%d\n", a.MaxSGERD)
	p("\tmax_cq:\t\t\t\t%d\n", a.MaxCQ)
	p("\tmax_cqe:\t\t\t%d\n", a.MaxCQE)
	p("\tmax_mr:\t\t\t\t%d\n", a.MaxMR)
	p("\tmax_pd:\t\t\t\t%d\n", a.MaxPD)
	p("\tmax_qp_rd_atom:\t\t\t%d\n", a.MaxQPRDAtomic)
	p("\tmax_ee_rd_atom:\t\t\t%d\n", a.MaxEERDAtomic)
	p("\tmax_res_rd_atom:\t\t%d\n", a.MaxResRDAtomic)
	p("\tmax_qp_init_rd_atom:\t\t%d\n", a.MaxQPInitRDAtomic)
	p("\tmax_ee_init_rd_atom:\t\t%d\n", a.MaxEEInitRDAtomic)
	p("\tatomic_cap:\t\t\t%s (%d)\n", a.AtomicCap, a.AtomicCap)
	p("\tmax_ee:\t\t\t\t%d\n", a.MaxEE)
	p("\tmax_rdd:\t\t\t%d\n", a.MaxRDD)
	p("\tmax_mw:\t\t\t\t%d\n", a.MaxMW)
	p("\tmax_raw_ipv6_qp:\t\t%d\n", a.MaxRawIPv6QP)
	p("\tmax_raw_ethy_qp:\t\t%d\n", a.MaxRawEthyQP)
	p("\tmax_mcast_grp:\t\t\t%d\n", a.MaxMcastGrp)
	p("\tmax_mcast_qp_attach:\t\t%d\n", a.MaxMcastQPAttach)
	p("\tmax_total_mcast_qp_attach:\t%d\n", a.MaxTotalMcastQPAttach)
	p("\tmax_ah:\t\t\t\t%d\n", a.MaxAH)
	p("\tmax_fmr:\t\t\t%d\n", a.MaxFMR)
	if a.MaxFMR != 0 {
		p("\tmax_map_per_fmr:\t\t%d\n", a.MaxMapPerFMR)
	}
	p("\tmax_srq:\t\t\t%d\n", a.MaxSRQ)
	if a.MaxSRQ != 0 {
		p("\tmax_srq_wr:\t\t\t%d\n", a.MaxSRQWR)
		p("\tmax_srq_sge:\t\t\t%d\n", a.MaxSRQSGE)
	}
	p("\tmax_pkeys:\t\t\t%d\n", a.MaxPkeys)
	p("\tlocal_ca_ack_delay:\t\t%d\n", a.LocalCAAckDelay)

	p("\tgeneral_odp_caps:\n")
	printFlags(p, a.ODPGeneralCaps, odpGeneralNames, "%X")
	for _, t := range []struct {
		name string
		caps uint32
	}{{"rc", a.RCODPCaps}, {"uc", a.UCODPCaps}, {"ud", a.UDODPCaps}, {"xrc", a.XRCODPCaps}} {
		p("\t%s_odp_caps:\n", t.name)
		if t.caps == 0 {
			p("\t\t\t\t\tNO SUPPORT\n")
		} else {
			printFlags(p, uint64(t.caps), odpTransportNames, "%X")
		}
	}
	if a.CompletionTimestampMask != 0 {
		p("\tcompletion timestamp_mask:\t\t\t0x%016x\n", a.CompletionTimestampMask)
	} else {
		p("\tcompletion_timestamp_mask not supported\n")
	}
	if a.HCACoreClock != 0 {
		p("\thca_core_clock:\t\t\t%dkHZ\n", a.HCACoreClock)
	} else {
		p("\tcore clock not supported\n")
	}
	if a.RawPacketCaps != 0 {
		p("\traw packet caps:\n")
		printFlags(p, uint64(a.RawPacketCaps), rawPacketNames, "")
	}
	p("\tdevice_cap_flags_ex:\t\t0x%X\n", a.DeviceCapFlagsEx)
	printFlags(p, a.DeviceCapFlagsEx&0xffffffff00000000, deviceCapExNames, "%X")
	p("\ttso_caps:\n")
	p("\t\tmax_tso:\t\t\t%d\n", a.MaxTSO)
	if a.MaxTSO != 0 {
		p("\t\tsupported_qp:\n")
		printFlags(p, uint64(a.TSOSupportedQPTs), qptNames, "%X")
	}
	p("\trss_caps:\n")
	p("\t\tmax_rwq_indirection_tables:\t\t\t%d\n", a.MaxRWQIndirectionTables)
	p("\t\tmax_rwq_indirection_table_size:\t\t\t%d\n", a.MaxRWQIndirectionTableSize)
	p("\t\trx_hash_function:\t\t\t\t0x%x\n", a.RSSRxHashFunction)
	p("\t\trx_hash_fields_mask:\t\t\t\t0x%X\n", a.RSSRxHashFieldsMask)
	if a.RSSSupportedQPTs != 0 {
		p("\t\tsupported_qp:\n")
		printFlags(p, uint64(a.RSSSupportedQPTs), qptNames, "%X")
	}
	p("\tmax_wq_type_rq:\t\t\t%d\n", a.MaxWQTypeRQ)
	p("\tpacket_pacing_caps:\n")
	p("\t\tqp_rate_limit_min:\t%dkbps\n", a.QPRateLimitMin)
	p("\t\tqp_rate_limit_max:\t%dkbps\n", a.QPRateLimitMax)
	if a.QPRateLimitMax != 0 {
		p("\t\tsupported_qp:\n")
		printFlags(p, uint64(a.PacketPacingSupportedQPTs), qptNames, "%X")
	}
	if a.TMMaxNumTags != 0 {
		p("\tmax_rndv_hdr_size:\t\t%d\n", a.TMMaxRndvHdrSize)
		p("\tmax_num_tags:\t\t\t%d\n", a.TMMaxNumTags)
		p("\tmax_ops:\t\t\t%d\n", a.TMMaxOps)
		p("\tmax_sge:\t\t\t%d\n", a.TMMaxSGE)
		p("\tflags:\n")
		if a.TMFlags&1 != 0 {
			p("\t\t\t\t\tIBV_TM_CAP_RC\n")
		}
	} else {
		p("\ttag matching not supported\n")
	}
	if a.CQModMaxCount != 0 && a.CQModMaxPeriod != 0 {
		p("\n\tcq moderation caps:\n")
		p("\t\tmax_cq_count:\t%d\n", a.CQModMaxCount)
		p("\t\tmax_cq_period:\t%d us\n\n", a.CQModMaxPeriod)
	}
	if a.MaxDMSize != 0 {
		p("\tmaximum available device memory:\t%dBytes\n\n", a.MaxDMSize)
	}
	p("\tnum_comp_vectors:\t\t%d\n", numCompVectors)
}

// boardID reads the device's board_id from sysfs, as ibv_devinfo does
// (ibv_read_sysfs_file: one trailing newline dropped), or "".
func boardID(d verbs.Device) string {
	if d.IBDevPath == "" {
		return ""
	}
	b, err := os.ReadFile(filepath.Join(d.IBDevPath, "board_id"))
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(b), "\n")
}

type flagName struct {
	bit  uint64
	name string
}

var deviceCapNames = []flagName{
	{1 << 0, "RESIZE_MAX_WR"}, {1 << 1, "BAD_PKEY_CNTR"}, {1 << 2, "BAD_QKEY_CNTR"}, {1 << 3, "RAW_MULTI"},
	{1 << 4, "AUTO_PATH_MIG"}, {1 << 5, "CHANGE_PHY_PORT"}, {1 << 6, "UD_AV_PORT_ENFORCE"},
	{1 << 7, "CURR_QP_STATE_MOD"}, {1 << 8, "SHUTDOWN_PORT"}, {1 << 9, "INIT_TYPE"},
	{1 << 10, "PORT_ACTIVE_EVENT"}, {1 << 11, "SYS_IMAGE_GUID"}, {1 << 12, "RC_RNR_NAK_GEN"},
	{1 << 13, "SRQ_RESIZE"}, {1 << 14, "N_NOTIFY_CQ"}, {1 << 17, "MEM_WINDOW"}, {1 << 18, "UD_IP_CSUM"},
	{1 << 20, "XRC"}, {1 << 21, "MEM_MGT_EXTENSIONS"}, {1 << 23, "MEM_WINDOW_TYPE_2A"},
	{1 << 24, "MEM_WINDOW_TYPE_2B"}, {1 << 25, "RC_IP_CSUM"}, {1 << 26, "RAW_IP_CSUM"},
	{1 << 29, "MANAGED_FLOW_STEERING"},
}

var deviceCapExNames = []flagName{{1 << 34, "RAW_SCATTER_FCS"}, {1 << 36, "PCI_WRITE_END_PADDING"}}

var odpGeneralNames = []flagName{{1 << 0, "ODP_SUPPORT"}, {1 << 1, "ODP_SUPPORT_IMPLICIT"}}

var odpTransportNames = []flagName{
	{1 << 0, "SUPPORT_SEND"}, {1 << 1, "SUPPORT_RECV"}, {1 << 2, "SUPPORT_WRITE"},
	{1 << 3, "SUPPORT_READ"}, {1 << 4, "SUPPORT_ATOMIC"}, {1 << 5, "SUPPORT_SRQ"},
}

var rawPacketNames = []flagName{
	{1 << 0, "C-VLAN stripping offload"}, {1 << 1, "Scatter FCS offload"},
	{1 << 2, "IP csum offload"}, {1 << 3, "Delay drop"},
}

var qptNames = []flagName{{1 << 8, "SUPPORT_RAW_PACKET"}, {1 << 4, "SUPPORT_UD"}}

// printFlags prints the name of each set bit on its own line and, when
// unknownFmt is not empty, the remaining unknown bits.
func printFlags(p func(string, ...any), v uint64, names []flagName, unknownFmt string) {
	known := uint64(0)
	for _, n := range names {
		known |= n.bit
		if v&n.bit != 0 {
			p("\t\t\t\t\t%s\n", n.name)
		}
	}
	if unknownFmt != "" && v&^known != 0 {
		p("\t\t\t\t\tUnknown flags: 0x"+unknownFmt+"\n", v&^known)
	}
}

func printGIDs(p func(string, ...any), dev *verbs.Context, port int, pa *verbs.PortAttr) error {
	table, err := dev.QueryGIDTable()
	if err != nil {
		return err
	}
	for _, e := range table {
		if e.Port != port || e.GID.IsZero() {
			continue
		}
		suffix := ""
		if pa.LinkLayer == verbs.LinkLayerEthernet {
			if e.Type == verbs.GIDTypeRoCEv2 {
				suffix = ", RoCE v2"
			} else {
				suffix = ", RoCE v1"
			}
		}
		if e.Type == verbs.GIDTypeRoCEv2 {
			p("\t\t\tGID[%3d]:\t\t%s%s\n", e.Index, e.GID, suffix)
		} else {
			p("\t\t\tGID[%3d]:\t\t%s%s\n", e.Index, e.GID.HexString(), suffix)
		}
	}
	return nil
}

func vlString(v uint8) string {
	switch v {
	case 1:
		return "1"
	case 2:
		return "2"
	case 3:
		return "4"
	case 4:
		return "8"
	case 5:
		return "15"
	}
	return "invalid value"
}

func widthString(v uint8) string {
	switch v {
	case 1:
		return "1"
	case 2:
		return "4"
	case 4:
		return "8"
	case 8:
		return "12"
	case 16:
		return "2"
	}
	return "invalid width"
}

func speedString(v uint8) string {
	switch v {
	case 1:
		return "2.5 Gbps"
	case 2:
		return "5.0 Gbps"
	case 4, 8:
		return "10.0 Gbps"
	case 16:
		return "14.0 Gbps"
	case 32:
		return "25.0 Gbps"
	case 64:
		return "50.0 Gbps"
	case 128:
		return "100.0 Gbps"
	}
	return "invalid speed"
}

func physStateString(v uint8) string {
	switch v {
	case 1:
		return "SLEEP"
	case 2:
		return "POLLING"
	case 3:
		return "DISABLED"
	case 4:
		return "PORT_CONFIGURATION TRAINNING"
	case 5:
		return "LINK_UP"
	case 6:
		return "LINK_ERROR_RECOVERY"
	case 7:
		return "PHY TEST"
	}
	return "invalid physical state"
}
