// driver.c: runs one scenario file (../README.md) through libibverbs and
// libmlx5 under the fake kernel (fake.so, LD_PRELOAD) and prints the trace:
// the fake's command lines, after each scenario line a dump of the queue
// bytes it changed, and the work completions polled into a poisoned array.
// Usage: FAKE_DEVICE=device.txt LD_PRELOAD=fake.so driver SCENARIO
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <infiniband/verbs.h>

// Where MR buffers go (and the Go driver's): the n-th at MR_BASE + n * MR_STRIDE.
#define MR_BASE 0x7e0000000000ULL
#define MR_STRIDE 0x1000000ULL

#define MAXN 64
#define MAXTOK 1024
#define MAXLINE 16384

static void (*dump)(const char *);
static int (*inject)(int, const char *);
static int (*event)(int);

struct obj {
	char name[32];
	int kind; // 'p' pd, 'm' mr, 'c' cq, 'q' qp, 's' srq, 'a' ah
	void *p;
	void *buf;
	int index; // creation order among its kind (CQs: the fake's number)
};
static struct obj objs[MAXN];
static int nobjs, ncq;
static struct ibv_context *ctx;
static int lineno;

static void die(const char *fmt, const char *arg)
{
	printf("error line %d: ", lineno);
	printf(fmt, arg);
	printf("\n");
	fflush(stdout);
	exit(1);
}

static struct obj *find(const char *name, int kind)
{
	for (int i = 0; i < nobjs; i++)
		if (objs[i].p && strcmp(objs[i].name, name) == 0) {
			if (kind && objs[i].kind != kind)
				die("%s has the wrong kind", name);
			return &objs[i];
		}
	die("no object %s", name);
	return NULL;
}

static struct obj *add(const char *name, int kind, void *p)
{
	if (nobjs == MAXN)
		die("too many objects%s", "");
	struct obj *o = &objs[nobjs++];
	snprintf(o->name, sizeof(o->name), "%s", name);
	o->kind = kind;
	o->p = p;
	return o;
}

static unsigned long num(const char *s)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 0);
	if (*end || errno)
		die("bad number %s", s);
	return v;
}

// kv: if tok is key=value with this key, sets *v and returns 1.
static int kv(const char *tok, const char *key, const char **v)
{
	size_t n = strlen(key);
	if (strncmp(tok, key, n) == 0 && tok[n] == '=') {
		*v = tok + n + 1;
		return 1;
	}
	return 0;
}

// sge parses MR:OFF:LEN.
static void sge(const char *s, struct ibv_sge *g)
{
	char mr[32];
	unsigned long off, len;
	if (sscanf(s, "%31[^:]:%li:%li", mr, (long *)&off, (long *)&len) != 3)
		die("bad sge %s", s);
	struct obj *o = find(mr, 'm');
	struct ibv_mr *m = o->p;
	g->addr = (uintptr_t)m->addr + off;
	g->length = len;
	g->lkey = m->lkey;
}

static void print_wc(int i, const struct ibv_wc *w)
{
	printf("wc %d id=%llu status=%d opcode=%d vendor_err=0x%x byte_len=0x%x imm=0x%x qp_num=0x%x src_qp=0x%x "
	       "wc_flags=0x%x pkey_index=0x%x slid=0x%x sl=0x%x dlid_path_bits=0x%x\n",
	       i, (unsigned long long)w->wr_id, (int)w->status, (int)w->opcode, w->vendor_err, w->byte_len,
	       w->imm_data, w->qp_num, w->src_qp, w->wc_flags, w->pkey_index, w->slid, w->sl, w->dlid_path_bits);
}

static int opcode(const char *s)
{
	static const struct { const char *n; int op; } ops[] = {
		{"send", IBV_WR_SEND}, {"send_imm", IBV_WR_SEND_WITH_IMM}, {"write", IBV_WR_RDMA_WRITE},
		{"write_imm", IBV_WR_RDMA_WRITE_WITH_IMM}, {"read", IBV_WR_RDMA_READ},
		{"cas", IBV_WR_ATOMIC_CMP_AND_SWP}, {"faa", IBV_WR_ATOMIC_FETCH_AND_ADD},
		{"send_inv", IBV_WR_SEND_WITH_INV},
	};
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (strcmp(s, ops[i].n) == 0)
			return ops[i].op;
	die("unknown opcode %s", s);
	return -1;
}

