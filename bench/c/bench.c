/* Set-up for the C micro-benchmark: see bench.h. */
#define _GNU_SOURCE
#include "bench.h"

#include <arpa/inet.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *bench_addr(void)
{
	const char *a = getenv("GOVERBS_BENCH_ADDR");
	return a ? a : "169.254.77.1";
}

struct bp_dev *bp_open(const char *name)
{
	if (!name)
		name = getenv("GOVERBS_BENCH_DEV");
	if (!name)
		name = "rxe0";
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_context *ctx = NULL;
	for (int i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	if (list)
		ibv_free_device_list(list);
	if (!ctx) {
		fprintf(stderr, "bench: cannot open %s\n", name);
		return NULL;
	}
	struct bp_dev *d = calloc(1, sizeof(*d));
	d->ctx = ctx;
	d->pd = ibv_alloc_pd(ctx);
	if (posix_memalign((void **)&d->buf, 4096, BP_BUF))
		return NULL;
	memset(d->buf, 0, BP_BUF);
	d->mr = ibv_reg_mr(d->pd, d->buf, BP_BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!d->pd || !d->mr) {
		fprintf(stderr, "bench: PD/MR failed\n");
		return NULL;
	}
	/* The IPv4-mapped RoCEv2 GID of the test address on port 1. */
	struct ibv_port_attr pa;
	if (ibv_query_port(ctx, 1, &pa))
		return NULL;
	unsigned char want[16] = {0};
	want[10] = want[11] = 0xff;
	inet_pton(AF_INET, bench_addr(), want + 12);
	d->gid_index = -1;
	for (int i = 0; i < pa.gid_tbl_len; i++) {
		union ibv_gid g;
		if (ibv_query_gid(ctx, 1, i, &g) == 0 && !memcmp(g.raw, want, 16)) {
			d->gid_index = i;
			d->gid = g;
			break;
		}
	}
	if (d->gid_index < 0) {
		fprintf(stderr, "bench: no GID for %s\n", bench_addr());
		return NULL;
	}
	return d;
}

static int side_new(struct bp_dev *d, struct bp_side *s)
{
	s->scq = ibv_create_cq(d->ctx, BP_CQE, NULL, NULL, 0);
	s->rcq = ibv_create_cq(d->ctx, BP_CQE, NULL, NULL, 0);
	if (!s->scq || !s->rcq)
		return -1;
	struct ibv_qp_init_attr ia = {
		.send_cq = s->scq, .recv_cq = s->rcq, .qp_type = IBV_QPT_RC,
		.cap = {.max_send_wr = BP_DEPTH, .max_recv_wr = BP_DEPTH, .max_send_sge = 1, .max_recv_sge = 1, .max_inline_data = 64},
	};
	s->qp = ibv_create_qp(d->pd, &ia);
	if (!s->qp)
		return -1;
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1,
				.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ};
	return ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

static int connect_side(struct bp_dev *d, struct bp_side *s, struct bp_side *peer, uint32_t psn, uint32_t peer_psn)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = peer->qp->qp_num,
		.rq_psn = peer_psn, .max_dest_rd_atomic = 4, .min_rnr_timer = 1,
		.ah_attr = {.is_global = 1, .port_num = 1,
			    .grh = {.dgid = d->gid, .sgid_index = d->gid_index, .hop_limit = 1}},
	};
	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				       IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -1;
	struct ibv_qp_attr r = {.qp_state = IBV_QPS_RTS, .sq_psn = psn, .timeout = 14, .retry_cnt = 7,
				.rnr_retry = 7, .max_rd_atomic = 4};
	return ibv_modify_qp(s->qp, &r, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					       IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

struct bp_pair *bp_pair_new(struct bp_dev *d)
{
	struct bp_pair *p = calloc(1, sizeof(*p));
	p->dev = d;
	if (side_new(d, &p->a) || side_new(d, &p->b) ||
	    connect_side(d, &p->a, &p->b, 0x1000, 0x2000) || connect_side(d, &p->b, &p->a, 0x2000, 0x1000)) {
		perror("bench: pair");
		return NULL;
	}
	return p;
}

struct bp_side *bp_init_qp(struct bp_dev *d)
{
	struct bp_side *s = calloc(1, sizeof(*s));
	if (side_new(d, s)) {
		perror("bench: QP");
		return NULL;
	}
	return s;
}

int bp_reinit(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RESET};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		return -1;
	struct ibv_qp_attr i = {.qp_state = IBV_QPS_INIT, .port_num = 1,
				.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ};
	return ibv_modify_qp(qp, &i, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

int bp_pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	if (cpu < 0) {
		for (int c = 0; c < CPU_SETSIZE; c++)
			CPU_SET(c, &set);
	} else {
		CPU_SET(cpu, &set);
	}
	return sched_setaffinity(0, sizeof(set), &set);
}
