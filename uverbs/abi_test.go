package uverbs

import (
	"fmt"
	"reflect"
	"sort"
	"testing"
)

// abiLayout pins the size and field offsets of the structs goverbs relies
// on, as the kernel fact sheet (pahole on /usr/include/rdma) gives them. A
// regeneration that drifts from the kernel cannot pass.
var abiLayout = []struct {
	v      any
	size   uintptr
	fields map[string]uintptr
}{
	{IoctlHdr{}, 24, map[string]uintptr{"Length": 0, "Object_id": 2, "Method_id": 4, "Num_attrs": 6, "Reserved1": 8, "Driver_id": 16, "Reserved2": 20}},
	{Attr{}, 16, map[string]uintptr{"Attr_id": 0, "Len": 2, "Flags": 4, "Attr_data": 6, "Data": 8}},
	{CmdHdr{}, 8, map[string]uintptr{"Command": 0, "In_words": 4, "Out_words": 6}},
	{ExCmdHdr{}, 16, map[string]uintptr{"Response": 0, "Provider_in_words": 8, "Provider_out_words": 10, "Cmd_hdr_reserved": 12}},
	{AsyncEventDesc{}, 16, map[string]uintptr{"Element": 0, "Type": 8}},
	{CompEventDesc{}, 8, map[string]uintptr{"Handle": 0}},
	{GetContextResp{}, 8, map[string]uintptr{"Async_fd": 0, "Num_comp_vectors": 4}},
	{QueryDeviceResp{}, 176, map[string]uintptr{"Fw_ver": 0, "Node_guid": 8, "Max_mr_size": 24, "Vendor_id": 40, "Max_qp": 52, "Device_cap_flags": 60, "Atomic_cap": 108, "Max_srq_sge": 164, "Max_pkeys": 168, "Local_ca_ack_delay": 170, "Phys_port_cnt": 171}},
	{ExQueryDeviceResp{}, 304, map[string]uintptr{"Base": 0, "Comp_mask": 176, "Response_length": 180, "Odp_caps": 184, "Timestamp_mask": 208, "Hca_core_clock": 216, "Device_cap_flags_ex": 224, "Rss_caps": 232, "Max_wq_type_rq": 248, "Raw_packet_caps": 252, "Tm_caps": 256, "Cq_moderation_caps": 280, "Max_dm_size": 288, "Xrc_odp_caps": 296}},
	{QueryPortResp{}, 40, map[string]uintptr{"Port_cap_flags": 0, "Max_msg_sz": 4, "Gid_tbl_len": 16, "Pkey_tbl_len": 20, "Lid": 22, "Sm_lid": 24, "State": 26, "Max_mtu": 27, "Active_mtu": 28, "Active_speed": 35, "Phys_state": 36, "Link_layer": 37, "Flags": 38}},
	{QueryPortRespEx{}, 48, map[string]uintptr{"Legacy_resp": 0, "Port_cap_flags2": 40, "Active_speed_ex": 44}},
	{GidEntry{}, 32, map[string]uintptr{"Gid": 0, "Gid_index": 16, "Port_num": 20, "Gid_type": 24, "Netdev_ifindex": 28}},
	{AllocPdResp{}, 4, map[string]uintptr{"Handle": 0}},
	{RegMr{}, 40, map[string]uintptr{"Response": 0, "Start": 8, "Length": 16, "Hca_va": 24, "Pd_handle": 32, "Access_flags": 36}},
	{RegMrResp{}, 12, map[string]uintptr{"Handle": 0, "Lkey": 4, "Rkey": 8}},
	{AllocMw{}, 16, map[string]uintptr{"Pd_handle": 8, "Mw_type": 12}},
	{CreateCompChannelResp{}, 4, map[string]uintptr{"Fd": 0}},
	{ResizeCq{}, 16, map[string]uintptr{"Handle": 8, "Cqe": 12}},
	{ResizeCqResp{}, 8, map[string]uintptr{"Cqe": 0}},
	{Wc{}, 48, map[string]uintptr{"Wr_id": 0, "Status": 8, "Opcode": 12, "Vendor_err": 16, "Byte_len": 20, "Ex": 24, "Qp_num": 28, "Src_qp": 32, "Wc_flags": 36, "Pkey_index": 40, "Slid": 42, "Sl": 44, "Dlid_path_bits": 45, "Port_num": 46}},
	{ReqNotifyCq{}, 8, map[string]uintptr{"Cq_handle": 0, "Solicited_only": 4}},
	{DestroyCqResp{}, 8, map[string]uintptr{"Comp_events_reported": 0, "Async_events_reported": 4}},
	{GlobalRoute{}, 24, map[string]uintptr{"Dgid": 0, "Flow_label": 16, "Sgid_index": 20, "Hop_limit": 21, "Traffic_class": 22}},
	{AhAttr{}, 32, map[string]uintptr{"Grh": 0, "Dlid": 24, "Sl": 26, "Is_global": 29, "Port_num": 30}},
	{QpAttr{}, 144, map[string]uintptr{"Qp_attr_mask": 0, "Qp_state": 4, "Path_mtu": 12, "Qkey": 20, "Rq_psn": 24, "Sq_psn": 28, "Dest_qp_num": 32, "Qp_access_flags": 36, "Ah_attr": 40, "Alt_ah_attr": 72, "Max_send_wr": 104, "Max_inline_data": 120, "Pkey_index": 124, "Max_rd_atomic": 130, "Max_dest_rd_atomic": 131, "Min_rnr_timer": 132, "Port_num": 133, "Timeout": 134, "Retry_cnt": 135, "Rnr_retry": 136}},
	{QpCap{}, 20, map[string]uintptr{"Send_wr": 0, "Recv_wr": 4, "Send_sge": 8, "Recv_sge": 12, "Inline_data": 16}},
	{QpDest{}, 32, map[string]uintptr{"Dgid": 0, "Flow_label": 16, "Dlid": 20, "Sgid_index": 24, "Hop_limit": 25, "Traffic_class": 26, "Sl": 27, "Is_global": 30, "Port_num": 31}},
	{QueryQp{}, 16, map[string]uintptr{"Qp_handle": 8, "Attr_mask": 12}},
	{QueryQpResp{}, 128, map[string]uintptr{"Dest": 0, "Alt_dest": 32, "Max_send_wr": 64, "Max_inline_data": 80, "Qkey": 84, "Rq_psn": 88, "Sq_psn": 92, "Dest_qp_num": 96, "Qp_access_flags": 100, "Pkey_index": 104, "Qp_state": 108, "Path_mtu": 110, "Max_rd_atomic": 113, "Max_dest_rd_atomic": 114, "Min_rnr_timer": 115, "Port_num": 116, "Timeout": 117, "Retry_cnt": 118, "Rnr_retry": 119, "Sq_sig_all": 122}},
	{ModifyQp{}, 112, map[string]uintptr{"Dest": 0, "Alt_dest": 32, "Qp_handle": 64, "Attr_mask": 68, "Qkey": 72, "Rq_psn": 76, "Sq_psn": 80, "Dest_qp_num": 84, "Qp_access_flags": 88, "Pkey_index": 92, "Qp_state": 96, "Path_mtu": 98, "Max_rd_atomic": 101, "Max_dest_rd_atomic": 102, "Min_rnr_timer": 103, "Port_num": 104, "Timeout": 105, "Retry_cnt": 106, "Rnr_retry": 107}},
	{DestroyQpResp{}, 4, nil},
	{PostSend{}, 24, map[string]uintptr{"Response": 0, "Qp_handle": 8, "Wr_count": 12, "Sge_count": 16, "Wqe_size": 20}},
	{CreateAh{}, 56, map[string]uintptr{"Response": 0, "User_handle": 8, "Pd_handle": 16, "Attr": 24}},
	{ModifySrq{}, 16, map[string]uintptr{"Srq_handle": 0, "Attr_mask": 4, "Max_wr": 8, "Srq_limit": 12}},
	{QuerySrq{}, 16, map[string]uintptr{"Handle": 8}},
	{QuerySrqResp{}, 16, map[string]uintptr{"Max_wr": 0, "Max_sge": 4, "Srq_limit": 8}},

	{RxeQueueBuf{}, 384, map[string]uintptr{"Log2_elem_size": 0, "Index_mask": 4, "Producer_index": 128, "Consumer_index": 256}},
	{RxeSendWr{}, 144, map[string]uintptr{"Wr_id": 0, "Opcode": 12, "Send_flags": 16, "Ex": 20, "Wr": 24}},
	{RxeSendWqe{}, 208, map[string]uintptr{"Wr": 0, "Status": 144, "State": 148, "Iova": 152, "Mask": 160, "First_psn": 164, "Ssn": 176, "Dma": 184}},
	{RxeRecvWqe{}, 40, map[string]uintptr{"Id": 0, "Dma": 16}},
	{RxeDmaInfo{}, 24, map[string]uintptr{"Length": 0, "Resid": 4, "Cur_sge": 8, "Num_sge": 12, "Sge_offset": 16}},
	{RxeSge{}, 16, map[string]uintptr{"Addr": 0, "Length": 8, "Lkey": 12}},
	{RxeAv{}, 88, map[string]uintptr{"Port_num": 0, "Network_type": 1, "Dmac": 2, "Grh": 8, "Sgid_addr": 32, "Dgid_addr": 60}},
	{RxeMminfo{}, 16, map[string]uintptr{"Offset": 0, "Size": 8}},
	{RxeCreateQpResp{}, 32, map[string]uintptr{"Rq_mi": 0, "Sq_mi": 16}},
	{RxeCreateSrqResp{}, 24, map[string]uintptr{"Mi": 0, "Num": 16}},
	{RxeCreateAhResp{}, 8, map[string]uintptr{"Num": 0}},
	{RxeModifySrqCmd{}, 8, nil},

	// siw-abi.h, as pahole prints it for the 6.12 headers.
	{SiwUrespCreateCq{}, 16, map[string]uintptr{"Cq_id": 0, "Num_cqe": 4, "Cq_key": 8}},
	{SiwUrespCreateQp{}, 32, map[string]uintptr{"Qp_id": 0, "Num_sqe": 4, "Num_rqe": 8, "Sq_key": 16, "Rq_key": 24}},
	{SiwUrespCreateSrq{}, 16, map[string]uintptr{"Num_rqe": 0, "Srq_key": 8}},
	{SiwSge{}, 16, map[string]uintptr{"Laddr": 0, "Length": 8, "Lkey": 12}},
	{SiwSqe{}, 120, map[string]uintptr{"Id": 0, "Flags": 8, "Num_sge": 10, "Opcode": 11, "Rkey": 12, "Raddr": 16, "Sge": 24}},
	{SiwRqe{}, 112, map[string]uintptr{"Id": 0, "Flags": 8, "Num_sge": 10, "Opcode": 11, "Sge": 16}},
	{SiwCqe{}, 32, map[string]uintptr{"Id": 0, "Flags": 8, "Opcode": 9, "Status": 10, "Bytes": 12, "Imm_data": 16, "Qp_id": 24}},
	{SiwCqCtrl{}, 8, map[string]uintptr{"Flags": 0}},
	// vmw_pvrdma-abi.h, offsets worked out from the header's __aligned_u64
	// and __u32 fields; the CQE's 64 bytes are the kernel driver's
	// BUILD_BUG_ON(sizeof(struct pvrdma_cqe) != 64) in pvrdma_cq.c.
	{PvrdmaAllocUcontextResp{}, 8, map[string]uintptr{"Tab_size": 0}},
	{PvrdmaCreateCq{}, 16, map[string]uintptr{"Addr": 0, "Size": 8}},
	{PvrdmaCreateCqResp{}, 8, map[string]uintptr{"Cqn": 0}},
	{PvrdmaCreateSrq{}, 16, map[string]uintptr{"Addr": 0, "Size": 8}},
	{PvrdmaCreateSrqResp{}, 8, map[string]uintptr{"Srqn": 0}},
	{PvrdmaCreateQp{}, 32, map[string]uintptr{"Rbuf_addr": 0, "Sbuf_addr": 8, "Rbuf_size": 16, "Sbuf_size": 20, "Qp_addr": 24}},
	{PvrdmaCreateQpResp{}, 8, map[string]uintptr{"Qpn": 0, "Handle": 4}},
	{PvrdmaAv{}, 40, map[string]uintptr{"Port_pd": 0, "Sl_tclass_flowlabel": 4, "Dgid": 8, "Src_path_bits": 24, "Gid_index": 25, "Stat_rate": 26, "Hop_limit": 27, "Dmac": 28, "Reserved": 34}},
	{PvrdmaSge{}, 16, map[string]uintptr{"Addr": 0, "Length": 8, "Lkey": 12}},
	{PvrdmaRqWqeHdr{}, 16, map[string]uintptr{"Wr_id": 0, "Num_sge": 8, "Total_len": 12}},
	{PvrdmaSqWqeHdr{}, 80, map[string]uintptr{"Wr_id": 0, "Num_sge": 8, "Total_len": 12, "Opcode": 16, "Send_flags": 20, "Ex": 24, "Reserved": 28, "Wr": 32}},
	{PvrdmaCqe{}, 64, map[string]uintptr{"Wr_id": 0, "Qp": 8, "Opcode": 16, "Status": 20, "Byte_len": 24, "Imm_data": 28, "Src_qp": 32, "Wc_flags": 36, "Vendor_err": 40, "Pkey_index": 44, "Slid": 46, "Sl": 48, "Dlid_path_bits": 49, "Port_num": 50, "Smac": 51, "Network_hdr_type": 57, "Reserved2": 58}},

	{UcmCmdHdr{}, 8, map[string]uintptr{"Cmd": 0, "In": 4, "Out": 6}},
	{UcmCreateID{}, 24, map[string]uintptr{"Uid": 0, "Response": 8, "Ps": 16, "Type": 18}},
	{UcmDestroyID{}, 16, map[string]uintptr{"Response": 0, "Id": 8}},
	{UcmBind{}, 136, map[string]uintptr{"Id": 0, "Addr": 8}},
	{UcmResolveAddr{}, 272, map[string]uintptr{"Id": 0, "Timeout_ms": 4, "Src_size": 8, "Dst_size": 10, "Src_addr": 16, "Dst_addr": 144}},
	{UcmResolveRoute{}, 8, nil},
	{UcmQuery{}, 16, map[string]uintptr{"Response": 0, "Id": 8, "Option": 12}},
	{UcmQueryAddrResp{}, 280, map[string]uintptr{"Node_guid": 0, "Port_num": 8, "Pkey": 10, "Src_size": 12, "Dst_size": 14, "Src_addr": 16, "Dst_addr": 144, "Ibdev_index": 272}},
	{UcmQueryRouteResp{}, 208, map[string]uintptr{"Node_guid": 0, "Ib_route": 8, "Src_addr": 136, "Dst_addr": 164, "Num_paths": 192, "Port_num": 196, "Ibdev_index": 200}},
	{PathRecData{}, 72, nil},
	{UserPathRec{}, 64, map[string]uintptr{"Dgid": 0, "Sgid": 16, "Mtu": 48, "Pkey": 52, "Packet_life_time": 62}},
	{UcmConnParam{}, 272, map[string]uintptr{"Qp_num": 0, "Qkey": 4, "Private_data": 8, "Private_data_len": 264, "Srq": 265, "Responder_resources": 266, "Initiator_depth": 267, "Flow_control": 268, "Retry_count": 269, "Rnr_retry_count": 270, "Valid": 271}},
	{UcmUdParam{}, 304, map[string]uintptr{"Qp_num": 0, "Qkey": 4, "Ah_attr": 8, "Private_data": 40, "Private_data_len": 296}},
	{UcmConnect{}, 288, map[string]uintptr{"Param": 0, "Id": 272, "Ece": 280}},
	{UcmListen{}, 8, nil},
	{UcmAccept{}, 296, map[string]uintptr{"Uid": 0, "Param": 8, "Id": 280, "Ece": 288}},
	{UcmReject{}, 264, map[string]uintptr{"Id": 0, "Data_len": 4, "Reason": 5, "Data": 8}},
	{UcmInitQpAttr{}, 16, map[string]uintptr{"Response": 0, "Id": 8, "State": 12}},
	{UcmEventResp{}, 336, map[string]uintptr{"Uid": 0, "Id": 8, "Event": 12, "Status": 16, "Param": 20, "Reserved": 324, "Ece": 328}},
	{UcmSetOption{}, 24, map[string]uintptr{"Optval": 0, "Id": 8, "Level": 12, "Optname": 16, "Optlen": 20}},
	{UcmMigrateID{}, 16, map[string]uintptr{"Response": 0, "Id": 8, "Fd": 12}},
}