static void modify(struct ibv_qp *qp, const char *to)
{
	struct ibv_qp_attr a;
	int mask;
	memset(&a, 0, sizeof(a));
	if (qp->qp_type == IBV_QPT_UD) {
		// UD: the Q_Key at INIT, nothing else but the send PSN.
		if (!strcmp(to, "init")) {
			a.qp_state = IBV_QPS_INIT;
			a.port_num = 1;
			a.qkey = 0x11111111;
			mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
		} else if (!strcmp(to, "rtr")) {
			a.qp_state = IBV_QPS_RTR;
			mask = IBV_QP_STATE;
		} else if (!strcmp(to, "rts")) {
			a.qp_state = IBV_QPS_RTS;
			mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
		} else
			goto common;
		printf("modify %s = %d\n", to, ibv_modify_qp(qp, &a, mask));
		return;
	}
common:
	if (!strcmp(to, "init")) {
		a.qp_state = IBV_QPS_INIT;
		a.pkey_index = 0;
		a.port_num = 1;
		a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				    IBV_ACCESS_REMOTE_ATOMIC;
		mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
	} else if (!strcmp(to, "rtr")) {
		a.qp_state = IBV_QPS_RTR;
		a.path_mtu = IBV_MTU_1024;
		a.dest_qp_num = 0x777;
		a.rq_psn = 0;
		a.max_dest_rd_atomic = 1;
		a.min_rnr_timer = 12;
		a.ah_attr.dlid = 2;
		a.ah_attr.port_num = 1;
		mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
		       IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	} else if (!strcmp(to, "rts")) {
		a.qp_state = IBV_QPS_RTS;
		a.timeout = 14;
		a.retry_cnt = 7;
		a.rnr_retry = 7;
		a.sq_psn = 0;
		a.max_rd_atomic = 1;
		mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
		       IBV_QP_MAX_QP_RD_ATOMIC;
	} else if (!strcmp(to, "err")) {
		a.qp_state = IBV_QPS_ERR;
		mask = IBV_QP_STATE;
	} else if (!strcmp(to, "reset")) {
		a.qp_state = IBV_QPS_RESET;
		mask = IBV_QP_STATE;
	} else {
		die("unknown state %s", to);
		return;
	}
	int err = ibv_modify_qp(qp, &a, mask);
	printf("modify %s = %d\n", to, err);
}

// post_send: tok[0] is the QP; the WRs follow, separated by "|".
static void post_send(char **tok, int n)
{
	struct obj *q = find(tok[0], 'q');
	struct ibv_send_wr wrs[64];
	struct ibv_sge sges[64][8];
	int nwr = 0;
	memset(wrs, 0, sizeof(wrs));
	for (int i = 1; i < n; i++) {
		if (!strcmp(tok[i], "|"))
			continue;
		if (nwr == 64)
			die("too many work requests%s", "");
		struct ibv_send_wr *w = &wrs[nwr];
		w->opcode = opcode(tok[i]);
		w->sg_list = sges[nwr];
		// raddr, rkey, cmp and swap go to the union member of the
		// opcode (wr.rdma or wr.atomic) once the request is read.
		uint64_t raddr = 0, cmp = 0, swap = 0;
		uint32_t rkey = 0;
		for (i++; i < n && strcmp(tok[i], "|"); i++) {
			const char *v;
			if (kv(tok[i], "id", &v))
				w->wr_id = num(v);
			else if (!strcmp(tok[i], "sig"))
				w->send_flags |= IBV_SEND_SIGNALED;
			else if (!strcmp(tok[i], "inline"))
				w->send_flags |= IBV_SEND_INLINE;
			else if (!strcmp(tok[i], "fence"))
				w->send_flags |= IBV_SEND_FENCE;
			else if (!strcmp(tok[i], "solicited"))
				w->send_flags |= IBV_SEND_SOLICITED;
			else if (kv(tok[i], "imm", &v))
				w->imm_data = htobe32(num(v));
			else if (kv(tok[i], "inv", &v))
				w->invalidate_rkey = num(v);
			else if (kv(tok[i], "sge", &v)) {
				if (w->num_sge == 8)
					die("too many sges%s", "");
				sge(v, &sges[nwr][w->num_sge++]);
			} else if (kv(tok[i], "raddr", &v))
				raddr = num(v);
			else if (kv(tok[i], "rkey", &v))
				rkey = num(v);
			else if (kv(tok[i], "cmp", &v))
				cmp = num(v);
			else if (kv(tok[i], "ah", &v))
				w->wr.ud.ah = find(v, 'a')->p;
			else if (kv(tok[i], "rqpn", &v))
				w->wr.ud.remote_qpn = num(v);
			else if (kv(tok[i], "qkey", &v))
				w->wr.ud.remote_qkey = num(v);
			else if (kv(tok[i], "swap", &v))
				swap = num(v);
			else
				die("unknown send word %s", tok[i]);
		}
		i--;
		if (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
			w->wr.atomic.remote_addr = raddr;
			w->wr.atomic.rkey = rkey;
			w->wr.atomic.compare_add = cmp;
			w->wr.atomic.swap = swap;
		} else if (raddr || rkey) {
			w->wr.rdma.remote_addr = raddr;
			w->wr.rdma.rkey = rkey;
		}
		nwr++;
	}
	for (int i = 0; i + 1 < nwr; i++)
		wrs[i].next = &wrs[i + 1];
	struct ibv_send_wr *bad = NULL;
	int err = ibv_post_send(q->p, nwr ? wrs : NULL, &bad);
	printf("post_send = %d bad=%d\n", err, bad ? (int)(bad - wrs) : -1);
}

