/* rpmaex_util.c -- what the C peers share, and their main */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rpmaex.h"

int
ex_fail(const char *what, int ret)
{
	fprintf(stderr, "rpmaex: %s: %s (%d)\n", what, rpma_err_2str(ret), ret);
	return ret;
}

void *
ex_alloc(size_t size)
{
	void *p = NULL;
	if (posix_memalign(&p, (size_t)sysconf(_SC_PAGESIZE), size))
		return NULL;
	memset(p, 0, size);
	return p;
}

uint64_t
ex_ul(const char *s)
{
	errno = 0;
	unsigned long v = strtoul(s, NULL, 10);
	if (v == ULONG_MAX && errno == ERANGE) {
		fprintf(stderr, "strtoul(%s) overflowed\n", s);
		exit(-1);
	}
	return v;
}

int
ex_peer(const struct ex_args *a, int remote, struct rpma_peer **peer)
{
	struct ibv_context *ctx;
	EX_TRY(rpma_utils_get_ibv_context(a->addr,
		remote ? RPMA_UTIL_IBV_CONTEXT_REMOTE : RPMA_UTIL_IBV_CONTEXT_LOCAL, &ctx));
	EX_TRY(rpma_peer_new(ctx, peer));
	return 0;
}

int
ex_expect(struct rpma_conn *conn, enum rpma_conn_event want)
{
	enum rpma_conn_event ev = RPMA_CONN_UNDEFINED;
	EX_TRY(rpma_conn_next_event(conn, &ev));
	if (ev != want) {
		fprintf(stderr, "rpma_conn_next_event returned an unexpected event: %s\n",
			rpma_utils_conn_event_2str(ev));
		return -1;
	}
	return 0;
}

static int
ex_do_connect(struct rpma_conn_req **req, const void *pdata, size_t len, struct rpma_conn **conn)
{
	struct rpma_conn_private_data pd = {(void *)pdata, (uint8_t)len};
	EX_TRY(rpma_conn_req_connect(req, pdata ? &pd : NULL, conn));
	int ret = ex_expect(*conn, RPMA_CONN_ESTABLISHED);
	if (ret)
		(void) rpma_conn_delete(conn);
	return ret;
}

int
ex_connect(struct rpma_peer *peer, const struct ex_args *a, struct rpma_conn_cfg *cfg,
		const void *pdata, size_t len, struct rpma_conn **conn)
{
	struct rpma_conn_req *req = NULL;
	EX_TRY(rpma_conn_req_new(peer, a->addr, a->port, cfg, &req));
	return ex_do_connect(&req, pdata, len, conn);
}

int
ex_accept_req(struct rpma_conn_req **req, const void *pdata, size_t len, struct rpma_conn **conn)
{
	return ex_do_connect(req, pdata, len, conn);
}

int
ex_accept(struct rpma_ep *ep, struct rpma_conn_cfg *cfg, const void *pdata, size_t len,
		struct rpma_conn **conn)
{
	struct rpma_conn_req *req = NULL;
	EX_TRY(rpma_ep_next_conn_req(ep, cfg, &req));
	return ex_do_connect(&req, pdata, len, conn);
}

/* the peer ends the connection: wait for it, then disconnect and delete */
int
ex_close_passive(struct rpma_conn **conn)
{
	int ret = ex_expect(*conn, RPMA_CONN_CLOSED);
	(void) rpma_conn_disconnect(*conn);
	(void) rpma_conn_delete(conn);
	return ret;
}

/* end the connection: disconnect, wait for CLOSED, delete */
int
ex_close_active(struct rpma_conn **conn)
{
	int ret = rpma_conn_disconnect(*conn);
	if (ret)
		ex_fail("rpma_conn_disconnect", ret);
	else
		ret = ex_expect(*conn, RPMA_CONN_CLOSED);
	(void) rpma_conn_delete(conn);
	return ret;
}

int
ex_cdata_of(struct rpma_conn *conn, struct ex_cdata *cd)
{
	struct rpma_conn_private_data pd;
	EX_TRY(rpma_conn_get_private_data(conn, &pd));
	if (pd.ptr == NULL || pd.len < sizeof(*cd)) {
		fprintf(stderr, "rpmaex: private data of %u bytes\n", pd.len);
		return -1;
	}
	memcpy(cd, pd.ptr, sizeof(*cd));
	return 0;
}

void
ex_cdata_set_mr(struct ex_cdata *cd, struct rpma_mr_local *mr, uint16_t offset)
{
	size_t size = 0;
	memset(cd, 0, sizeof(*cd));
	cd->data_offset = offset;
	(void) rpma_mr_get_descriptor_size(mr, &size);
	cd->mr_desc_size = (uint8_t)size;
	(void) rpma_mr_get_descriptor(mr, cd->descriptors);
}

struct rpma_cq *
ex_cq(struct rpma_conn *conn)
{
	struct rpma_cq *cq = NULL;
	(void) rpma_conn_get_cq(conn, &cq);
	return cq;
}

