/* rpmaex_conn.c -- 01-connection and 02-read-to-volatile */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "rpmaex.h"

static void
print_greeting(struct rpma_conn *conn)
{
	struct rpma_conn_private_data pd = {NULL, 0};
	(void) rpma_conn_get_private_data(conn, &pd);
	if (pd.ptr)
		printf("Received a message: %s\n", (char *)pd.ptr);
	else
		printf("No message received\n");
}

int
ex01_server(const struct ex_args *a)
{
	static const char greeting[] = "Hello client!";
	struct rpma_peer *peer;
	struct rpma_ep *ep;
	struct rpma_conn *conn;

	EX_TRY(ex_peer(a, 0, &peer));
	EX_TRY(rpma_ep_listen(peer, a->addr, a->port, &ep));
	EX_TRY(ex_accept(ep, NULL, greeting, sizeof(greeting), &conn));
	print_greeting(conn);
	EX_TRY(rpma_conn_disconnect(conn));
	EX_TRY(ex_expect(conn, RPMA_CONN_CLOSED));
	EX_TRY(rpma_conn_delete(&conn));
	EX_TRY(rpma_ep_shutdown(&ep));
	return rpma_peer_delete(&peer);
}

int
ex01_client(const struct ex_args *a)
{
	static const char greeting[] = "Hello server!";
	struct rpma_conn_private_data pd = {(void *)greeting, sizeof(greeting)};
	struct rpma_peer *peer;
	struct rpma_conn *conn = NULL;

	EX_TRY(ex_peer(a, 1, &peer));
	/* the server may not listen yet: 10 tries, 5 s apart */
	for (int try = 1; conn == NULL; try++) {
		struct rpma_conn_req *req = NULL;
		enum rpma_conn_event ev = RPMA_CONN_UNDEFINED;
		EX_TRY(rpma_conn_req_new(peer, a->addr, a->port, NULL, &req));
		EX_TRY(rpma_conn_req_connect(&req, &pd, &conn));
		EX_TRY(rpma_conn_next_event(conn, &ev));
		if (ev == RPMA_CONN_ESTABLISHED)
			break;
		if (ev != RPMA_CONN_REJECTED) {
			fprintf(stderr, "rpma_conn_next_event returned an unexpected event: %s\n",
				rpma_utils_conn_event_2str(ev));
			return -1;
		}
		(void) rpma_conn_disconnect(conn);
		(void) rpma_conn_delete(&conn);
		if (try == 10) {
			fprintf(stderr, "The retry number exceeded. Closing.\n");
			return -1;
		}
		fprintf(stderr, "Retrying...\n");
		sleep(5);
	}
	print_greeting(conn);
	EX_TRY(ex_expect(conn, RPMA_CONN_CLOSED));
	EX_TRY(rpma_conn_disconnect(conn));
	EX_TRY(rpma_conn_delete(&conn));
	return rpma_peer_delete(&peer);
}

int
ex02_server(const struct ex_args *a)
{
	static const char msg[] = "Hello client!";
	struct rpma_peer *peer;
	struct rpma_ep *ep;
	struct rpma_conn *conn;
	struct rpma_mr_local *mr;
	struct ex_cdata cd;

	EX_TRY(ex_peer(a, 0, &peer));
	EX_TRY(rpma_ep_listen(peer, a->addr, a->port, &ep));
	char *buf = ex_alloc(sizeof(msg));
	memcpy(buf, msg, sizeof(msg));
	EX_TRY(rpma_mr_reg(peer, buf, sizeof(msg), RPMA_MR_USAGE_READ_SRC, &mr));
	ex_cdata_set_mr(&cd, mr, 0);
	EX_TRY(ex_accept(ep, NULL, &cd, sizeof(cd), &conn));
	/* the client reads, then disconnects */
	(void) ex_close_passive(&conn);
	(void) rpma_mr_dereg(&mr);
	(void) rpma_ep_shutdown(&ep);
	return rpma_peer_delete(&peer);
}

int
ex02_client(const struct ex_args *a)
{
	struct rpma_peer *peer;
	struct rpma_conn *conn;
	struct rpma_mr_local *dst;
	struct rpma_mr_remote *src;
	struct ex_cdata cd;
	struct ibv_wc wc;
	size_t size;

	EX_TRY(ex_peer(a, 1, &peer));
	char *buf = ex_alloc(EX_KB);
	EX_TRY(rpma_mr_reg(peer, buf, EX_KB, RPMA_MR_USAGE_READ_DST, &dst));
	EX_TRY(ex_connect(peer, a, NULL, NULL, 0, &conn));
	EX_TRY(ex_cdata_of(conn, &cd));
	EX_TRY(rpma_mr_remote_from_descriptor(cd.descriptors, cd.mr_desc_size, &src));
	EX_TRY(rpma_mr_remote_get_size(src, &size));
	if (size > EX_KB) {
		fprintf(stderr, "remote region too big (%zu)\n", size);
		return -1;
	}
	EX_TRY(rpma_read(conn, dst, 0, src, 0, size, RPMA_F_COMPLETION_ALWAYS, NULL));
	EX_TRY(ex_wc(ex_cq(conn), &wc));
	int ret = ex_check_wc(&wc, IBV_WC_RDMA_READ, "rpma_read");
	if (ret == 0)
		printf("Read a message: %s\n", buf);
	(void) rpma_mr_remote_delete(&src);
	(void) ex_close_active(&conn);
	(void) rpma_mr_dereg(&dst);
	(void) rpma_peer_delete(&peer);
	return ret;
}