static void post_recv(char **tok, int n)
{
	struct obj *q = find(tok[0], 'q');
	struct ibv_recv_wr wrs[64];
	struct ibv_sge sges[64][8];
	int nwr = 0;
	memset(wrs, 0, sizeof(wrs));
	for (int i = 1; i < n; i++) {
		if (!strcmp(tok[i], "|")) {
			nwr++;
			continue;
		}
		if (nwr == 64)
			die("too many work requests%s", "");
		struct ibv_recv_wr *w = &wrs[nwr];
		const char *v;
		w->sg_list = sges[nwr];
		if (kv(tok[i], "id", &v))
			w->wr_id = num(v);
		else if (kv(tok[i], "sge", &v)) {
			if (w->num_sge == 8)
				die("too many sges%s", "");
			sge(v, &sges[nwr][w->num_sge++]);
		} else
			die("unknown recv word %s", tok[i]);
	}
	nwr++;
	for (int i = 0; i + 1 < nwr; i++)
		wrs[i].next = &wrs[i + 1];
	struct ibv_recv_wr *bad = NULL;
	int err = ibv_post_recv(q->p, wrs, &bad);
	printf("post_recv = %d bad=%d\n", err, bad ? (int)(bad - wrs) : -1);
}

// post_srq_recv: tok[0] is the SRQ; the WRs follow, as post_recv's.
static void post_srq_recv(char **tok, int n)
{
	struct obj *s = find(tok[0], 's');
	struct ibv_recv_wr wrs[64];
	struct ibv_sge sges[64][8];
	int nwr = 0;
	memset(wrs, 0, sizeof(wrs));
	for (int i = 1; i < n; i++) {
		if (!strcmp(tok[i], "|")) {
			nwr++;
			continue;
		}
		if (nwr == 64)
			die("too many work requests%s", "");
		struct ibv_recv_wr *w = &wrs[nwr];
		const char *v;
		w->sg_list = sges[nwr];
		if (kv(tok[i], "id", &v))
			w->wr_id = num(v);
		else if (kv(tok[i], "sge", &v)) {
			if (w->num_sge == 8)
				die("too many sges%s", "");
			sge(v, &sges[nwr][w->num_sge++]);
		} else
			die("unknown recv word %s", tok[i]);
	}
	nwr++;
	for (int i = 0; i + 1 < nwr; i++)
		wrs[i].next = &wrs[i + 1];
	struct ibv_recv_wr *bad = NULL;
	int err = ibv_post_srq_recv(s->p, wrs, &bad);
	printf("post_srq_recv = %d bad=%d\n", err, bad ? (int)(bad - wrs) : -1);
}

