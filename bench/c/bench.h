/*
 * goverbs' C micro-benchmark on libibverbs: the set-up and the per-call
 * wrappers shared by the C driver (main.c, loops in C) and the cgo driver
 * (bench/cgo, loops in Go calling these through cgo).
 *
 * One process, one rxe device, RC QPs connected to each other on that
 * device (rxe loops the traffic through its RoCEv2 path).
 */
#ifndef GOVERBS_BENCH_H
#define GOVERBS_BENCH_H

#include <infiniband/verbs.h>
#include <stdint.h>
#include <time.h>

#define BP_DEPTH 1024 /* send and receive queue depth */
#define BP_CQE 4096
#define BP_MSG 64     /* message size */
#define BP_BUF (1 << 16)
#define BP_LIST 32    /* work requests per list in the _list32 rows */

/* A pair of connected RC QPs, each with its own send and receive CQs. */
struct bp_side {
	struct ibv_cq *scq, *rcq;
	struct ibv_qp *qp;
};

struct bp_dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	char *buf;
	int gid_index;
	union ibv_gid gid;
};

struct bp_pair {
	struct bp_dev *dev;
	struct bp_side a, b;
};

/* bp_open opens the device named name (NULL: $GOVERBS_BENCH_DEV or rxe0). */
struct bp_dev *bp_open(const char *name);
/* bp_pair_new creates and connects a pair; NULL on failure (message on stderr). */
struct bp_pair *bp_pair_new(struct bp_dev *d);
/* bp_qp_init creates a QP with its own CQ and moves it to INIT (for post_recv). */
struct bp_side *bp_init_qp(struct bp_dev *d);
/* bp_reinit moves a QP to RESET and back to INIT: its receive queue is empty again. */
int bp_reinit(struct ibv_qp *qp);
int bp_pin(int cpu);

static inline double bp_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* One receive of BP_MSG bytes at offset off of the buffer. */
static inline int bp_post_recv(struct bp_dev *d, struct ibv_qp *qp, uint64_t wrid, int off)
{
	struct ibv_sge sge = {.addr = (uintptr_t)d->buf + off, .length = BP_MSG, .lkey = d->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = wrid, .sg_list = &sge, .num_sge = 1}, *bad;
	return ibv_post_recv(qp, &wr, &bad);
}

/* One SEND or RDMA WRITE of BP_MSG bytes from offset off to the same offset. */
static inline int bp_post_send(struct bp_dev *d, struct ibv_qp *qp, int write, int signaled, uint64_t wrid, int off)
{
	struct ibv_sge sge = {.addr = (uintptr_t)d->buf + off, .length = BP_MSG, .lkey = d->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = wrid, .sg_list = &sge, .num_sge = 1,
				 .opcode = write ? IBV_WR_RDMA_WRITE : IBV_WR_SEND,
				 .send_flags = signaled ? IBV_SEND_SIGNALED : 0}, *bad;
	if (write) {
		wr.wr.rdma.remote_addr = (uintptr_t)d->buf + BP_BUF / 2 + off;
		wr.wr.rdma.rkey = d->mr->rkey;
	}
	return ibv_post_send(qp, &wr, &bad);
}

/*
 * BP_LIST receives of BP_MSG bytes at offset 0, wr_ids wrid onwards, as one
 * list: one call, one doorbell where the provider rings one.
 */
static inline int bp_post_recv_list(struct bp_dev *d, struct ibv_qp *qp, uint64_t wrid)
{
	struct ibv_sge sge = {.addr = (uintptr_t)d->buf, .length = BP_MSG, .lkey = d->mr->lkey};
	struct ibv_recv_wr wr[BP_LIST], *bad;
	for (int i = 0; i < BP_LIST; i++)
		wr[i] = (struct ibv_recv_wr){.wr_id = wrid + i, .sg_list = &sge, .num_sge = 1,
					     .next = i + 1 < BP_LIST ? &wr[i + 1] : NULL};
	return ibv_post_recv(qp, wr, &bad);
}

/*
 * BP_LIST SENDs or RDMA WRITEs of BP_MSG bytes from offset 0 (to offset
 * BP_BUF/2) as one list, wr_ids wrid onwards; the last one signaled if
 * signaled is set.
 */
static inline int bp_post_send_list(struct bp_dev *d, struct ibv_qp *qp, int write, int signaled, uint64_t wrid)
{
	struct ibv_sge sge = {.addr = (uintptr_t)d->buf, .length = BP_MSG, .lkey = d->mr->lkey};
	struct ibv_send_wr wr[BP_LIST], *bad;
	for (int i = 0; i < BP_LIST; i++) {
		wr[i] = (struct ibv_send_wr){.wr_id = wrid + i, .sg_list = &sge, .num_sge = 1,
					     .opcode = write ? IBV_WR_RDMA_WRITE : IBV_WR_SEND,
					     .send_flags = signaled && i + 1 == BP_LIST ? IBV_SEND_SIGNALED : 0,
					     .next = i + 1 < BP_LIST ? &wr[i + 1] : NULL};
		if (write) {
			wr[i].wr.rdma.remote_addr = (uintptr_t)d->buf + BP_BUF / 2;
			wr[i].wr.rdma.rkey = d->mr->rkey;
		}
	}
	return ibv_post_send(qp, wr, &bad);
}

/* Polls up to n completions into wc; returns the count, or -1 on a failed completion. */
static inline int bp_poll(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	int got = ibv_poll_cq(cq, n, wc);
	for (int i = 0; i < got; i++)
		if (wc[i].status != IBV_WC_SUCCESS)
			return -1;
	return got;
}

#endif
