/*
 * rpmaex_imm.c -- 10-send-with-imm (the immediate value announced in the
 * connection request's private data, then sent with an optional word) and
 * 11-write-with-imm (the immediate value written, with itself as the
 * immediate, into the server's region).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpmaex.h"

static int
imm_arg(const char *s, uint32_t *imm)
{
	errno = 0;
	unsigned long v = strtoul(s, NULL, 10);
	if ((v == ULONG_MAX && errno == ERANGE) || v > UINT32_MAX) {
		fprintf(stderr, "bad immediate data %s\n", s);
		return -1;
	}
	*imm = (uint32_t)v;
	return 0;
}

/* the server's receive completion with immediate data */
static int
check_imm(const struct ibv_wc *wc, enum ibv_wc_opcode op, uint32_t want)
{
	if (ex_check_wc(wc, op, "receive"))
		return -1;
	if (!(wc->wc_flags & IBV_WC_WITH_IMM)) {
		fprintf(stderr, "no IBV_WC_WITH_IMM\n");
		return -1;
	}
	if (ntohl(wc->imm_data) != want) {
		fprintf(stderr, "Received unexpected immediate data (%u != %u)\n",
			ntohl(wc->imm_data), want);
		return -1;
	}
	return 0;
}

int
ex10_server(const struct ex_args *a)
{
	struct rpma_peer *peer;
	struct rpma_mr_local *mr;
	struct rpma_ep *ep;
	struct rpma_conn_req *req;
	struct rpma_conn *conn;
	struct rpma_conn_private_data pd;
	struct ibv_wc wc;
	uint32_t want;

	char *buf = ex_alloc(EX_KB);
	EX_TRY(ex_peer(a, 0, &peer));
	EX_TRY(rpma_mr_reg(peer, buf, EX_KB, RPMA_MR_USAGE_RECV, &mr));
	EX_TRY(rpma_ep_listen(peer, a->addr, a->port, &ep));
	EX_TRY(rpma_ep_next_conn_req(ep, NULL, &req));
	EX_TRY(rpma_conn_req_recv(req, mr, 0, EX_KB, NULL));
	EX_TRY(ex_accept_req(&req, NULL, 0, &conn));
	EX_TRY(rpma_conn_get_private_data(conn, &pd));
	if (pd.len < sizeof(want)) {
		fprintf(stderr, "private data of %u bytes\n", pd.len);
		return -1;
	}
	memcpy(&want, pd.ptr, sizeof(want));
	EX_TRY(ex_wc(ex_cq(conn), &wc));
	int ret = check_imm(&wc, IBV_WC_RECV, want);
	if (ret == 0) {
		if (wc.byte_len == 0)
			buf[0] = '\0';
		printf("Received value '%s' with immediate data '%u'\n", buf, want);
	}
	(void) ex_close_passive(&conn);
	(void) rpma_ep_shutdown(&ep);
	(void) rpma_mr_dereg(&mr);
	(void) rpma_peer_delete(&peer);
	return ret;
}

int
ex10_client(const struct ex_args *a)
{
	struct rpma_peer *peer;
	struct rpma_mr_local *mr = NULL;
	struct rpma_conn *conn;
	struct ibv_wc wc;
	uint32_t imm;
	char *buf = NULL;
	size_t len = 0;

	if (imm_arg(a->argv[0], &imm))
		return -1;
	EX_TRY(ex_peer(a, 1, &peer));
	if (a->argc > 1) {
		len = EX_KB;
		buf = ex_alloc(len);
		EX_TRY(rpma_mr_reg(peer, buf, len, RPMA_MR_USAGE_SEND, &mr));
	}
	EX_TRY(ex_connect(peer, a, NULL, &imm, sizeof(imm), &conn));
	if (buf) {
		printf("Sending value '%s' with immediate data '%u'\n", a->argv[1], imm);
		strncpy(buf, a->argv[1], EX_KB - 1);
	} else {
		printf("Sending immediate data '%u'\n", imm);
	}
	EX_TRY(rpma_send_with_imm(conn, mr, 0, len, RPMA_F_COMPLETION_ALWAYS, imm, NULL));
	EX_TRY(ex_wc(ex_cq(conn), &wc));
	int ret = ex_check_wc(&wc, IBV_WC_SEND, "rpma_send_with_imm");
	ret |= ex_close_active(&conn);
	(void) rpma_mr_dereg(&mr);
	(void) rpma_peer_delete(&peer);
	return ret;
}