static void run_line(char **tok, int n, char *orig)
{
	const char *c = tok[0];
	const char *v;
	if (!strcmp(c, "open")) {
		int num_devices;
		if (n == 2 && !strcmp(tok[1], "roce")) {
			// port 1 is a RoCE port (the fake's fk_roce)
			int (*roce)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fk_roce");
			if (!roce || roce() < 0)
				die("open roce: no fk_roce in the fake%s", "");
		} else if (n != 1)
			die("open takes roce or nothing%s", "");
		struct ibv_device **list = ibv_get_device_list(&num_devices);
		if (!list || num_devices < 1)
			die("no device%s", "");
		ctx = ibv_open_device(list[0]);
		if (!ctx)
			die("open: %s", strerror(errno));
		ibv_free_device_list(list);
	} else if (!strcmp(c, "pd") && n == 2) {
		struct ibv_pd *pd = ibv_alloc_pd(ctx);
		if (!pd)
			die("alloc_pd: %s", strerror(errno));
		add(tok[1], 'p', pd);
	} else if (!strcmp(c, "mr") && n >= 4) {
		size_t size = num(tok[3]);
		int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
		for (int i = 4; i < n; i++)
			if (kv(tok[i], "access", &v))
				access = num(v);
			else
				die("unknown mr word %s", tok[i]);
		// MR buffers sit where the Go driver's were (MLX5_MR_ADDRS,
		// in order), so that the addresses WQEs carry compare; else at
		// MR_BASE + n * MR_STRIDE.
		static int nmr;
		void *want = (void *)(uintptr_t)(MR_BASE + (uint64_t)nmr * MR_STRIDE);
		const char *addrs = getenv("MLX5_MR_ADDRS");
		if (addrs) {
			char *end;
			for (int i = 0; i < nmr && addrs; i++) {
				addrs = strchr(addrs, ',');
				if (addrs)
					addrs++;
			}
			if (!addrs || !*addrs)
				die("MLX5_MR_ADDRS names too few buffers%s", "");
			want = (void *)(uintptr_t)strtoull(addrs, &end, 0);
		}
		nmr++;
		if (size == 0 || size > MR_STRIDE)
			die("mr size %s", tok[3]);
		void *buf = mmap(want, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
				 -1, 0);
		if (buf != want)
			die("mmap of the MR buffer%s", "");
		for (size_t i = 0; i < size; i++)
			((uint8_t *)buf)[i] = i * 7 + 1;
		struct ibv_mr *mr = ibv_reg_mr(find(tok[2], 'p')->p, buf, size, access);
		if (!mr)
			die("reg_mr: %s", strerror(errno));
		add(tok[1], 'm', mr)->buf = buf;
	} else if (!strcmp(c, "cq") && (n == 3 || (n == 4 && !strcmp(tok[3], "channel")))) {
		struct ibv_comp_channel *ch = NULL;
		if (n == 4) {
			ch = ibv_create_comp_channel(ctx);
			if (!ch)
				die("create_comp_channel: %s", strerror(errno));
		}
		struct ibv_cq *cq = ibv_create_cq(ctx, num(tok[2]), NULL, ch, 0);
		if (!cq) {
			printf("cq = %d\n", errno);
			return;
		}
		printf("cq cqe=%d\n", cq->cqe);
		struct obj *o = add(tok[1], 'c', cq);
		o->index = ncq++;
		o->buf = ch;
	} else if (!strcmp(c, "qp") && n >= 5) {
		struct ibv_qp_init_attr a;
		memset(&a, 0, sizeof(a));
		a.send_cq = find(tok[3], 'c')->p;
		a.recv_cq = find(tok[4], 'c')->p;
		a.qp_type = IBV_QPT_RC;
		a.cap.max_send_wr = 16;
		a.cap.max_recv_wr = 16;
		a.cap.max_send_sge = 1;
		a.cap.max_recv_sge = 1;
		for (int i = 5; i < n; i++) {
			if (!strcmp(tok[i], "rc"))
				a.qp_type = IBV_QPT_RC;
			else if (!strcmp(tok[i], "uc"))
				a.qp_type = IBV_QPT_UC;
			else if (!strcmp(tok[i], "ud"))
				a.qp_type = IBV_QPT_UD;
			else if (!strcmp(tok[i], "sigall"))
				a.sq_sig_all = 1;
			else if (kv(tok[i], "srq", &v)) {
				a.srq = find(v, 's')->p;
				a.cap.max_recv_wr = 0;
				a.cap.max_recv_sge = 0;
			}
			else if (kv(tok[i], "send", &v))
				a.cap.max_send_wr = num(v);
			else if (kv(tok[i], "recv", &v))
				a.cap.max_recv_wr = num(v);
			else if (kv(tok[i], "sge", &v))
				a.cap.max_send_sge = num(v);
			else if (kv(tok[i], "rsge", &v))
				a.cap.max_recv_sge = num(v);
			else if (kv(tok[i], "inline", &v))
				a.cap.max_inline_data = num(v);
			else
				die("unknown qp word %s", tok[i]);
		}
		struct ibv_qp *qp = ibv_create_qp(find(tok[2], 'p')->p, &a);
		if (!qp) {
			printf("qp = %d\n", errno);
			return;
		}
		printf("qp cap=%u,%u,%u,%u,%u\n", a.cap.max_send_wr, a.cap.max_recv_wr, a.cap.max_send_sge,
		       a.cap.max_recv_sge, a.cap.max_inline_data);
		add(tok[1], 'q', qp);
	} else if (!strcmp(c, "srq") && n == 5) {
		struct ibv_srq_init_attr a;
		memset(&a, 0, sizeof(a));
		a.attr.max_wr = num(tok[3]);
		a.attr.max_sge = num(tok[4]);
		struct ibv_srq *s = ibv_create_srq(find(tok[2], 'p')->p, &a);
		if (!s) {
			printf("srq = %d\n", errno);
			return;
		}
		add(tok[1], 's', s);
	} else if (!strcmp(c, "ah") && n >= 3) {
		struct ibv_ah_attr a;
		memset(&a, 0, sizeof(a));
		a.port_num = 1;
		for (int i = 3; i < n; i++) {
			if (kv(tok[i], "dlid", &v))
				a.dlid = num(v);
			else if (kv(tok[i], "sl", &v))
				a.sl = num(v);
			else if (kv(tok[i], "path", &v))
				a.src_path_bits = num(v);
			else if (kv(tok[i], "rate", &v))
				a.static_rate = num(v);
			else if (!strcmp(tok[i], "global"))
				a.is_global = 1;
			else if (kv(tok[i], "sgid", &v))
				a.grh.sgid_index = num(v);
			else if (kv(tok[i], "flow", &v))
				a.grh.flow_label = num(v);
			else if (kv(tok[i], "hop", &v))
				a.grh.hop_limit = num(v);
			else if (kv(tok[i], "tclass", &v))
				a.grh.traffic_class = num(v);
			else if (kv(tok[i], "dgid", &v)) {
				if (strlen(v) != 32)
					die("dgid wants 32 hex digits: %s", v);
				for (int k = 0; k < 16; k++) {
					unsigned x;
					if (sscanf(v + 2 * k, "%2x", &x) != 1)
						die("bad dgid %s", v);
					a.grh.dgid.raw[k] = x;
				}
			} else
				die("unknown ah word %s", tok[i]);
		}
		struct ibv_ah *ah = ibv_create_ah(find(tok[2], 'p')->p, &a);
		if (!ah) {
			printf("ah = %d\n", errno);
			return;
		}
		add(tok[1], 'a', ah);
	} else if (!strcmp(c, "post_srq_recv") && n >= 3) {
		post_srq_recv(tok + 1, n - 1);
	} else if (!strcmp(c, "modify") && n == 3) {
		modify(find(tok[1], 'q')->p, tok[2]);
	} else if (!strcmp(c, "post_send") && n >= 2) {
		post_send(tok + 1, n - 1);
	} else if (!strcmp(c, "post_recv") && n >= 3) {
		post_recv(tok + 1, n - 1);
	} else if (!strcmp(c, "inject_cqe") && n >= 4) {
		char spec[512];
		struct obj *cq = find(tok[1], 'c');
		struct ibv_qp *qp = find(tok[2], 'q')->p;
		int len = snprintf(spec, sizeof(spec), "qpn=%u", qp->qp_num);
		for (int i = 3; i < n; i++)
			len += snprintf(spec + len, sizeof(spec) - len, " %s", tok[i]);
		if (inject(cq->index, spec) < 0)
			die("inject_cqe: bad CQE%s", "");
	} else if (!strcmp(c, "poll") && n == 3) {
		struct ibv_wc wc[64];
		int want = num(tok[2]);
		if (want > 64)
			die("poll: at most 64%s", "");
		memset(wc, 0xa5, sizeof(wc));
		int got = ibv_poll_cq(find(tok[1], 'c')->p, want, wc);
		printf("poll = %d\n", got);
		for (int i = 0; i < got; i++)
			print_wc(i, &wc[i]);
		// What the poll did not fill stays poisoned (a failed poll may
		// have written the entry it failed on).
		for (int i = got < 0 ? want : got; i < want; i++) {
			const uint8_t *b = (const uint8_t *)&wc[i];
			for (size_t k = 0; k < sizeof(wc[i]); k++)
				if (b[k] != 0xa5)
					die("poll wrote past its count%s", "");
		}
	} else if (!strcmp(c, "event") && n == 2) {
		if (event(find(tok[1], 'c')->index) < 0)
			die("event: %s has no channel", tok[1]);
	} else if (!strcmp(c, "get_event") && n == 2) {
		struct obj *o = find(tok[1], 'c');
		struct ibv_cq *evcq;
		void *evctx;
		if (!o->buf)
			die("get_event: %s has no channel", tok[1]);
		int err = ibv_get_cq_event(o->buf, &evcq, &evctx);
		if (!err && evcq != o->p)
			die("get_event: an event of another CQ%s", "");
		if (!err)
			ibv_ack_cq_events(evcq, 1);
		printf("get_event = %d\n", err);
	} else if (!strcmp(c, "resize") && n == 3) {
		struct ibv_cq *cq = find(tok[1], 'c')->p;
		int err = ibv_resize_cq(cq, num(tok[2]));
		printf("resize = %d cqe=%d\n", err, cq->cqe);
	} else if (!strcmp(c, "arm") && (n == 2 || n == 3)) {
		int sol = n == 3 && !strcmp(tok[2], "solicited");
		printf("arm = %d\n", ibv_req_notify_cq(find(tok[1], 'c')->p, sol));
	} else if (!strcmp(c, "destroy") && n == 2) {
		struct obj *o = find(tok[1], 0);
		int err = 0;
		switch (o->kind) {
		case 'q': err = ibv_destroy_qp(o->p); break;
		case 'c': err = ibv_destroy_cq(o->p); break;
		case 'm': err = ibv_dereg_mr(o->p); break; // the buffer's address stays taken
		case 'p': err = ibv_dealloc_pd(o->p); break;
		case 's': err = ibv_destroy_srq(o->p); break;
		case 'a': err = ibv_destroy_ah(o->p); break;
		}
		printf("destroy = %d\n", err);
		o->p = NULL;
	} else {
		die("bad line: %s", orig);
	}
}

