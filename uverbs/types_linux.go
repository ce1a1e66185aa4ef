// Copyright The goverbs Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build ignore

// Input to cgo -godefs. See mkabi.sh.
//
// Every struct here mirrors a kernel UAPI structure from the pinned kernel
// headers mkabi.sh generates from (abi.pin names the package). The RDMA UAPI uses fixed-width, explicitly
// aligned fields, so the generated file serves every 64-bit Linux
// architecture; abi_test.go asserts the sizes and offsets.

package uverbs

/*
#include <sys/socket.h>
#include <netinet/in.h>
#include <rdma/rdma_user_ioctl_cmds.h>
#include <rdma/ib_user_ioctl_cmds.h>
#include <rdma/ib_user_ioctl_verbs.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/ib_user_sa.h>
#include <rdma/rdma_user_cm.h>
#include <rdma/rdma_user_rxe.h>
#include <rdma/siw-abi.h>
#include <rdma/vmw_pvrdma-abi.h>
#include <rdma/mlx5-abi.h>
*/
import "C"

// Socket addresses embedded in rdma_cm commands.
type (
	SockaddrStorage C.struct___kernel_sockaddr_storage
	SockaddrIn6     C.struct_sockaddr_in6
	In6Addr         C.struct_in6_addr
)

// ioctl framing (rdma_user_ioctl_cmds.h).
type (
	IoctlHdr C.struct_ib_uverbs_ioctl_hdr
	Attr     C.struct_ib_uverbs_attr
)

// Legacy write() framing and events (ib_user_verbs.h).
type (
	CmdHdr         C.struct_ib_uverbs_cmd_hdr
	ExCmdHdr       C.struct_ib_uverbs_ex_cmd_hdr
	AsyncEventDesc C.struct_ib_uverbs_async_event_desc
	CompEventDesc  C.struct_ib_uverbs_comp_event_desc
)

// Context and device queries.
type (
	GetContext        C.struct_ib_uverbs_get_context
	GetContextResp    C.struct_ib_uverbs_get_context_resp
	QueryDevice       C.struct_ib_uverbs_query_device
	QueryDeviceResp   C.struct_ib_uverbs_query_device_resp
	ExQueryDevice     C.struct_ib_uverbs_ex_query_device
	OdpCaps           C.struct_ib_uverbs_odp_caps
	RssCaps           C.struct_ib_uverbs_rss_caps
	TmCaps            C.struct_ib_uverbs_tm_caps
	CqModerationCaps  C.struct_ib_uverbs_cq_moderation_caps
	ExQueryDeviceResp C.struct_ib_uverbs_ex_query_device_resp
	QueryPort         C.struct_ib_uverbs_query_port
	QueryPortResp     C.struct_ib_uverbs_query_port_resp
	QueryPortRespEx   C.struct_ib_uverbs_query_port_resp_ex
	GidEntry          C.struct_ib_uverbs_gid_entry
)

// Protection domains, memory regions and windows.
type (
	AllocPd     C.struct_ib_uverbs_alloc_pd
	AllocPdResp C.struct_ib_uverbs_alloc_pd_resp
	DeallocPd   C.struct_ib_uverbs_dealloc_pd
	RegMr       C.struct_ib_uverbs_reg_mr
	RegMrResp   C.struct_ib_uverbs_reg_mr_resp
	ReregMr     C.struct_ib_uverbs_rereg_mr
	ReregMrResp C.struct_ib_uverbs_rereg_mr_resp
	DeregMr     C.struct_ib_uverbs_dereg_mr
	AllocMw     C.struct_ib_uverbs_alloc_mw
	AllocMwResp C.struct_ib_uverbs_alloc_mw_resp
	DeallocMw   C.struct_ib_uverbs_dealloc_mw
)

// Completion channels and completion queues.
type (
	CreateCompChannel     C.struct_ib_uverbs_create_comp_channel
	CreateCompChannelResp C.struct_ib_uverbs_create_comp_channel_resp
	CreateCq              C.struct_ib_uverbs_create_cq
	CreateCqResp          C.struct_ib_uverbs_create_cq_resp
	ResizeCq              C.struct_ib_uverbs_resize_cq
	ResizeCqResp          C.struct_ib_uverbs_resize_cq_resp
	Wc                    C.struct_ib_uverbs_wc
	ReqNotifyCq           C.struct_ib_uverbs_req_notify_cq
	DestroyCq             C.struct_ib_uverbs_destroy_cq
	DestroyCqResp         C.struct_ib_uverbs_destroy_cq_resp
)

