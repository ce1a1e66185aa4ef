// device.c: the device description file and what the fake kernel answers
// from it. The Go fake (../fake_test.go) reads the same file.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <endian.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake.h"

struct field {
	const char *key;
	size_t off;
	int size; // 4, 8, or 0 for a string of the given max
	size_t max;
};
#define U32(k) {#k, offsetof(struct dev, k), 4, 0}
#define U64(k) {#k, offsetof(struct dev, k), 8, 0}
#define STR(k) {#k, offsetof(struct dev, k), 0, sizeof(((struct dev *)0)->k)}
static const struct field fields[] = {
	STR(name), STR(modalias), STR(board_id), U64(node_guid), U64(sys_image_guid), U64(fw_ver),
	U64(max_mr_size), U64(page_size_cap), U32(max_mw), U32(max_mcast_grp), U32(max_mcast_qp_attach),
	U32(max_total_mcast_qp_attach), U32(max_ah), U64(odp_general_caps), U64(timestamp_mask),
	U64(hca_core_clock), U64(device_cap_flags_ex), U64(max_dm_size), U32(rc_odp_caps),
	U32(uc_odp_caps), U32(ud_odp_caps), U32(xrc_odp_caps), U32(rss_supported_qpts),
	U32(max_rwq_indirection_tables), U32(max_rwq_indirection_table_size), U32(max_wq_type_rq),
	U32(raw_packet_caps), U32(tm_max_rndv_hdr_size), U32(tm_max_num_tags), U32(tm_flags),
	U32(tm_max_ops), U32(tm_max_sge), U32(max_cq_moderation_count), U32(max_cq_moderation_period),
	U64(rx_hash_fields_mask), U32(max_tso), U32(tso_supported_qpts), U32(rx_hash_function),
	U32(cqe_comp_max_num), U32(cqe_comp_formats), U32(qp_rate_limit_min), U32(qp_rate_limit_max),
	U32(pp_supported_qpts), U32(sm_lid), U32(lmc), U32(max_vl_num), U32(sm_sl), U32(subnet_timeout),
	U32(phys_state), U32(active_width), U32(active_speed), U32(bad_pkey_cntr), U32(qkey_viol_cntr),
	U32(vendor_id), U32(vendor_part_id), U32(hw_ver), U32(max_qp), U32(max_qp_wr),
	U32(device_cap_flags), U32(max_sge), U32(max_sge_rd), U32(max_cq), U32(max_cqe),
	U32(max_mr), U32(max_pd), U32(max_qp_rd_atom), U32(max_qp_init_rd_atom), U32(atomic_cap),
	U32(max_srq), U32(max_srq_wr), U32(max_srq_sge), U32(max_pkeys), U32(local_ca_ack_delay),
	U32(num_comp_vectors), U32(qp_tab_size), U32(bf_reg_size), U32(tot_bfregs),
	U32(cache_line_size), U32(max_sq_desc_sz), U32(max_rq_desc_sz), U32(max_send_wqebb),
	U32(max_recv_wr), U32(max_srq_recv_wr), U32(cqe_version), U32(cmds_supp_uhw),
	U32(eth_min_inline), U32(log_uar_size), U32(num_uars_per_page), U32(link_layer),
	U32(port_state), U32(max_mtu), U32(active_mtu), U32(gid_tbl_len), U32(pkey_tbl_len),
	U32(lid), U32(port_cap_flags), U32(max_msg_sz), U32(pdn_base), U32(cqn_base),
	U32(qpn_base), U32(mkey_base), U32(first_bfreg), U32(srqn_base),
	U32(roce_port_cap_flags), U32(roce_gid_v2), U64(roce_neigh_mac),
	STR(roce_gid0), STR(roce_gid1), STR(roce_gid2), STR(roce_gid3),
};

