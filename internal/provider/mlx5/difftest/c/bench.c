// bench.c: the C half of make bench-mlx5. It times one row (a post or a
// poll, ../README.md and docs/performance.md say what each row times)
// through libibverbs and libmlx5 on the fake device, fake.so preloaded as
// the kernel, and prints "bench ROW NS" (nanoseconds per operation). The Go
// half, TestBenchNative in ../bench_test.go, does the same work per row
// through goverbs.
// Usage: FAKE_DEVICE=device.txt LD_PRELOAD=fake.so bench ROW
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <infiniband/verbs.h>

#define BATCH 512   // posts per timed stretch (the queues hold 1024)
#define RING 1024   // entries of each CQ
#define LIST 32     // work requests per list (post_send_list32)
#define MRSIZE 65536
#define WARM 200    // batches before the timed ones
static int NBATCH = 2000; // timed batches (MLX5_BENCH_BATCHES: a longer run for a profile)

static int (*inject)(int, const char *);
static uint8_t *(*cq_ring)(int, uint32_t *);

static void die(const char *what)
{
	fprintf(stderr, "bench: %s\n", what);
	exit(1);
}

static int cmp64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static uint64_t now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// A CQ ring the benchmark writes CQEs into itself: every CQE a copy of the
// one the fake wrote first (tmpl), with the owner bit of the slot's pass.
struct ring {
	struct ibv_cq *cq;
	uint8_t *buf;
	uint32_t nent, pi;
	uint8_t tmpl[64];
};

// ring_init has the fake write one CQE (spec) into the cq-th CQ created,
// polls it and keeps it as the template.
static void ring_init(struct ring *r, struct ibv_cq *cq, int index, const char *spec)
{
	struct ibv_wc wc;
	r->cq = cq;
	r->buf = cq_ring(index, &r->nent);
	if (!r->buf || inject(index, spec) < 0 || ibv_poll_cq(cq, 1, &wc) != 1 || wc.status != IBV_WC_SUCCESS)
		die("template CQE");
	memcpy(r->tmpl, r->buf, 64);
	r->pi = 1;
}

// put writes a whole CQE, with wqe_counter wqe, into the next slot.
static void put(struct ring *r, uint16_t wqe)
{
	uint8_t *s = r->buf + (size_t)(r->pi & (r->nent - 1)) * 64;
	memcpy(s, r->tmpl, 60);
	s[60] = wqe >> 8;
	s[61] = wqe;
	s[62] = r->tmpl[62];
	s[63] = (r->tmpl[63] & 0xfe) | ((r->pi / r->nent) & 1);
	r->pi++;
}

// arm makes the next slot, which holds the template already, a valid CQE
// of this pass: one byte, op_own.
static inline void arm(struct ring *r)
{
	r->buf[(size_t)(r->pi & (r->nent - 1)) * 64 + 63] = (r->tmpl[63] & 0xfe) | ((r->pi / r->nent) & 1);
	r->pi++;
}