// Queue pairs and address handles.
type (
	GlobalRoute    C.struct_ib_uverbs_global_route
	AhAttr         C.struct_ib_uverbs_ah_attr
	QpAttr         C.struct_ib_uverbs_qp_attr
	QpCap          C.struct_ib_uverbs_qp_cap
	QpDest         C.struct_ib_uverbs_qp_dest
	QueryQp        C.struct_ib_uverbs_query_qp
	QueryQpResp    C.struct_ib_uverbs_query_qp_resp
	ModifyQp       C.struct_ib_uverbs_modify_qp
	ExModifyQp     C.struct_ib_uverbs_ex_modify_qp
	ExModifyQpResp C.struct_ib_uverbs_ex_modify_qp_resp
	DestroyQpResp  C.struct_ib_uverbs_destroy_qp_resp
	Sge            C.struct_ib_uverbs_sge
	SendWr         C.struct_ib_uverbs_send_wr
	PostSend       C.struct_ib_uverbs_post_send
	PostSendResp   C.struct_ib_uverbs_post_send_resp
	CreateAh       C.struct_ib_uverbs_create_ah
	CreateAhResp   C.struct_ib_uverbs_create_ah_resp
	DestroyAh      C.struct_ib_uverbs_destroy_ah
	AttachMcast    C.struct_ib_uverbs_attach_mcast
	DetachMcast    C.struct_ib_uverbs_detach_mcast
)

// Shared receive queues.
type (
	ModifySrq      C.struct_ib_uverbs_modify_srq
	QuerySrq       C.struct_ib_uverbs_query_srq
	QuerySrqResp   C.struct_ib_uverbs_query_srq_resp
	DestroySrqResp C.struct_ib_uverbs_destroy_srq_resp
)

// rdma_cm / ucma (rdma_user_cm.h, ib_user_sa.h).
type (
	UcmCmdHdr         C.struct_rdma_ucm_cmd_hdr
	UcmCreateID       C.struct_rdma_ucm_create_id
	UcmCreateIDResp   C.struct_rdma_ucm_create_id_resp
	UcmDestroyID      C.struct_rdma_ucm_destroy_id
	UcmDestroyIDResp  C.struct_rdma_ucm_destroy_id_resp
	UcmBind           C.struct_rdma_ucm_bind
	UcmResolveAddr    C.struct_rdma_ucm_resolve_addr
	UcmResolveRoute   C.struct_rdma_ucm_resolve_route
	UcmQuery          C.struct_rdma_ucm_query
	UcmQueryAddrResp  C.struct_rdma_ucm_query_addr_resp
	UcmQueryPathResp  C.struct_rdma_ucm_query_path_resp
	UcmQueryRouteResp C.struct_rdma_ucm_query_route_resp
	PathRecData       C.struct_ib_path_rec_data
	UserPathRec       C.struct_ib_user_path_rec
	UcmConnParam      C.struct_rdma_ucm_conn_param
	UcmUdParam        C.struct_rdma_ucm_ud_param
	UcmEce            C.struct_rdma_ucm_ece
	UcmConnect        C.struct_rdma_ucm_connect
	UcmListen         C.struct_rdma_ucm_listen
	UcmAccept         C.struct_rdma_ucm_accept
	UcmReject         C.struct_rdma_ucm_reject
	UcmDisconnect     C.struct_rdma_ucm_disconnect
	UcmInitQpAttr     C.struct_rdma_ucm_init_qp_attr
	UcmNotify         C.struct_rdma_ucm_notify
	UcmJoinMcast      C.struct_rdma_ucm_join_mcast
	UcmGetEvent       C.struct_rdma_ucm_get_event
	UcmEventResp      C.struct_rdma_ucm_event_resp
	UcmSetOption      C.struct_rdma_ucm_set_option
	UcmMigrateID      C.struct_rdma_ucm_migrate_id
	UcmMigrateResp    C.struct_rdma_ucm_migrate_resp
)

// The rxe (Soft-RoCE) provider ABI (rdma_user_rxe.h).
type (
	RxeGlobalRoute   C.struct_rxe_global_route
	RxeAv            C.struct_rxe_av
	RxeSendWr        C.struct_rxe_send_wr
	RxeSge           C.struct_rxe_sge
	RxeMminfo        C.struct_mminfo
	RxeDmaInfo       C.struct_rxe_dma_info
	RxeSendWqe       C.struct_rxe_send_wqe
	RxeRecvWqe       C.struct_rxe_recv_wqe
	RxeCreateAhResp  C.struct_rxe_create_ah_resp
	RxeCreateCqResp  C.struct_rxe_create_cq_resp
	RxeResizeCqResp  C.struct_rxe_resize_cq_resp
	RxeCreateQpResp  C.struct_rxe_create_qp_resp
	RxeCreateSrqResp C.struct_rxe_create_srq_resp
	RxeModifySrqCmd  C.struct_rxe_modify_srq_cmd
	RxeQueueBuf      C.struct_rxe_queue_buf
)