int load_device(const char *path, struct dev *d)
{
	FILE *f = fopen(path, "r");
	char line[512];
	int lineno = 0;
	if (!f)
		return -1;
	memset(d, 0, sizeof(*d));
	while (fgets(line, sizeof(line), f)) {
		char key[64], val[256];
		lineno++;
		char *hash = strchr(line, '#');
		if (hash)
			*hash = 0;
		if (sscanf(line, "%63s %255s", key, val) != 2)
			continue;
		// gidN: entry N of port 1's GID table, eight groups of four
		// hex digits as sysfs has them.
		if (strncmp(key, "gid", 3) == 0 && key[3] >= '0' && key[3] <= '9') {
			char *end;
			unsigned long n = strtoul(key + 3, &end, 10);
			unsigned g[8];
			char tail;
			if (*end || n >= MAX_GIDS || strlen(val) != 39 ||
			    sscanf(val, "%4x:%4x:%4x:%4x:%4x:%4x:%4x:%4x%c", &g[0], &g[1], &g[2], &g[3], &g[4],
				   &g[5], &g[6], &g[7], &tail) != 8) {
				fprintf(stderr, "%s:%d: bad GID %s %s\n", path, lineno, key, val);
				fclose(f);
				return -1;
			}
			memcpy(d->gids[n], val, 40); // 39 characters and the NUL
			continue;
		}
		size_t i;
		for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
			if (strcmp(fields[i].key, key) == 0)
				break;
		if (i == sizeof(fields) / sizeof(fields[0])) {
			fprintf(stderr, "%s:%d: unknown key %s\n", path, lineno, key);
			fclose(f);
			return -1;
		}
		const struct field *fl = &fields[i];
		char *p = (char *)d + fl->off;
		if (fl->size == 0) {
			snprintf(p, fl->max, "%s", val);
			continue;
		}
		char *end;
		unsigned long long v = strtoull(val, &end, 0);
		if (*end) {
			fprintf(stderr, "%s:%d: bad number %s\n", path, lineno, val);
			fclose(f);
			return -1;
		}
		if (fl->size == 4)
			*(uint32_t *)p = v;
		else
			*(uint64_t *)p = v;
	}
	fclose(f);
	return 0;
}

void fake_ucontext_resp(const struct dev *d, struct mlx5_ib_alloc_ucontext_resp *r)
{
	memset(r, 0, sizeof(*r));
	r->qp_tab_size = d->qp_tab_size;
	r->bf_reg_size = d->bf_reg_size;
	r->tot_bfregs = d->tot_bfregs;
	r->cache_line_size = d->cache_line_size;
	r->max_sq_desc_sz = d->max_sq_desc_sz;
	r->max_rq_desc_sz = d->max_rq_desc_sz;
	r->max_send_wqebb = d->max_send_wqebb;
	r->max_recv_wr = d->max_recv_wr;
	r->max_srq_recv_wr = d->max_srq_recv_wr;
	r->num_ports = 1;
	r->response_length = sizeof(*r);
	r->cqe_version = d->cqe_version;
	r->cmds_supp_uhw = d->cmds_supp_uhw;
	r->eth_min_inline = d->eth_min_inline;
	r->log_uar_size = d->log_uar_size;
	r->num_uars_per_page = d->num_uars_per_page;
}

void fake_query_device(const struct dev *d, struct ib_uverbs_ex_query_device_resp *core,
		       struct mlx5_ib_query_device_resp *r)
{
	memset(core, 0, sizeof(*core));
	memset(r, 0, sizeof(*r));
	struct ib_uverbs_query_device_resp *b = &core->base;
	b->fw_ver = d->fw_ver;
	b->node_guid = htobe64(d->node_guid);
	b->sys_image_guid = htobe64(d->sys_image_guid);
	b->max_mr_size = d->max_mr_size;
	b->page_size_cap = d->page_size_cap;
	b->vendor_id = d->vendor_id;
	b->vendor_part_id = d->vendor_part_id;
	b->hw_ver = d->hw_ver;
	b->max_qp = d->max_qp;
	b->max_qp_wr = d->max_qp_wr;
	b->device_cap_flags = d->device_cap_flags;
	b->max_sge = d->max_sge;
	b->max_sge_rd = d->max_sge_rd;
	b->max_cq = d->max_cq;
	b->max_cqe = d->max_cqe;
	b->max_mr = d->max_mr;
	b->max_pd = d->max_pd;
	b->max_qp_rd_atom = d->max_qp_rd_atom;
	b->max_qp_init_rd_atom = d->max_qp_init_rd_atom;
	b->max_res_rd_atom = d->max_qp_rd_atom * d->max_qp;
	b->atomic_cap = d->atomic_cap;
	b->max_srq = d->max_srq;
	b->max_srq_wr = d->max_srq_wr;
	b->max_srq_sge = d->max_srq_sge;
	b->max_pkeys = d->max_pkeys;
	b->local_ca_ack_delay = d->local_ca_ack_delay;
	b->phys_port_cnt = 1;
	b->max_mw = d->max_mw;
	b->max_mcast_grp = d->max_mcast_grp;
	b->max_mcast_qp_attach = d->max_mcast_qp_attach;
	b->max_total_mcast_qp_attach = d->max_total_mcast_qp_attach;
	b->max_ah = d->max_ah;
	core->odp_caps.general_caps = d->odp_general_caps;
	core->odp_caps.per_transport_caps.rc_odp_caps = d->rc_odp_caps;
	core->odp_caps.per_transport_caps.uc_odp_caps = d->uc_odp_caps;
	core->odp_caps.per_transport_caps.ud_odp_caps = d->ud_odp_caps;
	core->xrc_odp_caps = d->xrc_odp_caps;
	core->timestamp_mask = d->timestamp_mask;
	core->hca_core_clock = d->hca_core_clock;
	core->device_cap_flags_ex = d->device_cap_flags_ex;
	core->rss_caps.supported_qpts = d->rss_supported_qpts;
	core->rss_caps.max_rwq_indirection_tables = d->max_rwq_indirection_tables;
	core->rss_caps.max_rwq_indirection_table_size = d->max_rwq_indirection_table_size;
	core->max_wq_type_rq = d->max_wq_type_rq;
	core->raw_packet_caps = d->raw_packet_caps;
	core->tm_caps.max_rndv_hdr_size = d->tm_max_rndv_hdr_size;
	core->tm_caps.max_num_tags = d->tm_max_num_tags;
	core->tm_caps.flags = d->tm_flags;
	core->tm_caps.max_ops = d->tm_max_ops;
	core->tm_caps.max_sge = d->tm_max_sge;
	core->cq_moderation_caps.max_cq_moderation_count = d->max_cq_moderation_count;
	core->cq_moderation_caps.max_cq_moderation_period = d->max_cq_moderation_period;
	core->max_dm_size = d->max_dm_size;
	r->response_length = sizeof(*r);
	r->tso_caps.max_tso = d->max_tso;
	r->tso_caps.supported_qpts = d->tso_supported_qpts;
	r->rss_caps.rx_hash_fields_mask = d->rx_hash_fields_mask;
	r->rss_caps.rx_hash_function = d->rx_hash_function;
	r->cqe_comp_caps.max_num = d->cqe_comp_max_num;
	r->cqe_comp_caps.supported_format = d->cqe_comp_formats;
	r->packet_pacing_caps.qp_rate_limit_min = d->qp_rate_limit_min;
	r->packet_pacing_caps.qp_rate_limit_max = d->qp_rate_limit_max;
	r->packet_pacing_caps.supported_qpts = d->pp_supported_qpts;
}

