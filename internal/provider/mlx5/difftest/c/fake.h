// fake.h: the fake mlx5 device, as the device description file gives it.
#ifndef FAKE_H
#define FAKE_H
#include <stdint.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/mlx5-abi.h>

struct dev {
	char name[64];
	char modalias[128];
	uint64_t node_guid, sys_image_guid, fw_ver;
	uint32_t vendor_id, vendor_part_id, hw_ver;
	uint32_t max_qp, max_qp_wr, device_cap_flags, max_sge, max_sge_rd, max_cq, max_cqe;
	uint32_t max_mr, max_pd, max_qp_rd_atom, max_qp_init_rd_atom, atomic_cap;
	uint32_t max_srq, max_srq_wr, max_srq_sge, max_pkeys, local_ca_ack_delay;
	uint32_t num_comp_vectors;
	// alloc_ucontext response
	uint32_t qp_tab_size, bf_reg_size, tot_bfregs, cache_line_size;
	uint32_t max_sq_desc_sz, max_rq_desc_sz, max_send_wqebb, max_recv_wr, max_srq_recv_wr;
	uint32_t cqe_version, cmds_supp_uhw, eth_min_inline, log_uar_size, num_uars_per_page;
	// port
	uint32_t link_layer, port_state, max_mtu, active_mtu, gid_tbl_len, pkey_tbl_len, lid;
	uint32_t port_cap_flags, max_msg_sz;
	// numbering the fake kernel hands out
	uint32_t pdn_base, cqn_base, qpn_base, mkey_base, first_bfreg, srqn_base;
};

int load_device(const char *path, struct dev *d);
void fake_ucontext_resp(const struct dev *d, struct mlx5_ib_alloc_ucontext_resp *r);
void fake_query_device(const struct dev *d, struct ib_uverbs_ex_query_device_resp *core,
		       struct mlx5_ib_query_device_resp *r);
void fake_query_port(const struct dev *d, struct ib_uverbs_query_port_resp *r);
int fake_cqe(const char *spec, uint8_t cqe[64], uint32_t *qpn, int *has_uidx);

// Called by the driver (found with dlsym).
void fk_dump(const char *label);
int fk_inject(int cq, const char *spec);
int fk_event(int cq);
uint8_t *fk_cq_ring(int cq, uint32_t *nent);
#endif