struct rpma_cq *
ex_rcq(struct rpma_conn *conn)
{
	struct rpma_cq *cq = NULL;
	(void) rpma_conn_get_rcq(conn, &cq);
	return cq;
}

/*
 * One completion of cq. It polls before it waits: an event can come for a
 * completion an earlier poll already took (one that arrived after the CQ
 * was re-armed and before that poll), and a wait that returns on such an
 * event finds the CQ empty. Such a wake-up is normal for rpma_cq_wait;
 * librpma's own examples give up on it, these peers wait again.
 */
int
ex_wc(struct rpma_cq *cq, struct ibv_wc *wc)
{
	for (;;) {
		int ret = rpma_cq_get_wc(cq, 1, wc, NULL);
		if (ret == 0)
			return 0;
		if (ret != RPMA_E_NO_COMPLETION)
			return ex_fail("rpma_cq_get_wc(cq, 1, wc, NULL)", ret);
		EX_TRY(rpma_cq_wait(cq));
	}
}

int
ex_conn_wc(struct rpma_conn *conn, struct ibv_wc *wc)
{
	for (;;) {
		struct rpma_cq *cq = NULL;
		EX_TRY(rpma_conn_wait(conn, 0, &cq, NULL));
		int ret = rpma_cq_get_wc(cq, 1, wc, NULL);
		if (ret == 0)
			return 0;
		/* an event for a completion an earlier poll took (see ex_wc) */
		if (ret != RPMA_E_NO_COMPLETION)
			return ex_fail("rpma_cq_get_wc(cq, 1, wc, NULL)", ret);
	}
}

int
ex_check_wc(const struct ibv_wc *wc, enum ibv_wc_opcode op, const char *what)
{
	if (wc->status != IBV_WC_SUCCESS) {
		fprintf(stderr, "%s() failed: %s\n", what, ibv_wc_status_str(wc->status));
		return -1;
	}
	if (wc->opcode != op) {
		fprintf(stderr, "unexpected wc.opcode value (%d != %d)\n", wc->opcode, op);
		return -1;
	}
	return 0;
}

static const struct {
	const char *name;
	ex_main_fn server, client;
	int server_args, client_args;	/* required after the port */
} examples[] = {
	{"01-connection", ex01_server, ex01_client, 0, 0},
	{"02-read-to-volatile", ex02_server, ex02_client, 0, 0},
	{"03-read-to-persistent", ex03_server, ex03_client, 0, 0},
	{"04-write-to-persistent", ex04_server, ex04_client, 0, 0},
	{"05-flush-to-persistent", ex05_server, ex05_client, 0, 0},
	{"06-multiple-connections", ex06_server, ex06_client, 0, 1},
	{"06scch-multiple-connections", ex06scch_server, ex06scch_client, 0, 1},
	{"07-atomic-write", ex07_server, ex07_client, 0, 1},
	{"08-messages-ping-pong", ex08_server, ex08_client, 0, 2},
	{"08srq-simple-messages-ping-pong-with-srq", ex08srq_server, ex08srq_client, 0, 2},
	{"09-flush-to-persistent-GPSPM", ex09_server, ex09_client, 0, 0},
	{"09scch-flush-to-persistent-GPSPM", ex09scch_server, ex09scch_client, 0, 0},
	{"10-send-with-imm", ex10_server, ex10_client, 0, 1},
	{"11-write-with-imm", ex11_server, ex11_client, 0, 1},
	{"12-receive-completion-queue", ex12_server, ex12_client, 0, 2},
	{"12scch-receive-completion-queue", ex12scch_server, ex12scch_client, 0, 2},
	{"13-messages-ping-pong-with-srq", ex13_server, ex13_client, 0, 2},
};

int
main(int argc, char *argv[])
{
	/* line-buffered: what was printed survives a kill */
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* librpma's warnings and errors on stderr */
	(void) rpma_log_set_threshold(RPMA_LOG_THRESHOLD_AUX, RPMA_LOG_LEVEL_WARNING);

	if (argc < 5 || (strcmp(argv[2], "server") && strcmp(argv[2], "client"))) {
		fprintf(stderr, "usage: %s NAME server|client <server_address> <port> [ARGS]\n",
			argv[0]);
		return -1;
	}
	for (size_t i = 0; i < sizeof(examples) / sizeof(examples[0]); i++) {
		if (strcmp(examples[i].name, argv[1]))
			continue;
		int server = strcmp(argv[2], "server") == 0;
		if (!examples[i].server || !examples[i].client) {
			fprintf(stderr, "example %s is not built in\n", argv[1]);
			return -1;
		}
		struct ex_args a = {argv[3], argv[4], argc - 5, argv + 5};
		if (a.argc < (server ? examples[i].server_args : examples[i].client_args)) {
			fprintf(stderr, "%s %s: missing arguments\n", argv[1], argv[2]);
			return -1;
		}
		return (server ? examples[i].server : examples[i].client)(&a);
	}
	fprintf(stderr, "unknown example %s\n", argv[1]);
	return -1;
}