// The siw (soft-iWARP) provider ABI (siw-abi.h): create responses carrying the
// mmap keys of the rings, and the ring elements, whose ownership is a flag
// word in each element rather than producer/consumer indices.
type (
	SiwUrespCreateCq  C.struct_siw_uresp_create_cq
	SiwUrespCreateQp  C.struct_siw_uresp_create_qp
	SiwUreqRegMr      C.struct_siw_ureq_reg_mr
	SiwUrespRegMr     C.struct_siw_uresp_reg_mr
	SiwUrespCreateSrq C.struct_siw_uresp_create_srq
	SiwUrespAllocCtx  C.struct_siw_uresp_alloc_ctx
	SiwSge            C.struct_siw_sge
	SiwSqe            C.struct_siw_sqe
	SiwRqe            C.struct_siw_rqe
	SiwCqe            C.struct_siw_cqe
	SiwCqCtrl         C.struct_siw_cq_ctrl
)

// The vmw_pvrdma provider ABI (vmw_pvrdma-abi.h): the create commands' driver
// data (user buffers the kernel pins) and responses (queue handles), and the
// work queue and completion elements the device reads and writes in those
// buffers. The ring indices (struct pvrdma_ring) are not UAPI: they live in
// the kernel driver's and rdma-core's pvrdma_ring.h (two __u32), and the
// provider declares them itself.
type (
	PvrdmaAllocUcontextResp C.struct_pvrdma_alloc_ucontext_resp
	PvrdmaAllocPdResp       C.struct_pvrdma_alloc_pd_resp
	PvrdmaCreateCq          C.struct_pvrdma_create_cq
	PvrdmaCreateCqResp      C.struct_pvrdma_create_cq_resp
	PvrdmaResizeCq          C.struct_pvrdma_resize_cq
	PvrdmaCreateSrq         C.struct_pvrdma_create_srq
	PvrdmaCreateSrqResp     C.struct_pvrdma_create_srq_resp
	PvrdmaCreateQp          C.struct_pvrdma_create_qp
	PvrdmaCreateQpResp      C.struct_pvrdma_create_qp_resp
	PvrdmaAv                C.struct_pvrdma_av
	PvrdmaSge               C.struct_pvrdma_sge
	PvrdmaRqWqeHdr          C.struct_pvrdma_rq_wqe_hdr
	PvrdmaSqWqeHdr          C.struct_pvrdma_sq_wqe_hdr
	PvrdmaCqe               C.struct_pvrdma_cqe
)

// The mlx5 provider ABI (mlx5-abi.h): the driver data of the commands
// goverbs' mlx5 provider sends and the answers it reads. The queues'
// formats (CQEs, WQE segments) are the device's, not UAPI: rdma-core's
// mlx5dv.h, declared by the provider itself.
type (
	Mlx5IbAllocUcontextReqV2 C.struct_mlx5_ib_alloc_ucontext_req_v2
	Mlx5IbAllocUcontextResp  C.struct_mlx5_ib_alloc_ucontext_resp
	Mlx5IbAllocPdResp        C.struct_mlx5_ib_alloc_pd_resp
	Mlx5IbCreateAhResp       C.struct_mlx5_ib_create_ah_resp
	Mlx5IbTsoCaps            C.struct_mlx5_ib_tso_caps
	Mlx5IbRssCaps            C.struct_mlx5_ib_rss_caps
	Mlx5IbCqeCompCaps        C.struct_mlx5_ib_cqe_comp_caps
	Mlx5PacketPacingCaps     C.struct_mlx5_packet_pacing_caps
	Mlx5IbSwParsingCaps      C.struct_mlx5_ib_sw_parsing_caps
	Mlx5IbStridingRqCaps     C.struct_mlx5_ib_striding_rq_caps
	Mlx5IbDciStreamsCaps     C.struct_mlx5_ib_dci_streams_caps
	Mlx5IbUapiReg            C.struct_mlx5_ib_uapi_reg
	Mlx5IbQueryDeviceResp    C.struct_mlx5_ib_query_device_resp
	Mlx5IbCreateCq           C.struct_mlx5_ib_create_cq
	Mlx5IbCreateCqResp       C.struct_mlx5_ib_create_cq_resp
	Mlx5IbResizeCq           C.struct_mlx5_ib_resize_cq
	Mlx5IbCreateSrq          C.struct_mlx5_ib_create_srq
	Mlx5IbCreateSrqResp      C.struct_mlx5_ib_create_srq_resp
	Mlx5IbCreateQpDciStreams C.struct_mlx5_ib_create_qp_dci_streams
	Mlx5IbCreateQp           C.struct_mlx5_ib_create_qp
	Mlx5IbCreateQpResp       C.struct_mlx5_ib_create_qp_resp
)