// poll polls n completions, 16 at a time.
static void poll_n(struct ibv_cq *cq, int n)
{
	struct ibv_wc wc[16];
	while (n > 0) {
		int k = n < 16 ? n : 16;
		if (ibv_poll_cq(cq, k, wc) != k)
			die("poll");
		n -= k;
	}
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: bench ROW\n");
		return 2;
	}
	const char *row = argv[1];
	if (getenv("MLX5_BENCH_BATCHES") && atoi(getenv("MLX5_BENCH_BATCHES")) >= 2)
		NBATCH = atoi(getenv("MLX5_BENCH_BATCHES"));
	inject = (int (*)(int, const char *))dlsym(RTLD_DEFAULT, "fk_inject");
	cq_ring = (uint8_t * (*)(int, uint32_t *)) dlsym(RTLD_DEFAULT, "fk_cq_ring");
	if (!inject || !cq_ring)
		die("run with LD_PRELOAD=fake.so");

	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list || n < 1)
		die("no device");
	struct ibv_context *ctx = ibv_open_device(list[0]);
	if (!ctx)
		die("open");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	uint8_t *buf = mmap(NULL, MRSIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!pd || buf == MAP_FAILED)
		die("pd");
	memset(buf, 7, MRSIZE);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, MRSIZE, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_cq *scq = ibv_create_cq(ctx, RING - 1, NULL, NULL, 0);
	struct ibv_cq *rcq = ibv_create_cq(ctx, RING - 1, NULL, NULL, 0);
	if (!mr || !scq || !rcq)
		die("mr, cq");
	struct ibv_qp_init_attr ia = {
		.send_cq = scq,
		.recv_cq = rcq,
		.qp_type = IBV_QPT_RC,
		.cap = {.max_send_wr = 1024, .max_recv_wr = 1024, .max_send_sge = 1, .max_recv_sge = 1,
			.max_inline_data = 64},
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	if (!qp)
		die("qp");
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = IBV_ACCESS_LOCAL_WRITE};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("init");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = 0x777;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.dlid = 2;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("rtr");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
					  IBV_QP_MAX_QP_RD_ATOMIC))
		die("rts");

	struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = 64, .lkey = mr->lkey};
	struct ibv_send_wr swr[LIST], *bad;
	memset(swr, 0, sizeof(swr));
	for (int i = 0; i < LIST; i++) {
		swr[i].wr_id = i + 1;
		swr[i].sg_list = &sge;
		swr[i].num_sge = 1;
		swr[i].opcode = IBV_WR_SEND;
		swr[i].send_flags = IBV_SEND_SIGNALED;
		swr[i].next = i + 1 < LIST ? &swr[i + 1] : NULL;
	}
	struct ibv_recv_wr rwr = {.wr_id = 1, .sg_list = &sge, .num_sge = 1}, *rbad;

	// One SEND and one receive, whose completions the fake writes: the
	// send CQ's requester CQE and the receive CQ's responder CQE become
	// the templates of every CQE after.
	char spec[128];
	struct ring sr, rr;
	if (ibv_post_send(qp, &swr[LIST - 1], &bad) || ibv_post_recv(qp, &rwr, &rbad))
		die("first posts");
	snprintf(spec, sizeof(spec), "qpn=%u req sop=10", qp->qp_num);
	ring_init(&sr, scq, 0, spec);
	snprintf(spec, sizeof(spec), "qpn=%u resp_send bytes=64", qp->qp_num);
	ring_init(&rr, rcq, 1, spec);

	// Every row runs WARM batches, then NBATCH timed ones, each timed on
	// its own; the result is the median batch's time per operation (a
	// batch the scheduler interrupted lands in the tail).
	uint64_t *lat = calloc(NBATCH, sizeof(uint64_t));
	int per = 0; // operations per batch
	if (!lat)
		die("calloc");
	if (!strncmp(row, "post_send", 9)) {
		// Batches of BATCH work requests, timed; after each, untimed,
		// one requester CQE for the last WQE frees the send queue.
		int listed = !strcmp(row, "post_send_list32"), inl = !strcmp(row, "post_send_inline64");
		if (!listed && !inl && strcmp(row, "post_send"))
			die("unknown row");
		struct ibv_send_wr *wr = &swr[LIST - 1]; // one work request: the list's last
		if (inl)
			wr->send_flags |= IBV_SEND_INLINE;
		uint32_t bbs = inl ? 2 : 1, posted = 1; // WQE basic blocks per work request, and in all
		per = BATCH;
		for (int b = 0; b < WARM + NBATCH; b++) {
			uint64_t t0 = now();
			if (listed) {
				for (int i = 0; i < BATCH / LIST; i++)
					if (ibv_post_send(qp, swr, &bad))
						die("post_send");
			} else {
				for (int i = 0; i < BATCH; i++)
					if (ibv_post_send(qp, wr, &bad))
						die("post_send");
			}
			uint64_t t1 = now();
			if (b >= WARM)
				lat[b - WARM] = t1 - t0;
			posted += BATCH * bbs;
			put(&sr, posted - bbs);
			poll_n(scq, 1);
		}
	} else if (!strcmp(row, "post_recv")) {
		// Batches of BATCH receives, timed; after each, untimed, as many
		// responder CQEs consume them.
		per = BATCH;
		for (int b = 0; b < WARM + NBATCH; b++) {
			uint64_t t0 = now();
			for (int i = 0; i < BATCH; i++)
				if (ibv_post_recv(qp, &rwr, &rbad))
					die("post_recv");
			uint64_t t1 = now();
			if (b >= WARM)
				lat[b - WARM] = t1 - t0;
			for (int i = 0; i < BATCH; i++)
				put(&rr, 0);
			poll_n(rcq, BATCH);
		}
	} else if (!strcmp(row, "poll_empty")) {
		// Polls of an empty CQ with room for 16, 4096 a batch.
		struct ibv_wc wc[16];
		per = 4096;
		for (int b = 0; b < WARM + NBATCH; b++) {
			uint64_t t0 = now();
			for (int i = 0; i < per; i++)
				if (ibv_poll_cq(scq, 16, wc) != 0)
					die("poll");
			uint64_t t1 = now();
			if (b >= WARM)
				lat[b - WARM] = t1 - t0;
		}
	} else if (!strcmp(row, "poll_16")) {
		// Every slot holds the requester CQE; an operation arms the
		// next 16 (their op_own byte) and polls them with one poll; 64
		// operations a batch.
		struct ibv_wc wc[16];
		for (uint32_t i = 0; i < sr.nent; i++)
			memcpy(sr.buf + (size_t)i * 64, sr.tmpl, 63);
		per = 64;
		for (int b = 0; b < WARM + NBATCH; b++) {
			uint64_t t0 = now();
			for (int i = 0; i < per; i++) {
				for (int k = 0; k < 16; k++)
					arm(&sr);
				if (ibv_poll_cq(scq, 16, wc) != 16)
					die("poll");
			}
			uint64_t t1 = now();
			if (b >= WARM)
				lat[b - WARM] = t1 - t0;
		}
	} else {
		die("unknown row");
	}
	qsort(lat, NBATCH, sizeof(uint64_t), cmp64);
	printf("bench %s %.2f\n", row, (double)(lat[NBATCH / 2 - 1] + lat[NBATCH / 2]) / 2 / per);
	return 0;
}