// layoutErrors compares the Go type of v with a C layout: its size and the
// offsets of the named fields.
func layoutErrors(v any, size uintptr, fields map[string]uintptr) []string {
	typ := reflect.TypeOf(v)
	var errs []string
	if got := typ.Size(); got != size {
		errs = append(errs, fmt.Sprintf("sizeof(%s) = %d, want %d", typ.Name(), got, size))
	}
	for name, want := range fields {
		f, ok := typ.FieldByName(name)
		if !ok {
			errs = append(errs, fmt.Sprintf("%s has no field %s", typ.Name(), name))
			continue
		}
		if f.Offset != want {
			errs = append(errs, fmt.Sprintf("offsetof(%s.%s) = %d, want %d", typ.Name(), name, f.Offset, want))
		}
	}
	sort.Strings(errs)
	return errs
}

func TestABILayout(t *testing.T) {
	for _, l := range abiLayout {
		t.Run(reflect.TypeOf(l.v).Name(), func(t *testing.T) {
			for _, e := range layoutErrors(l.v, l.size, l.fields) {
				t.Error(e)
			}
		})
	}
}

// TestABILayoutCatchesDrift shows the layout check failing on a struct that
// drifted from the kernel's: RegMrResp as it would be generated if a field
// were lost or widened.
func TestABILayoutCatchesDrift(t *testing.T) {
	type driftedRegMrResp struct {
		Handle uint32
		Lkey   uint64 // widened: moves Rkey and grows the struct
		Rkey   uint32
	}
	want := []string{
		"offsetof(driftedRegMrResp.Lkey) = 8, want 4",
		"offsetof(driftedRegMrResp.Rkey) = 16, want 8",
		"sizeof(driftedRegMrResp) = 24, want 12",
	}
	got := layoutErrors(driftedRegMrResp{}, 12, map[string]uintptr{"Handle": 0, "Lkey": 4, "Rkey": 8})
	if !reflect.DeepEqual(got, want) {
		t.Errorf("layoutErrors on a drifted struct = %q, want %q", got, want)
	}
	if got := layoutErrors(RegMrResp{}, 12, map[string]uintptr{"Handle": 0, "Lkey": 4, "Rkey": 8}); len(got) != 0 {
		t.Errorf("layoutErrors on the generated struct = %q, want none", got)
	}
}