void fake_query_port(const struct dev *d, struct ib_uverbs_query_port_resp *r)
{
	memset(r, 0, sizeof(*r));
	r->port_cap_flags = d->port_cap_flags;
	r->max_msg_sz = d->max_msg_sz;
	r->gid_tbl_len = d->gid_tbl_len;
	r->lid = d->lid;
	r->state = d->port_state;
	r->max_mtu = d->max_mtu;
	r->active_mtu = d->active_mtu;
	r->pkey_tbl_len = d->pkey_tbl_len;
	r->link_layer = d->link_layer;
	r->sm_lid = d->sm_lid;
	r->lmc = d->lmc;
	r->max_vl_num = d->max_vl_num;
	r->sm_sl = d->sm_sl;
	r->subnet_timeout = d->subnet_timeout;
	r->bad_pkey_cntr = d->bad_pkey_cntr;
	r->qkey_viol_cntr = d->qkey_viol_cntr;
	r->phys_state = d->phys_state;
	r->active_width = d->active_width;
	r->active_speed = d->active_speed;
}

static void put32(uint8_t *p, uint32_t v) { v = htobe32(v); memcpy(p, &v, 4); }
static void put16(uint8_t *p, uint16_t v) { v = htobe16(v); memcpy(p, &v, 2); }

