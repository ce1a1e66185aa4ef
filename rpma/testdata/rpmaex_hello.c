/*
 * rpmaex_hello.c -- the greeting examples: 03-read-to-persistent,
 * 04-write-to-persistent, 05-flush-to-persistent and
 * 09(scch)-flush-to-persistent-GPSPM, in DRAM
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "rpmaex.h"

#define STR_SIZE 1024

struct greeting {
	int lang;	/* 0 en, 1 es */
	char str[STR_SIZE];
};

#define STR_OFFSET offsetof(struct greeting, str)
#define FLUSH_ID ((void *)0xF01D)

static const char *const words[] = {"Hello world!", "¡Hola Mundo!"};

static void
set_greeting(struct greeting *g, int lang)
{
	g->lang = lang;
	strncpy(g->str, words[lang], STR_SIZE - 1);
	g->str[STR_SIZE - 1] = '\0';
}

static struct greeting *
client_greeting(void)
{
	fprintf(stderr, EX_NO_PMEM);
	struct greeting *g = ex_alloc(sizeof(*g));
	set_greeting(g, 0);
	printf("Next value: %s\n", g->str);
	return g;
}

static void
translate_and_print(struct greeting *g)
{
	printf("translating...\n");
	set_greeting(g, (g->lang + 1) % 2);
	printf("Translation: %s\n", g->str);
}

static char *
server_string(void)
{
	fprintf(stderr, EX_NO_PMEM);
	return ex_alloc(STR_SIZE);
}

int
ex03_server(const struct ex_args *a)
{
	struct rpma_peer *peer;
	struct rpma_ep *ep;
	struct rpma_conn *conn;
	struct rpma_mr_local *dst;
	struct rpma_mr_remote *src;
	struct ex_cdata cd;
	struct ibv_wc wc;

	char *str = server_string();
	EX_TRY(ex_peer(a, 0, &peer));
	EX_TRY(rpma_ep_listen(peer, a->addr, a->port, &ep));
	EX_TRY(rpma_mr_reg(peer, str, STR_SIZE, RPMA_MR_USAGE_READ_DST, &dst));
	EX_TRY(ex_accept(ep, NULL, NULL, 0, &conn));
	EX_TRY(ex_cdata_of(conn, &cd));
	EX_TRY(rpma_mr_remote_from_descriptor(cd.descriptors, cd.mr_desc_size, &src));
	EX_TRY(rpma_read(conn, dst, 0, src, cd.data_offset, STR_SIZE, RPMA_F_COMPLETION_ALWAYS,
		NULL));
	EX_TRY(ex_wc(ex_cq(conn), &wc));
	int ret = ex_check_wc(&wc, IBV_WC_RDMA_READ, "rpma_read");
	if (ret == 0)
		printf("New value: %s\n", str);
	(void) rpma_mr_remote_delete(&src);
	ret |= ex_close_active(&conn);
	(void) rpma_mr_dereg(&dst);
	(void) rpma_ep_shutdown(&ep);
	(void) rpma_peer_delete(&peer);
	return ret ? -1 : 0;
}

int
ex03_client(const struct ex_args *a)
{
	struct rpma_peer *peer;
	struct rpma_conn *conn;
	struct rpma_mr_local *mr;
	struct ex_cdata cd;

	struct greeting *g = client_greeting();
	EX_TRY(ex_peer(a, 1, &peer));
	EX_TRY(rpma_mr_reg(peer, g, sizeof(*g), RPMA_MR_USAGE_READ_SRC, &mr));
	ex_cdata_set_mr(&cd, mr, STR_OFFSET);
	EX_TRY(ex_connect(peer, a, NULL, &cd, sizeof(cd), &conn));
	/* the server reads, then disconnects */
	(void) ex_close_passive(&conn);
	translate_and_print(g);
	(void) rpma_mr_dereg(&mr);
	return rpma_peer_delete(&peer);
}

/* the server of 04 and 05: a string to write (and flush) into */
static int
write_server(const struct ex_args *a, int usage, int with_pcfg)
{
	struct rpma_peer *peer;
	struct rpma_ep *ep;
	struct rpma_conn *conn;
	struct rpma_mr_local *mr;
	struct rpma_peer_cfg *pcfg;
	struct ex_cdata cd;

	char *str = server_string();
	EX_TRY(ex_peer(a, 0, &peer));
	EX_TRY(rpma_ep_listen(peer, a->addr, a->port, &ep));
	EX_TRY(rpma_mr_reg(peer, str, STR_SIZE, usage, &mr));
	ex_cdata_set_mr(&cd, mr, 0);
	if (with_pcfg) {
		size_t size;
		EX_TRY(rpma_peer_cfg_new(&pcfg));
		EX_TRY(rpma_peer_cfg_get_descriptor_size(pcfg, &size));
		cd.pcfg_desc_size = (uint8_t)size;
		EX_TRY(rpma_peer_cfg_get_descriptor(pcfg, &cd.descriptors[cd.mr_desc_size]));
		(void) rpma_peer_cfg_delete(&pcfg);
	}
	EX_TRY(ex_accept(ep, NULL, &cd, sizeof(cd), &conn));
	EX_TRY(ex_close_passive(&conn));
	printf("New value: %s\n", str);
	(void) rpma_mr_dereg(&mr);
	(void) rpma_ep_shutdown(&ep);
	return rpma_peer_delete(&peer);
}