int
ex11_server(const struct ex_args *a)
{
	struct rpma_peer *peer;
	struct rpma_mr_local *dst_mr, *recv_mr;
	struct rpma_ep *ep;
	struct rpma_conn_req *req;
	struct rpma_conn *conn;
	struct ex_cdata cd;
	struct ibv_wc wc;
	uint32_t value;

	char *dst = ex_alloc(EX_KB);
	char *recv = ex_alloc(1);
	EX_TRY(ex_peer(a, 0, &peer));
	EX_TRY(rpma_mr_reg(peer, dst, EX_KB, RPMA_MR_USAGE_WRITE_DST, &dst_mr));
	EX_TRY(rpma_mr_reg(peer, recv, 1, RPMA_MR_USAGE_RECV, &recv_mr));
	ex_cdata_set_mr(&cd, dst_mr, 0);
	EX_TRY(rpma_ep_listen(peer, a->addr, a->port, &ep));
	EX_TRY(rpma_ep_next_conn_req(ep, NULL, &req));
	EX_TRY(rpma_conn_req_recv(req, recv_mr, 0, 1, NULL));
	EX_TRY(ex_accept_req(&req, &cd, sizeof(cd), &conn));
	EX_TRY(ex_wc(ex_cq(conn), &wc));
	memcpy(&value, dst, sizeof(value));
	int ret = check_imm(&wc, IBV_WC_RECV_RDMA_WITH_IMM, value);
	if (ret == 0)
		printf("The value '%u' was written together with immediate data '%u'\n", value,
			ntohl(wc.imm_data));
	(void) ex_close_passive(&conn);
	(void) rpma_ep_shutdown(&ep);
	(void) rpma_mr_dereg(&recv_mr);
	(void) rpma_mr_dereg(&dst_mr);
	(void) rpma_peer_delete(&peer);
	return ret;
}

int
ex11_client(const struct ex_args *a)
{
	struct rpma_peer *peer;
	struct rpma_mr_local *mr;
	struct rpma_mr_remote *dst;
	struct rpma_conn *conn;
	struct ex_cdata cd;
	struct ibv_wc wc;
	uint32_t imm;

	if (imm_arg(a->argv[0], &imm))
		return -1;
	char *src = ex_alloc(EX_KB);
	EX_TRY(ex_peer(a, 1, &peer));
	EX_TRY(rpma_mr_reg(peer, src, EX_KB, RPMA_MR_USAGE_WRITE_SRC, &mr));
	EX_TRY(ex_connect(peer, a, NULL, NULL, 0, &conn));
	EX_TRY(ex_cdata_of(conn, &cd));
	EX_TRY(rpma_mr_remote_from_descriptor(cd.descriptors, cd.mr_desc_size, &dst));
	memcpy(src, &imm, sizeof(imm));
	printf("Writing value '%u' with immediate data '%u'\n", imm, imm);
	EX_TRY(rpma_write_with_imm(conn, dst, cd.data_offset, mr, 0, EX_KB,
		RPMA_F_COMPLETION_ALWAYS, imm, NULL));
	EX_TRY(ex_wc(ex_cq(conn), &wc));
	int ret = ex_check_wc(&wc, IBV_WC_RDMA_WRITE, "rpma_write_with_imm");
	(void) rpma_mr_remote_delete(&dst);
	ret |= ex_close_active(&conn);
	(void) rpma_mr_dereg(&mr);
	(void) rpma_peer_delete(&peer);
	return ret;
}
