package mlx5

import (
	"testing"
	"unsafe"
)

// The driver data structs have the sizes and offsets of the kernel's
// rdma/mlx5-abi.h (Linux 6.1/6.12, as rdma-core 44 ships it), measured with
// gcc from that header.
func TestABILayout(t *testing.T) {
	sizes := []struct {
		name      string
		got, want uintptr
	}{
		{"mlx5_ib_alloc_ucontext_req_v2", unsafe.Sizeof(allocUcontextReq{}), 32},
		{"mlx5_ib_alloc_ucontext_resp", unsafe.Sizeof(allocUcontextResp{}), 72},
		{"mlx5_ib_alloc_pd_resp", unsafe.Sizeof(allocPDResp{}), 4},
		{"mlx5_ib_query_device_resp", unsafe.Sizeof(queryDeviceResp{}), 104},
		{"mlx5_ib_create_cq", unsafe.Sizeof(createCQ{}), 32},
		{"mlx5_ib_create_cq_resp", unsafe.Sizeof(createCQResp{}), 8},
		{"mlx5_ib_create_qp", unsafe.Sizeof(createQP{}), 56},
		{"mlx5_ib_create_qp_resp", unsafe.Sizeof(createQPResp{}), 40},
		{"mlx5_ib_create_ah_resp", unsafe.Sizeof(createAHResp{}), 16},
	}
	for _, s := range sizes {
		if s.got != s.want {
			t.Errorf("sizeof(struct %s) = %d, want %d", s.name, s.got, s.want)
		}
	}
	offsets := []struct {
		name      string
		got, want uintptr
	}{
		{"req_v2.max_cqe_version", unsafe.Offsetof(allocUcontextReq{}.MaxCQEVersion), 16},
		{"req_v2.lib_caps", unsafe.Offsetof(allocUcontextReq{}.LibCaps), 24},
		{"resp.max_send_wqebb", unsafe.Offsetof(allocUcontextResp{}.MaxSendWQEBB), 20},
		{"resp.cqe_version", unsafe.Offsetof(allocUcontextResp{}.CQEVersion), 44},
		{"resp.hca_core_clock_offset", unsafe.Offsetof(allocUcontextResp{}.HCACoreClockOffset), 48},
		{"resp.num_uars_per_page", unsafe.Offsetof(allocUcontextResp{}.NumUARsPerPage), 60},
		{"resp.dump_fill_mkey", unsafe.Offsetof(allocUcontextResp{}.DumpFillMkey), 68},
		{"create_cq.cqe_size", unsafe.Offsetof(createCQ{}.CQESize), 16},
		{"create_cq.flags", unsafe.Offsetof(createCQ{}.Flags), 22},
		{"create_cq.uar_page_index", unsafe.Offsetof(createCQ{}.UARPageIndex), 24},
		{"create_qp.uidx", unsafe.Offsetof(createQP{}.UIdx), 32},
		{"create_qp.bfreg_index", unsafe.Offsetof(createQP{}.BfregIndex), 36},
		{"create_qp.sq_buf_addr", unsafe.Offsetof(createQP{}.SQBufAddr), 40},
		{"create_qp.ece_options", unsafe.Offsetof(createQP{}.ECEOptions), 48},
		{"create_qp_resp.comp_mask", unsafe.Offsetof(createQPResp{}.CompMask), 8},
		{"create_qp_resp.tir_icm_addr", unsafe.Offsetof(createQPResp{}.TIRICMAddr), 32},
		{"create_ah_resp.dmac", unsafe.Offsetof(createAHResp{}.DMAC), 4},
	}
	for _, o := range offsets {
		if o.got != o.want {
			t.Errorf("offsetof(%s) = %d, want %d", o.name, o.got, o.want)
		}
	}
}