int
ex04_server(const struct ex_args *a)
{
	return write_server(a, RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC, 0);
}

int
ex05_server(const struct ex_args *a)
{
	return write_server(a, RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY, 1);
}

/* the client of 04 and 05: write, then read back 8 bytes (04) or flush (05) */
static int
write_client(const struct ex_args *a, int flush)
{
	struct rpma_peer *peer;
	struct rpma_conn *conn;
	struct rpma_mr_local *src, *raw_mr = NULL;
	struct rpma_mr_remote *dst;
	struct ex_cdata cd;
	struct ibv_wc wc;
	size_t size;
	int ret;

	struct greeting *g = client_greeting();
	void *raw = ex_alloc(8);
	EX_TRY(ex_peer(a, 1, &peer));
	EX_TRY(ex_connect(peer, a, NULL, NULL, 0, &conn));
	EX_TRY(rpma_mr_reg(peer, g, sizeof(*g), RPMA_MR_USAGE_WRITE_SRC, &src));
	if (!flush)
		EX_TRY(rpma_mr_reg(peer, raw, 8, RPMA_MR_USAGE_READ_DST, &raw_mr));
	EX_TRY(ex_cdata_of(conn, &cd));
	bool direct = false;
	if (flush) {
		struct rpma_peer_cfg *pcfg;
		EX_TRY(rpma_peer_cfg_from_descriptor(&cd.descriptors[cd.mr_desc_size],
			cd.pcfg_desc_size, &pcfg));
		EX_TRY(rpma_peer_cfg_get_direct_write_to_pmem(pcfg, &direct));
		EX_TRY(rpma_conn_apply_remote_peer_cfg(conn, pcfg));
		(void) rpma_peer_cfg_delete(&pcfg);
	}
	EX_TRY(rpma_mr_remote_from_descriptor(cd.descriptors, cd.mr_desc_size, &dst));
	EX_TRY(rpma_mr_remote_get_size(dst, &size));
	if (size - cd.data_offset < STR_SIZE) {
		fprintf(stderr, "remote region too small (%zu)\n", size - cd.data_offset);
		return -1;
	}
	EX_TRY(rpma_write(conn, dst, cd.data_offset, src, STR_OFFSET, STR_SIZE,
		RPMA_F_COMPLETION_ON_ERROR, NULL));
	if (flush) {
		enum rpma_flush_type type = RPMA_FLUSH_TYPE_VISIBILITY;
		if (direct) {
			printf("RPMA_FLUSH_TYPE_PERSISTENT is supported\n");
			type = RPMA_FLUSH_TYPE_PERSISTENT;
		} else {
			printf("RPMA_FLUSH_TYPE_PERSISTENT is NOT supported, RPMA_FLUSH_TYPE_VISIBILITY is used instead\n");
		}
		EX_TRY(rpma_flush(conn, dst, cd.data_offset, STR_SIZE, type,
			RPMA_F_COMPLETION_ALWAYS, FLUSH_ID));
		EX_TRY(ex_wc(ex_cq(conn), &wc));
		if (wc.wr_id != (uintptr_t)FLUSH_ID) {
			fprintf(stderr, "unexpected wc.wr_id value (0x%" PRIx64 ")\n", wc.wr_id);
			return -1;
		}
		/* the flush is an RDMA read in librpma 1.2 */
		ret = ex_check_wc(&wc, IBV_WC_RDMA_READ, "rpma_flush");
	} else {
		EX_TRY(rpma_read(conn, raw_mr, 0, dst, 0, 8, RPMA_F_COMPLETION_ALWAYS, NULL));
		EX_TRY(ex_wc(ex_cq(conn), &wc));
		ret = ex_check_wc(&wc, IBV_WC_RDMA_READ, "rpma_read");
	}
	if (ret == 0)
		translate_and_print(g);
	(void) rpma_mr_remote_delete(&dst);
	(void) rpma_mr_dereg(&src);
	(void) rpma_mr_dereg(&raw_mr);
	ret |= ex_close_active(&conn);
	(void) rpma_peer_delete(&peer);
	return ret ? -1 : 0;
}

