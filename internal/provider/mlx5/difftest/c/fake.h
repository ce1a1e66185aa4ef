// fake.h: the fake mlx5 device, as the device description file gives it.
#ifndef FAKE_H
#define FAKE_H
#include <stdint.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/mlx5-abi.h>

#define MAX_GIDS 128

struct dev {
	char name[64];
	char modalias[128];
	char board_id[64];
	uint64_t node_guid, sys_image_guid, fw_ver, max_mr_size, page_size_cap;
	uint32_t vendor_id, vendor_part_id, hw_ver;
	uint32_t max_qp, max_qp_wr, device_cap_flags, max_sge, max_sge_rd, max_cq, max_cqe;
	uint32_t max_mr, max_pd, max_qp_rd_atom, max_qp_init_rd_atom, atomic_cap;
	uint32_t max_srq, max_srq_wr, max_srq_sge, max_pkeys, local_ca_ack_delay;
	uint32_t max_mw, max_mcast_grp, max_mcast_qp_attach, max_total_mcast_qp_attach, max_ah;
	uint32_t num_comp_vectors;
	// extended query device
	uint64_t odp_general_caps, timestamp_mask, hca_core_clock, device_cap_flags_ex, max_dm_size;
	uint32_t rc_odp_caps, uc_odp_caps, ud_odp_caps, xrc_odp_caps;
	uint32_t rss_supported_qpts, max_rwq_indirection_tables, max_rwq_indirection_table_size;
	uint32_t max_wq_type_rq, raw_packet_caps;
	uint32_t tm_max_rndv_hdr_size, tm_max_num_tags, tm_flags, tm_max_ops, tm_max_sge;
	uint32_t max_cq_moderation_count, max_cq_moderation_period;
	// its mlx5 driver response
	uint64_t rx_hash_fields_mask;
	uint32_t max_tso, tso_supported_qpts, rx_hash_function, cqe_comp_max_num, cqe_comp_formats;
	uint32_t qp_rate_limit_min, qp_rate_limit_max, pp_supported_qpts;
	// alloc_ucontext response
	uint32_t qp_tab_size, bf_reg_size, tot_bfregs, cache_line_size;
	uint32_t max_sq_desc_sz, max_rq_desc_sz, max_send_wqebb, max_recv_wr, max_srq_recv_wr;
	uint32_t cqe_version, cmds_supp_uhw, eth_min_inline, log_uar_size, num_uars_per_page;
	// port
	uint32_t link_layer, port_state, max_mtu, active_mtu, gid_tbl_len, pkey_tbl_len, lid;
	uint32_t port_cap_flags, max_msg_sz, sm_lid, lmc, max_vl_num, sm_sl, subnet_timeout;
	uint32_t phys_state, active_width, active_speed, bad_pkey_cntr, qkey_viol_cntr;
	char gids[MAX_GIDS][40]; // gidN, as sysfs writes it; empty: zero
	// numbering the fake kernel hands out
	uint32_t pdn_base, cqn_base, qpn_base, mkey_base, first_bfreg, srqn_base;
	// port 1 as a RoCE port ("open roce")
	uint32_t roce_port_cap_flags, roce_gid_v2;
	uint64_t roce_neigh_mac;
	char roce_gid0[48], roce_gid1[48], roce_gid2[48], roce_gid3[48];
};

int load_device(const char *path, struct dev *d);
void fake_ucontext_resp(const struct dev *d, struct mlx5_ib_alloc_ucontext_resp *r);
void fake_query_device(const struct dev *d, struct ib_uverbs_ex_query_device_resp *core,
		       struct mlx5_ib_query_device_resp *r);
void fake_query_port(const struct dev *d, struct ib_uverbs_query_port_resp *r);
#define ROCE_GIDS 4
void fake_roce_port(const struct dev *d, struct ib_uverbs_query_port_resp *r);
int fake_roce_gid(const struct dev *d, unsigned index, uint8_t gid[16]);
void fake_roce_dmac(const struct dev *d, const uint8_t dgid[16], uint8_t mac[6]);
int fake_cqe(const char *spec, uint8_t cqe[64], uint32_t *qpn, int *has_uidx);

// Called by the driver (found with dlsym).
void fk_dump(const char *label);
int fk_inject(int cq, const char *spec);
int fk_event(int cq);
int fk_roce(void);
uint8_t *fk_cq_ring(int cq, uint32_t *nent);
#endif
