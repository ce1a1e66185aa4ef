/*
 * bench-c: the C side of `make bench`. Runs each operation of goverbs'
 * bench table on libibverbs and prints one line per result:
 *
 *	name<TAB>value<TAB>unit
 *
 * unit "ns" (per operation, lower is better) or "kmsg/s" (higher is
 * better). bench/go and bench/cgo print the same names for the same work.
 * Usage: bench-c [name-prefix... | name$...] (default: everything).
 */
#define _GNU_SOURCE
#include "bench.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static struct bp_dev *dev;
static struct bp_pair *pair;

/*
 * measure_cpu is the vCPU the single-thread rows run on, in bench-go and
 * bench-cgo too: the measuring thread stays on one vCPU in all three, so no
 * row depends on where the scheduler moves it. BENCH_UNPINNED (set and not
 * empty) leaves it unbound (-1), as all three were before.
 */
static int measure_cpu = 1;

#define CHECK(x)                                                                 \
	do {                                                                     \
		if ((x) < 0 || (x) > 0x7fffffff) {                                \
			fprintf(stderr, "bench-c: %s failed at %s:%d\n", #x, __FILE__, __LINE__); \
			exit(1);                                                 \
		}                                                                \
	} while (0)
#define OK(x)                                                                    \
	do {                                                                     \
		if (x) {                                                         \
			fprintf(stderr, "bench-c: %s failed at %s:%d\n", #x, __FILE__, __LINE__); \
			exit(1);                                                 \
		}                                                                \
	} while (0)

/* wait polls cq until n completions arrived. */
static void wait_cq(struct ibv_cq *cq, int n)
{
	struct ibv_wc wc[16];
	while (n > 0) {
		int got = bp_poll(cq, n < 16 ? n : 16, wc);
		CHECK(got);
		n -= got;
	}
}

/* post_recvs posts k receives on qp, numbered 0 to k-1, single or as lists of BP_LIST. */
static void post_recvs(struct ibv_qp *qp, int k, int list)
{
	if (list)
		for (int i = 0; i < k; i += BP_LIST)
			OK(bp_post_recv_list(dev, qp, i));
	else
		for (int i = 0; i < k; i++)
			OK(bp_post_recv(dev, qp, i, 0));
}

/*
 * post_sends posts k WRITEs or SENDs on A, numbered 0 to k-1, the last
 * signaled, single or as lists of BP_LIST.
 */
static void post_sends(int write, int k, int list)
{
	if (list)
		for (int i = 0; i < k; i += BP_LIST)
			OK(bp_post_send_list(dev, pair->a.qp, write, i + BP_LIST == k, i));
	else
		for (int i = 0; i < k; i++)
			OK(bp_post_send(dev, pair->a.qp, write, i == k - 1, i, 0));
}

/* post_recv: 512 receives per batch, single or as lists of BP_LIST. */
static double post_recv(int list)
{
	static struct bp_side *s;
	if (!s)
		s = bp_init_qp(dev);
	double total = 0;
	int rounds = 40;
	for (int r = 0; r < rounds; r++) {
		double t0 = bp_now();
		post_recvs(s->qp, 512, list);
		total += bp_now() - t0;
		OK(bp_reinit(s->qp));
	}
	return total / (rounds * 512);
}
static double op_post_recv(void) { return post_recv(0); }
static double op_post_recv_list(void) { return post_recv(1); }

/*
 * post_recv_rts: 512 receives per batch on B, a connected QP, single or as
 * lists of BP_LIST (only these posts timed), then 512 SENDs from A consume
 * them; 8 batches, ns per receive. post_recv's way, receives on a QP in
 * INIT taken back by a reset, leaks on qemu's pvrdma model: it keeps a
 * context per posted receive until the receive completes, and a reset
 * completes none ("Table CQE_CTX, invalid handle" once they run out).
 */
static double post_recv_rts(int list)
{
	struct ibv_wc wc[16];
	double total = 0;
	int rounds = 8, k = 512;
	for (int r = 0; r < rounds; r++) {
		double t0 = bp_now();
		post_recvs(pair->b.qp, k, list);
		total += bp_now() - t0;
		post_sends(0, k, 1);
		wait_cq(pair->b.rcq, k);
		wait_cq(pair->a.scq, 1);
		/* a device that signals every send (qemu's pvrdma) left more */
		int got;
		while ((got = bp_poll(pair->a.scq, 16, wc)) > 0)
			;
		CHECK(got);
	}
	return total / (rounds * k);
}
static double op_post_recv_rts(void) { return post_recv_rts(0); }
static double op_post_recv_rts_list(void) { return post_recv_rts(1); }

static double poll_empty(int batch)
{
	static struct ibv_cq *cq;
	if (!cq)
		cq = ibv_create_cq(dev->ctx, BP_CQE, NULL, NULL, 0);
	struct ibv_wc wc[16];
	int n = 200000;
	double t0 = bp_now();
	for (int i = 0; i < n; i++)
		if (ibv_poll_cq(cq, batch, wc) != 0)
			exit(1);
	return (bp_now() - t0) / n;
}
static double op_poll_1(void) { return poll_empty(1); }
static double op_poll_16(void) { return poll_empty(16); }

/*
 * post_send: batches of 256 posts (the last signaled), single or as lists
 * of BP_LIST, only the posts timed; ns per work request.
 */
static double post_send(int write, int list)
{
	double total = 0;
	int rounds = 8, k = 256;
	for (int r = 0; r < rounds; r++) {
		if (!write)
			post_recvs(pair->b.qp, k, 0);
		double t0 = bp_now();
		post_sends(write, k, list);
		total += bp_now() - t0;
		wait_cq(pair->a.scq, 1);
		if (!write)
			wait_cq(pair->b.rcq, k);
	}
	return total / (rounds * k);
}
static double op_post_send_write(void) { return post_send(1, 0); }
static double op_post_send_send(void) { return post_send(0, 0); }
static double op_post_send_write_list(void) { return post_send(1, 1); }
static double op_post_send_send_list(void) { return post_send(0, 1); }

/* round: post one signaled work request and poll until it completes. */
static double round_trip(int write)
{
	int n = 1000, chunk = 500;
	double total = 0;
	struct ibv_wc wc[1];
	for (int c = 0; c < n; c += chunk) {
		if (!write)
			post_recvs(pair->b.qp, chunk, 0);
		double t0 = bp_now();
		for (int i = 0; i < chunk; i++) {
			OK(bp_post_send(dev, pair->a.qp, write, 1, i, 0));
			int got;
			while ((got = bp_poll(pair->a.scq, 1, wc)) == 0)
				;
			CHECK(got);
		}
		total += bp_now() - t0;
		if (!write)
			wait_cq(pair->b.rcq, chunk);
	}
	return total / n;
}
static double op_round_write(void) { return round_trip(1); }
static double op_round_send(void) { return round_trip(0); }

/* Ping-pong of 64-byte SENDs between A and B. Each side keeps 64
 * receives posted and reposts one per message; sends are signaled every
 * 32nd and their completions reaped as they come. */
#define PP_N 1000
static void pp_prepost(struct ibv_qp *qp)
{
	for (int i = 0; i < 64; i++)
		OK(bp_post_recv(dev, qp, i, 0));
}
static void pp_recv(struct bp_side *s)
{
	struct ibv_wc wc[1];
	int got;
	while ((got = bp_poll(s->rcq, 1, wc)) == 0)
		;
	CHECK(got);
	OK(bp_post_recv(dev, s->qp, 0, 0));
}
static void pp_send(struct bp_side *s, int i)
{
	struct ibv_wc wc[16];
	OK(bp_post_send(dev, s->qp, 0, i % 32 == 31, i, 0));
	CHECK(bp_poll(s->scq, 16, wc));
}
static double op_pingpong_1t(void)
{
	pp_prepost(pair->a.qp);
	pp_prepost(pair->b.qp);
	double t0 = bp_now();
	for (int i = 0; i < PP_N; i++) {
		pp_send(&pair->a, i);
		pp_recv(&pair->b);
		pp_send(&pair->b, i);
		pp_recv(&pair->a);
	}
	return (bp_now() - t0) / PP_N;
}

static void *pp_peer(void *arg)
{
	(void)arg;
	bp_pin(1);
	for (int i = 0; i < PP_N; i++) {
		pp_recv(&pair->b);
		pp_send(&pair->b, i);
	}
	return NULL;
}

static double op_pingpong_2t(void)
{
	pp_prepost(pair->a.qp);
	pp_prepost(pair->b.qp);
	bp_pin(0);
	pthread_t th;
	double t0 = bp_now();
	pthread_create(&th, NULL, pp_peer, NULL);
	for (int i = 0; i < PP_N; i++) {
		pp_send(&pair->a, i);
		pp_recv(&pair->a);
	}
	pthread_join(th, NULL);
	double t = (bp_now() - t0) / PP_N;
	OK(bp_pin(measure_cpu));
	return t;
}

/* The messages of the message-rate row and of each scaling thread. */
#define MSGRATE_N 20000
#define SCALE_N 10000

/* msgrate: n signaled 64-byte WRITEs with at most 64 outstanding. */
static double msgrate(struct bp_pair *p, int n, int off)
{
	struct ibv_wc wc[16];
	int posted = 0, done = 0;
	double t0 = bp_now();
	while (done < n) {
		while (posted < n && posted - done < 64)
			OK(bp_post_send(dev, p->a.qp, 1, 1, posted++, off));
		int got = bp_poll(p->a.scq, 16, wc);
		CHECK(got);
		done += got;
	}
	return n / ((bp_now() - t0) / 1e9) / 1e3;
}
static double op_msgrate(void) { return msgrate(pair, MSGRATE_N, 0); }

/*
 * msgrate_send: MSGRATE_N signaled 64-byte SENDs, at most 64 outstanding,
 * completions polled 16 at a time; B starts with BP_DEPTH receives posted
 * and posts one again for each receive completion it polls.
 */
static double op_msgrate_send(void)
{
	struct ibv_wc wc[16];
	int n = MSGRATE_N, posted = 0, done = 0, recvd = 0;
	post_recvs(pair->b.qp, BP_DEPTH, 0);
	double t0 = bp_now();
	while (done < n || recvd < n) {
		while (posted < n && posted - done < 64 && posted - recvd < BP_DEPTH)
			OK(bp_post_send(dev, pair->a.qp, 0, 1, posted++, 0));
		int got = bp_poll(pair->a.scq, 16, wc);
		CHECK(got);
		done += got;
		got = bp_poll(pair->b.rcq, 16, wc);
		CHECK(got);
		for (int i = 0; i < got; i++)
			OK(bp_post_recv(dev, pair->b.qp, recvd + i, 0));
		recvd += got;
	}
	return n / ((bp_now() - t0) / 1e9) / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}
/*
 * report_timed prints the four rows of a timed message-rate loop under
 * prefix: d holds each post's time (sorted here), total the loop's.
 */
static void report_timed(const char *prefix, double *d, int n, double total)
{
	double sum = 0, stall = 0;
	for (int i = 0; i < n; i++)
		sum += d[i];
	qsort(d, n, sizeof(*d), cmp_double);
	double med = d[n / 2];
	for (int i = 0; i < n; i++)
		if (d[i] > 3 * med)
			stall += d[i] - med;
	/* What one clock read costs, part of every timed post. */
	enum { READS = 10000 };
	volatile double sink;
	double tc = bp_now();
	for (int i = 0; i < READS; i++)
		sink = bp_now();
	(void)sink;
	printf("%s_clock_read\t%.1f\tns\n", prefix, (bp_now() - tc) / READS);
	printf("%s_post_median\t%.0f\tns\n", prefix, med);
	printf("%s_stall_per_msg\t%.1f\tns\n", prefix, stall / n);
	printf("%s_other_per_msg\t%.1f\tns\n", prefix, (total - sum) / n);
}
/*
 * msgtimed: the message-rate loop once more with every post timed on its
 * own, printing where a message's time goes: the median post (its doorbell
 * system call), the time per message lost in posts more than three times
 * the median (the measuring thread interrupted), and the time per message
 * outside the posts (polling and the loop); and the cost of one clock read,
 * which every timed post includes. bench/go's msgTimed is the same loop.
 */
static void msgtimed(struct bp_pair *p, int n)
{
	double *d = malloc(n * sizeof(*d));
	struct ibv_wc wc[16];
	int posted = 0, done = 0;
	if (!d)
		exit(1);
	double t0 = bp_now();
	while (done < n) {
		while (posted < n && posted - done < 64) {
			double ta = bp_now();
			OK(bp_post_send(dev, p->a.qp, 1, 1, posted, 0));
			d[posted++] = bp_now() - ta;
		}
		int got = bp_poll(p->a.scq, 16, wc);
		CHECK(got);
		done += got;
	}
	report_timed("msgtimed", d, n, bp_now() - t0);
	free(d);
}

/*
 * msgtimed_send: op_msgrate_send's loop with every post of A timed, as
 * msgtimed is msgrate's (rows msgtimed_send_*), for a device that carries
 * no RDMA WRITE (qemu's pvrdma model). B's receive reposts fall in "other".
 * It runs on a pair of its own: op_msgrate_send leaves B's receive queue
 * full on the shared one when both rows run in one process.
 */
static void msgtimed_send(int n)
{
	double *d = malloc(n * sizeof(*d));
	struct bp_pair *p = bp_pair_new(dev);
	struct ibv_wc wc[16];
	int posted = 0, done = 0, recvd = 0;
	if (!d || !p)
		exit(1);
	post_recvs(p->b.qp, BP_DEPTH, 0);
	double t0 = bp_now();
	while (done < n || recvd < n) {
		while (posted < n && posted - done < 64 && posted - recvd < BP_DEPTH) {
			double ta = bp_now();
			OK(bp_post_send(dev, p->a.qp, 0, 1, posted, 0));
			d[posted++] = bp_now() - ta;
		}
		int got = bp_poll(p->a.scq, 16, wc);
		CHECK(got);
		done += got;
		got = bp_poll(p->b.rcq, 16, wc);
		CHECK(got);
		for (int i = 0; i < got; i++)
			OK(bp_post_recv(dev, p->b.qp, recvd + i, 0));
		recvd += got;
	}
	report_timed("msgtimed_send", d, n, bp_now() - t0);
	free(d);
}

struct scale_arg {
	struct bp_pair *p;
	int cpu, n;
};
static void *scale_worker(void *arg)
{
	struct scale_arg *a = arg;
	bp_pin(a->cpu);
	msgrate(a->p, a->n, a->cpu * 256);
	return NULL;
}
static double scale(int threads)
{
	static struct bp_pair *pairs[64];
	struct scale_arg args[64];
	pthread_t th[64];
	int n = SCALE_N;
	for (int i = 0; i < threads; i++) {
		if (!pairs[i])
			pairs[i] = bp_pair_new(dev);
		args[i] = (struct scale_arg){pairs[i], i, n};
	}
	double t0 = bp_now();
	for (int i = 0; i < threads; i++)
		pthread_create(&th[i], NULL, scale_worker, &args[i]);
	for (int i = 0; i < threads; i++)
		pthread_join(th[i], NULL);
	return (double)threads * n / ((bp_now() - t0) / 1e9) / 1e3;
}

/*
 * wanted: no arguments select every row; an argument selects the rows its
 * text starts, or with a trailing '$' the one row of exactly that name.
 */
static int wanted(const char *name, int argc, char **argv)
{
	if (argc < 2)
		return 1;
	for (int a = 1; a < argc; a++) {
		size_t n = strlen(argv[a]);
		if (n > 0 && argv[a][n - 1] == '$') {
			if (strlen(name) == n - 1 && !strncmp(name, argv[a], n - 1))
				return 1;
		} else if (!strncmp(name, argv[a], n)) {
			return 1;
		}
	}
	return 0;
}

struct op {
	const char *name, *unit;
	double (*f)(void);
};

/*
 * idle is the body of the thread BENCH_C_THREAD adds: it blocks for the
 * process's life and never runs. Its only effect is that the process has
 * two threads, as every Go program has (and any C program with a CQ or CM
 * thread): the kernel then shares the descriptor table, and each system
 * call on a descriptor takes and drops a reference to its file (fdget's
 * slow path) where a one-thread process skips both; and glibc wraps
 * write() in its asynchronous-cancellation bookkeeping, which it skips
 * while the process has one thread.
 */
static void *idle(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

/*
 * sleeper is the body of the thread BENCH_C_SLEEPER adds: it reads the
 * monotonic clock and sleeps 10 ms, for the process's life. That is Go's
 * sysmon at its longest sleep: while any goroutine runs, sysmon never
 * sleeps longer. Its column measures the cost of a runtime thread that
 * wakes, as against cthread's one that never runs. It is created before
 * the measuring thread is bound, so it may run on any vCPU, as sysmon may.
 */
static void *sleeper(void *arg)
{
	(void)arg;
	for (;;) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		usleep(10000);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* at most one extra thread: BENCH_C_THREAD's idle one or BENCH_C_SLEEPER's */
	const char *threaded = getenv("BENCH_C_THREAD"), *sleeping = getenv("BENCH_C_SLEEPER");
	void *(*extra)(void *) = threaded && *threaded ? idle : sleeping && *sleeping ? sleeper : NULL;
	if (extra) {
		pthread_t th;
		OK(pthread_create(&th, NULL, extra, NULL));
	}
	const char *unpinned = getenv("BENCH_UNPINNED");
	if (unpinned && *unpinned)
		measure_cpu = -1;
	else
		OK(bp_pin(measure_cpu));
	dev = bp_open(NULL);
	if (!dev || !(pair = bp_pair_new(dev)))
		return 1;
	struct op ops[] = {
		{"post_recv", "ns", op_post_recv},
		{"post_recv_list32", "ns", op_post_recv_list},
		{"post_recv_rts", "ns", op_post_recv_rts},
		{"post_recv_rts_list32", "ns", op_post_recv_rts_list},
		{"poll_cq_empty_1", "ns", op_poll_1},
		{"poll_cq_empty_16", "ns", op_poll_16},
		{"post_send_write_64", "ns", op_post_send_write},
		{"post_send_write_64_list32", "ns", op_post_send_write_list},
		{"post_send_send_64", "ns", op_post_send_send},
		{"post_send_send_64_list32", "ns", op_post_send_send_list},
		{"round_write_64", "ns", op_round_write},
		{"round_send_64", "ns", op_round_send},
		{"pingpong_send_64_1t", "ns", op_pingpong_1t},
		{"pingpong_send_64_2t", "ns", op_pingpong_2t},
		{"msgrate_write_64_w64", "kmsg/s", op_msgrate},
		{"msgrate_send_64_w64", "kmsg/s", op_msgrate_send},
	};
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		if (wanted(ops[i].name, argc, argv))
			printf("%s\t%.1f\t%s\n", ops[i].name, ops[i].f(), ops[i].unit);
	}
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	for (int t = 1; t <= cpus && t <= 64; t++) {
		char name[32];
		snprintf(name, sizeof(name), "scale_write_64_w64_x%d", t);
		if (wanted(name, argc, argv))
			printf("%s\t%.1f\tkmsg/s\n", name, scale(t));
	}
	/* A diagnosis, not an operation: only when an argument names it. */
	if (argc > 1 && wanted("msgtimed", argc, argv))
		msgtimed(pair, MSGRATE_N);
	if (argc > 1 && wanted("msgtimed_send", argc, argv))
		msgtimed_send(MSGRATE_N);
	return 0;
}