int
ex04_client(const struct ex_args *a)
{
	return write_client(a, 0);
}

int
ex05_client(const struct ex_args *a)
{
	return write_client(a, 1);
}

/*
 * 09: the flush is a request message, GPSPM_flush_request {fixed64 offset
 * = 1, length = 2, op_context = 3}, answered by GPSPM_flush_response
 * {fixed64 op_context = 1}: protobuf coded by hand.
 */
#define MSG_MAX 512
#define SEND_OFF 0
#define RECV_OFF MSG_MAX

static size_t
pb_put(uint8_t *p, unsigned field, uint64_t v)
{
	p[0] = (uint8_t)(field << 3 | 1);
	for (int i = 0; i < 8; i++)
		p[1 + i] = (uint8_t)(v >> (8 * i));
	return 9;
}

/* the fixed64 fields 1..n of a message; -1 if one is missing or malformed */
static int
pb_get(const uint8_t *p, size_t len, unsigned n, uint64_t *vals)
{
	unsigned seen = 0;
	while (len > 0) {
		uint64_t key = 0;
		int shift = 0;
		do {
			if (len == 0 || shift > 63)
				return -1;
			key |= (uint64_t)(*p & 0x7f) << shift;
			shift += 7;
			len--;
		} while (*p++ & 0x80);
		unsigned field = (unsigned)(key >> 3);
		if ((key & 7) != 1 || len < 8)
			return -1;	/* only fixed64 fields here */
		if (field >= 1 && field <= n) {
			uint64_t v = 0;
			for (int i = 0; i < 8; i++)
				v |= (uint64_t)p[i] << (8 * i);
			vals[field - 1] = v;
			seen |= 1u << field;
		}
		p += 8;
		len -= 8;
	}
	return seen == ((1u << (n + 1)) - 2) ? 0 : -1;
}

/* one completion: on its own CQ, or via the shared channel */
static int
gpspm_wc(struct rpma_conn *conn, int scch, enum ibv_wc_opcode op, struct ibv_wc *wc)
{
	if (scch)
		EX_TRY(ex_conn_wc(conn, wc));
	else
		EX_TRY(ex_wc(op == IBV_WC_RECV ? ex_rcq(conn) : ex_cq(conn), wc));
	return ex_check_wc(wc, op, op == IBV_WC_RECV ? "rpma_recv" : "rpma_send");
}

static int
gpspm_server(const struct ex_args *a, int scch)
{
	struct rpma_peer *peer;
	struct rpma_ep *ep;
	struct rpma_conn_req *req;
	struct rpma_conn *conn;
	struct rpma_mr_local *mr, *msg_mr;
	struct rpma_conn_cfg *cfg;
	struct ex_cdata cd;
	struct ibv_wc wc;
	uint64_t f[3];

	char *str = server_string();
	uint8_t *msg = ex_alloc(EX_KB);
	EX_TRY(ex_peer(a, 0, &peer));
	EX_TRY(rpma_ep_listen(peer, a->addr, a->port, &ep));
	EX_TRY(rpma_mr_reg(peer, str, STR_SIZE,
		RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY, &mr));
	EX_TRY(rpma_mr_reg(peer, msg, EX_KB, RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_RECV, &msg_mr));
	ex_cdata_set_mr(&cd, mr, 0);
	EX_TRY(rpma_conn_cfg_new(&cfg));
	EX_TRY(rpma_conn_cfg_set_rcq_size(cfg, 1));
	EX_TRY(rpma_conn_cfg_set_compl_channel(cfg, scch));
	EX_TRY(rpma_ep_next_conn_req(ep, cfg, &req));
	EX_TRY(rpma_conn_req_recv(req, msg_mr, RECV_OFF, MSG_MAX, NULL));
	EX_TRY(ex_accept_req(&req, &cd, sizeof(cd), &conn));
	EX_TRY(gpspm_wc(conn, scch, IBV_WC_RECV, &wc));
	if (pb_get(msg + RECV_OFF, wc.byte_len, 3, f)) {
		fprintf(stderr, "Cannot unpack the flush request buffer\n");
		return -1;
	}
	printf("Flush request received: {offset: 0x%" PRIX64 ", length: 0x%" PRIX64
		", op_context: 0x%" PRIX64 "}\n", f[0], f[1], f[2]);
	printf("At this point, %s function should be called if persistent memory will be in use\n",
		scch ? "persistent" : "persist");
	size_t len = pb_put(msg + SEND_OFF, 1, f[2]);
	EX_TRY(rpma_send(conn, msg_mr, SEND_OFF, len, RPMA_F_COMPLETION_ALWAYS, NULL));
	EX_TRY(gpspm_wc(conn, scch, IBV_WC_SEND, &wc));
	EX_TRY(ex_close_passive(&conn));
	printf("New value: %s\n", str);
	(void) rpma_conn_cfg_delete(&cfg);
	(void) rpma_mr_dereg(&msg_mr);
	(void) rpma_mr_dereg(&mr);
	(void) rpma_ep_shutdown(&ep);
	return rpma_peer_delete(&peer);
}

