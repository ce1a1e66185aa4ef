/*
 * rpmaex_atomic.c -- 07-atomic-write: the server's log {char sig[8];
 * uint64_t used; char data[1024]} is appended to by the client: each word
 * is written and flushed at "used", then "used" is moved past it with an
 * atomic write and flushed.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "rpmaex.h"

struct log {
	char sig[8];
	uint64_t used;
	char data[1024];
};

#define FLUSH_ID ((void *)0xF01D)

int
ex07_server(const struct ex_args *a)
{
	struct rpma_peer *peer;
	struct rpma_ep *ep;
	struct rpma_conn *conn;
	struct rpma_mr_local *mr;
	struct ex_cdata cd;

	fprintf(stderr, EX_NO_PMEM);
	struct log *log = ex_alloc(sizeof(*log));
	log->used = offsetof(struct log, data);
	EX_TRY(ex_peer(a, 0, &peer));
	EX_TRY(rpma_ep_listen(peer, a->addr, a->port, &ep));
	EX_TRY(rpma_mr_reg(peer, log, sizeof(*log), RPMA_MR_USAGE_WRITE_DST |
		RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY, &mr));
	ex_cdata_set_mr(&cd, mr, offsetof(struct log, used));
	EX_TRY(ex_accept(ep, NULL, &cd, sizeof(cd), &conn));
	EX_TRY(ex_close_passive(&conn));
	for (const char *p = log->data; p < (char *)log + log->used && p < (char *)(log + 1); p++)
		putchar(*p ? *p : '\n');
	(void) rpma_mr_dereg(&mr);
	(void) rpma_ep_shutdown(&ep);
	return rpma_peer_delete(&peer);
}

int
ex07_client(const struct ex_args *a)
{
	struct rpma_peer *peer;
	struct rpma_conn *conn;
	struct rpma_mr_local *mr;
	struct rpma_mr_remote *log;
	struct rpma_peer_cfg *pcfg;
	struct ex_cdata cd;
	struct ibv_wc wc;
	size_t size;
	int flush_types;
	uint64_t used;

	char *buf = ex_alloc(EX_KB);
	EX_TRY(ex_peer(a, 1, &peer));
	EX_TRY(ex_connect(peer, a, NULL, NULL, 0, &conn));
	/* persistent flushes are allowed, if the region allows them */
	EX_TRY(rpma_peer_cfg_new(&pcfg));
	EX_TRY(rpma_peer_cfg_set_direct_write_to_pmem(pcfg, true));
	EX_TRY(rpma_conn_apply_remote_peer_cfg(conn, pcfg));
	EX_TRY(rpma_mr_reg(peer, buf, EX_KB, RPMA_MR_USAGE_WRITE_SRC | RPMA_MR_USAGE_READ_DST,
		&mr));
	EX_TRY(ex_cdata_of(conn, &cd));
	EX_TRY(rpma_mr_remote_from_descriptor(cd.descriptors, cd.mr_desc_size, &log));
	EX_TRY(rpma_mr_remote_get_size(log, &size));
	EX_TRY(rpma_read(conn, mr, 0, log, cd.data_offset, 8, RPMA_F_COMPLETION_ALWAYS, NULL));
	EX_TRY(ex_wc(ex_cq(conn), &wc));
	if (ex_check_wc(&wc, IBV_WC_RDMA_READ, "rpma_read"))
		return -2;
	memcpy(&used, buf, 8);
	printf("used value: %" PRIu64 "\n", used);
	if (size <= used) {
		fprintf(stderr, "Log size exhausted.\n");
		return -2;
	}
	EX_TRY(rpma_mr_remote_get_flush_type(log, &flush_types));
	enum rpma_flush_type type = (flush_types & RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT) ?
		RPMA_FLUSH_TYPE_PERSISTENT : RPMA_FLUSH_TYPE_VISIBILITY;
	for (int i = 0; i < a->argc; i++) {
		strncpy(buf, a->argv[i], EX_KB - 1);
		buf[EX_KB - 1] = '\0';
		size_t len = strlen(buf) + 1;
		EX_TRY(rpma_write(conn, log, used, mr, 0, len, RPMA_F_COMPLETION_ON_ERROR, NULL));
		EX_TRY(rpma_flush(conn, log, used, len, type, RPMA_F_COMPLETION_ON_ERROR, NULL));
		used += len;
		char u[8];
		memcpy(u, &used, 8);
		EX_TRY(rpma_atomic_write(conn, log, cd.data_offset, u, RPMA_F_COMPLETION_ON_ERROR,
			NULL));
		EX_TRY(rpma_flush(conn, log, cd.data_offset, 8, type, RPMA_F_COMPLETION_ALWAYS,
			FLUSH_ID));
		EX_TRY(ex_wc(ex_cq(conn), &wc));
		if (wc.wr_id != (uintptr_t)FLUSH_ID || ex_check_wc(&wc, IBV_WC_RDMA_READ, "rpma_flush")) {
			fprintf(stderr, "unexpected flush completion (wr_id 0x%" PRIx64 ")\n", wc.wr_id);
			return -2;
		}
	}
	(void) rpma_mr_remote_delete(&log);
	(void) rpma_mr_dereg(&mr);
	(void) rpma_peer_cfg_delete(&pcfg);
	int ret = ex_close_active(&conn);
	(void) rpma_peer_delete(&peer);
	return ret ? -2 : 0;
}