// TestABIConstants pins constants the fact sheet spells out numerically.
func TestABIConstants(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want uint64
	}{
		{"RDMA_VERBS_IOCTL", RDMA_VERBS_IOCTL, 0xc0181b01},
		{"RDMA_DRIVER_RXE", RDMA_DRIVER_RXE, 14},
		{"RDMA_DRIVER_SIW", RDMA_DRIVER_SIW, 18},
		{"RDMA_DRIVER_MLX5", RDMA_DRIVER_MLX5, 1},
		{"UVERBS_OBJECT_ASYNC_EVENT", UVERBS_OBJECT_ASYNC_EVENT, 16},
		{"UVERBS_METHOD_GET_CONTEXT", UVERBS_METHOD_GET_CONTEXT, 3},
		{"UVERBS_METHOD_QUERY_GID_ENTRY", UVERBS_METHOD_QUERY_GID_ENTRY, 6},
		{"UVERBS_ATTR_UHW_IN", UVERBS_ATTR_UHW_IN, 0x1000},
		{"UVERBS_ATTR_UHW_OUT", UVERBS_ATTR_UHW_OUT, 0x1001},
		{"IB_USER_VERBS_CMD_POST_SEND", IB_USER_VERBS_CMD_POST_SEND, 28},
		{"IB_USER_VERBS_CMD_REQ_NOTIFY_CQ", IB_USER_VERBS_CMD_REQ_NOTIFY_CQ, 23},
		{"RDMA_NLDEV_CMD_GET_CHARDEV", RDMA_NLDEV_CMD_GET_CHARDEV, 0xf},
		{"RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID", RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID, 73},
		{"RDMA_USER_CM_CMD_JOIN_MCAST", RDMA_USER_CM_CMD_JOIN_MCAST, 22},
		{"RDMA_PS_TCP", RDMA_PS_TCP, 0x106},
		{"RDMA_PS_UDP", RDMA_PS_UDP, 0x111},
		// Added by the 6.12 headers (FLUSH and ATOMIC WRITE).
		{"IB_UVERBS_WR_FLUSH", IB_UVERBS_WR_FLUSH, 14},
		{"IB_UVERBS_WR_ATOMIC_WRITE", IB_UVERBS_WR_ATOMIC_WRITE, 15},
		{"IB_UVERBS_WC_FLUSH", IB_UVERBS_WC_FLUSH, 8},
		{"IB_UVERBS_WC_ATOMIC_WRITE", IB_UVERBS_WC_ATOMIC_WRITE, 9},
		{"IB_UVERBS_ACCESS_FLUSH_GLOBAL", IB_UVERBS_ACCESS_FLUSH_GLOBAL, 1 << 8},
		{"IB_UVERBS_ACCESS_FLUSH_PERSISTENT", IB_UVERBS_ACCESS_FLUSH_PERSISTENT, 1 << 9},
		{"IB_UVERBS_DEVICE_FLUSH_GLOBAL", IB_UVERBS_DEVICE_FLUSH_GLOBAL, 1 << 38},
		{"IB_UVERBS_DEVICE_FLUSH_PERSISTENT", IB_UVERBS_DEVICE_FLUSH_PERSISTENT, 1 << 39},
		{"IB_UVERBS_DEVICE_ATOMIC_WRITE", IB_UVERBS_DEVICE_ATOMIC_WRITE, 1 << 40},
	} {
		if c.got != c.want {
			t.Errorf("%s = %#x, want %#x", c.name, c.got, c.want)
		}
	}
}