// fake_cqe builds a 64-byte CQE from spec, "KIND key=value ...":
// KIND req, resp_send, resp_send_imm, resp_send_inv, resp_write_imm,
// req_err, resp_err, or a number (the opcode); keys qpn, wqe (wqe_counter),
// bytes (byte_cnt), imm (imm_inval_pkey), syndrome, vendor, sop (the
// requester's send opcode in sop_drop_qpn's top byte), flags (flags_rqpn's
// top byte), rqpn, slid, owner (the owner bit's value instead of the pass's:
// the fake then writes a CQE still owned by the device), opbits (op_own's
// low bits but the owner bit: 0x4 scatter to CQE 32, 0x8 of 64), uidx (the
// user index; else the fake puts in the QP's).
int fake_cqe(const char *spec, uint8_t cqe[64], uint32_t *qpn, int *has_uidx)
{
	static const struct { const char *n; int op; } kinds[] = {
		{"req", 0}, {"resp_write_imm", 1}, {"resp_send", 2}, {"resp_send_imm", 3},
		{"resp_send_inv", 4}, {"req_err", 13}, {"resp_err", 14}, {"invalid", 15},
	};
	char buf[512], *save, *tok;
	int op = -1;
	uint32_t wqe = 0, bytes = 0, imm = 0, synd = 0, vendor = 0, sop = 0, flags = 0, rqpn = 0, slid = 0, opbits = 0, uidx = 0;
	snprintf(buf, sizeof(buf), "%s", spec);
	memset(cqe, 0, 64);
	*qpn = 0;
	*has_uidx = 0;
	for (tok = strtok_r(buf, " \t\n", &save); tok; tok = strtok_r(NULL, " \t\n", &save)) {
		char *eq = strchr(tok, '=');
		if (op < 0 && !eq) {
			for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
				if (strcmp(tok, kinds[i].n) == 0)
					op = kinds[i].op;
			if (op < 0) {
				char *end;
				op = strtoul(tok, &end, 0);
				if (*end || op > 15) {
					fprintf(stderr, "cqe: bad kind %s\n", tok);
					return -1;
				}
			}
			continue;
		}
		if (!eq) {
			fprintf(stderr, "cqe: bad word %s\n", tok);
			return -1;
		}
		*eq = 0;
		char *end;
		uint32_t v = strtoul(eq + 1, &end, 0);
		if (*end) {
			fprintf(stderr, "cqe: bad value %s\n", eq + 1);
			return -1;
		}
		if (!strcmp(tok, "qpn")) *qpn = v;
		else if (!strcmp(tok, "wqe")) wqe = v;
		else if (!strcmp(tok, "bytes")) bytes = v;
		else if (!strcmp(tok, "imm")) imm = v;
		else if (!strcmp(tok, "syndrome")) synd = v;
		else if (!strcmp(tok, "vendor")) vendor = v;
		else if (!strcmp(tok, "sop")) sop = v;
		else if (!strcmp(tok, "flags")) flags = v;
		else if (!strcmp(tok, "rqpn")) rqpn = v;
		else if (!strcmp(tok, "slid")) slid = v;
		else if (!strcmp(tok, "opbits")) opbits = v;
		else if (!strcmp(tok, "uidx")) { uidx = v; *has_uidx = 1; }
		else {
			fprintf(stderr, "cqe: unknown key %s\n", tok);
			return -1;
		}
	}
	if (op < 0) {
		fprintf(stderr, "cqe: no kind\n");
		return -1;
	}
	put32(cqe + 32, uidx & 0xffffff);
	put16(cqe + 22, slid);
	put32(cqe + 24, flags << 24 | (rqpn & 0xffffff));
	put32(cqe + 36, imm);
	put32(cqe + 44, bytes);
	put32(cqe + 56, sop << 24 | (*qpn & 0xffffff));
	put16(cqe + 60, wqe);
	if (op == 13 || op == 14) {
		cqe[54] = vendor;
		cqe[55] = synd;
	}
	cqe[63] = op << 4 | (opbits & 0xe);
	return 0;
}

// fake_roce_port is QUERY_PORT's answer for port 1 as a RoCE port.
void fake_roce_port(const struct dev *d, struct ib_uverbs_query_port_resp *r)
{
	fake_query_port(d, r);
	r->link_layer = 2; // IBV_LINK_LAYER_ETHERNET
	r->lid = 0;
	r->port_cap_flags = d->roce_port_cap_flags;
}

// fake_roce_gid writes GID index of the RoCE port into gid and returns
// 1 for a RoCE v2 GID, 0 for v1, -1 for an empty entry.
int fake_roce_gid(const struct dev *d, unsigned index, uint8_t gid[16])
{
	const char *s[ROCE_GIDS] = {d->roce_gid0, d->roce_gid1, d->roce_gid2, d->roce_gid3};
	static const uint8_t zero[16];
	memset(gid, 0, 16);
	if (index >= ROCE_GIDS || !s[index][0] || inet_pton(AF_INET6, s[index], gid) != 1 ||
	    memcmp(gid, zero, 16) == 0)
		return -1;
	return (d->roce_gid_v2 >> index) & 1;
}

// fake_roce_dmac is the MAC a kernel resolves for the destination GID
// (see device.txt).
void fake_roce_dmac(const struct dev *d, const uint8_t g[16], uint8_t mac[6])
{
	static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	if (g[0] == 0xfe && (g[1] & 0xc0) == 0x80) {
		mac[0] = g[8] ^ 2;
		memcpy(mac + 1, g + 9, 2);
		memcpy(mac + 3, g + 13, 3);
	} else if (g[0] == 0xff) {
		mac[0] = mac[1] = 0x33;
		memcpy(mac + 2, g + 12, 4);
	} else if (memcmp(g, v4mapped, 12) == 0 && (g[12] & 0xf0) == 0xe0) {
		mac[0] = 0x01;
		mac[1] = 0x00;
		mac[2] = 0x5e;
		mac[3] = g[13] & 0x7f;
		mac[4] = g[14];
		mac[5] = g[15];
	} else {
		for (int i = 0; i < 5; i++)
			mac[i] = d->roce_neigh_mac >> (40 - 8 * i);
		mac[5] = g[15];
	}
}