static int
gpspm_client(const struct ex_args *a, int scch)
{
	struct rpma_peer *peer;
	struct rpma_conn *conn;
	struct rpma_mr_local *src, *msg_mr;
	struct rpma_mr_remote *dst;
	struct rpma_conn_cfg *cfg;
	struct ex_cdata cd;
	struct ibv_wc wc;
	size_t size;
	uint64_t ctx;

	struct greeting *g = client_greeting();
	uint8_t *msg = ex_alloc(EX_KB);
	EX_TRY(ex_peer(a, 1, &peer));
	EX_TRY(rpma_conn_cfg_new(&cfg));
	EX_TRY(rpma_conn_cfg_set_rcq_size(cfg, 1));
	EX_TRY(rpma_conn_cfg_set_compl_channel(cfg, scch));
	EX_TRY(ex_connect(peer, a, cfg, NULL, 0, &conn));
	EX_TRY(rpma_mr_reg(peer, g, sizeof(*g), RPMA_MR_USAGE_WRITE_SRC, &src));
	EX_TRY(rpma_mr_reg(peer, msg, EX_KB, RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_RECV, &msg_mr));
	EX_TRY(ex_cdata_of(conn, &cd));
	EX_TRY(rpma_mr_remote_from_descriptor(cd.descriptors, cd.mr_desc_size, &dst));
	EX_TRY(rpma_mr_remote_get_size(dst, &size));
	if (size - cd.data_offset < STR_SIZE) {
		fprintf(stderr, "remote region too small (%zu)\n", size - cd.data_offset);
		return -1;
	}
	EX_TRY(rpma_write(conn, dst, cd.data_offset, src, STR_OFFSET, STR_SIZE,
		RPMA_F_COMPLETION_ON_ERROR, NULL));
	EX_TRY(rpma_recv(conn, msg_mr, RECV_OFF, MSG_MAX, NULL));
	size_t len = pb_put(msg + SEND_OFF, 1, cd.data_offset);
	len += pb_put(msg + SEND_OFF + len, 2, STR_SIZE);
	len += pb_put(msg + SEND_OFF + len, 3, (uintptr_t)FLUSH_ID);
	EX_TRY(rpma_send(conn, msg_mr, SEND_OFF, len, RPMA_F_COMPLETION_ALWAYS, NULL));
	if (scch) {
		/*
		 * One channel for both CQs: the response's RECV may be reported
		 * before the request's SEND (the server answers as soon as the
		 * request lands). Take the two in either order, as the Go port
		 * does; keep the RECV's completion for its length.
		 */
		struct ibv_wc w[2];
		EX_TRY(ex_conn_wc(conn, &w[0]));
		EX_TRY(ex_conn_wc(conn, &w[1]));
		int r = w[0].opcode == IBV_WC_RECV ? 0 : 1;
		EX_TRY(ex_check_wc(&w[1 - r], IBV_WC_SEND, "rpma_send"));
		EX_TRY(ex_check_wc(&w[r], IBV_WC_RECV, "rpma_recv"));
		wc = w[r];
	} else {
		EX_TRY(gpspm_wc(conn, scch, IBV_WC_SEND, &wc));
		EX_TRY(gpspm_wc(conn, scch, IBV_WC_RECV, &wc));
	}
	if (pb_get(msg + RECV_OFF, wc.byte_len, 1, &ctx)) {
		fprintf(stderr, "Cannot unpack the flush response buffer\n");
		return -1;
	}
	if (ctx != (uintptr_t)FLUSH_ID) {
		fprintf(stderr, "unexpected flush_resp->op_context value (0x%" PRIX64 ")\n", ctx);
		return -1;
	}
	translate_and_print(g);
	(void) rpma_mr_remote_delete(&dst);
	(void) rpma_mr_dereg(&msg_mr);
	(void) rpma_mr_dereg(&src);
	int ret = ex_close_active(&conn);
	(void) rpma_conn_cfg_delete(&cfg);
	(void) rpma_peer_delete(&peer);
	return ret;
}

int
ex09_server(const struct ex_args *a)
{
	return gpspm_server(a, 0);
}

int
ex09_client(const struct ex_args *a)
{
	return gpspm_client(a, 0);
}

int
ex09scch_server(const struct ex_args *a)
{
	return gpspm_server(a, 1);
}

int
ex09scch_client(const struct ex_args *a)
{
	return gpspm_client(a, 1);
}