int main(int argc, char **argv)
{
	static char line[MAXLINE], orig[MAXLINE];
	if (argc != 2) {
		fprintf(stderr, "usage: driver SCENARIO\n");
		return 2;
	}
	dump = (void (*)(const char *))dlsym(RTLD_DEFAULT, "fk_dump");
	inject = (int (*)(int, const char *))dlsym(RTLD_DEFAULT, "fk_inject");
	event = (int (*)(int))dlsym(RTLD_DEFAULT, "fk_event");
	if (!dump || !inject || !event) {
		fprintf(stderr, "driver: run with LD_PRELOAD=fake.so\n");
		return 2;
	}
	FILE *f = fopen(argv[1], "r");
	if (!f) {
		perror(argv[1]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	while (fgets(line, sizeof(line), f)) {
		char *tok[MAXTOK], *save;
		int n = 0;
		lineno++;
		if (!strchr(line, '\n') && !feof(f))
			die("line longer than %s bytes", "16383");
		char *hash = strchr(line, '#');
		if (hash)
			*hash = 0;
		line[strcspn(line, "\n")] = 0;
		snprintf(orig, sizeof(orig), "%s", line);
		for (char *t = strtok_r(line, " \t", &save); t; t = strtok_r(NULL, " \t", &save)) {
			if (n == MAXTOK)
				die("more than %s words on a line", "1024");
			tok[n++] = t;
		}
		if (n == 0)
			continue;
		printf(">");
		for (int i = 0; i < n; i++)
			printf(" %s", tok[i]);
		printf("\n");
		run_line(tok, n, orig);
		char label[32];
		snprintf(label, sizeof(label), "%d", lineno);
		dump(label);
	}
	fclose(f);
	return 0;
}
