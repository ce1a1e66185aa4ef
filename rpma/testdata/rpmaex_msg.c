/*
 * rpmaex_msg.c -- the ping-pongs of 8-byte counters (host byte order;
 * UINT64_MAX ends): 08-messages-ping-pong, 08srq-simple-messages-ping-pong-
 * with-srq, 12(scch)-receive-completion-queue and
 * 13-messages-ping-pong-with-srq.
 */
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rpmaex.h"

#define MSG 8
#define DONE UINT64_MAX
#define MAX_CLIENTS 10

struct bufs {
	uint64_t *recv, *send;
	struct rpma_mr_local *recv_mr, *send_mr;
};

static int
bufs_new(struct rpma_peer *peer, size_t n, struct bufs *b)
{
	b->recv = ex_alloc(n * MSG);
	b->send = ex_alloc(n * MSG);
	EX_TRY(rpma_mr_reg(peer, b->recv, n * MSG, RPMA_MR_USAGE_RECV, &b->recv_mr));
	EX_TRY(rpma_mr_reg(peer, b->send, n * MSG, RPMA_MR_USAGE_SEND, &b->send_mr));
	return 0;
}

/*
 * until the receive of a round completed on cq, and the send too unless
 * need_sent is 0 (a send completion that comes meanwhile is noted)
 */
static int
wait_for(struct rpma_cq *cq, void *recv_ctx, int *sent, int *received, int need_sent)
{
	while ((need_sent && !*sent) || !*received) {
		struct ibv_wc wc[2];
		int n = 0;
		EX_TRY(rpma_cq_wait(cq));
		int ret = rpma_cq_get_wc(cq, 2, wc, &n);
		if (ret && ret != RPMA_E_NO_COMPLETION)
			return ex_fail("rpma_cq_get_wc", ret);
		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS) {
				fprintf(stderr, "completion failed: %s\n",
					ibv_wc_status_str(wc[i].status));
				return -1;
			}
			if (wc[i].opcode == IBV_WC_SEND) {
				*sent = 1;
			} else if (wc[i].opcode == IBV_WC_RECV) {
				if (wc[i].wr_id != (uintptr_t)recv_ctx || wc[i].byte_len != MSG) {
					fprintf(stderr, "unexpected receive completion\n");
					return -1;
				}
				*received = 1;
			}
		}
	}
	return 0;
}

/* until both the send and the receive of a round completed on cq */
static int
wait_round(struct rpma_cq *cq, void *recv_ctx, int *sent, int *received)
{
	return wait_for(cq, recv_ctx, sent, received, 1);
}

int
ex08_server(const struct ex_args *a)
{
	struct rpma_peer *peer;
	struct rpma_ep *ep;
	struct rpma_conn_req *req;
	struct rpma_conn *conn;
	struct bufs b;

	EX_TRY(ex_peer(a, 0, &peer));
	EX_TRY(rpma_ep_listen(peer, a->addr, a->port, &ep));
	EX_TRY(bufs_new(peer, 1, &b));
	EX_TRY(rpma_ep_next_conn_req(ep, NULL, &req));
	EX_TRY(rpma_conn_req_recv(req, b.recv_mr, 0, MSG, b.recv));
	EX_TRY(ex_accept_req(&req, NULL, 0, &conn));
	int sent = 1, received = 0, ret;
	/*
	 * The receive first: after DONE the last answer's send may never
	 * complete. The client's rxe posts a receive's completion before it
	 * acknowledges, and sends no acknowledgement once its QP is in the
	 * error state (it disconnects right after DONE); librpma's retry
	 * count, 7, is "for ever" to rxe (docs/kernels.md, section 1). The
	 * send's completion is taken before the buffer is written again.
	 */
	while ((ret = wait_for(ex_cq(conn), b.recv, &sent, &received, 0)) == 0 && *b.recv != DONE &&
	       (ret = wait_round(ex_cq(conn), b.recv, &sent, &received)) == 0) {
		printf("Value received: %" PRIu64 "\n", *b.recv);
		*b.send = *b.recv + 1;
		EX_TRY(rpma_recv(conn, b.recv_mr, 0, MSG, b.recv));
		printf("Value sent: %" PRIu64 "\n", *b.send);
		EX_TRY(rpma_send(conn, b.send_mr, 0, MSG, RPMA_F_COMPLETION_ALWAYS, NULL));
		sent = received = 0;
	}
	ret |= ex_close_active(&conn);
	(void) rpma_ep_shutdown(&ep);
	(void) rpma_peer_delete(&peer);
	return ret ? -1 : 0;
}

/*
 * A ping-pong client: rounds exchanges after 08's "while (--rounds)"
 * (pre = 1) or the do-while of 08srq and 13 (pre = 0), then DONE.
 */
static int
pingpong_client(const struct ex_args *a, int pre, const char *label, const char *v_sent,
		const char *v_received)
{
	struct rpma_peer *peer;
	struct rpma_conn *conn;
	struct bufs b;

	uint64_t counter = ex_ul(a->argv[0]);
	uint64_t rounds = ex_ul(a->argv[1]);
	uint64_t usec = a->argc > 2 ? ex_ul(a->argv[2]) : 0;
	EX_TRY(ex_peer(a, 1, &peer));
	EX_TRY(bufs_new(peer, 1, &b));
	EX_TRY(ex_connect(peer, a, NULL, NULL, 0, &conn));
	int ret = 0;
	for (int first = 1; ; first = 0) {
		if ((pre || !first) && --rounds == 0)
			break;
		EX_TRY(rpma_recv(conn, b.recv_mr, 0, MSG, b.recv));
		printf("%s%s: %" PRIu64 "\n", label, v_sent, counter);
		*b.send = counter;
		EX_TRY(rpma_send(conn, b.send_mr, 0, MSG, RPMA_F_COMPLETION_ALWAYS, NULL));
		int sent = 0, received = 0;
		if ((ret = wait_round(ex_cq(conn), b.recv, &sent, &received)))
			break;
		counter = *b.recv;
		printf("%s%s: %" PRIu64 "\n", label, v_received, counter);
		if (usec)
			usleep(usec);
	}
	*b.send = DONE;
	if (pre) {
		/*
		 * 08's client ends the connection: librpma's example sends DONE
		 * unsignaled and disconnects at once, which on rxe of kernels
		 * that send from a workqueue (6.12) can flush DONE before it
		 * leaves, so the server waits for it forever. Wait for it.
		 */
		ret |= rpma_send(conn, b.send_mr, 0, MSG, RPMA_F_COMPLETION_ALWAYS, NULL);
		struct ibv_wc wc;
		if (ret == 0 && (ret = ex_wc(ex_cq(conn), &wc)) == 0)
			ret = ex_check_wc(&wc, IBV_WC_SEND, "rpma_send");
		ret |= ex_close_active(&conn);
	} else {
		/* 08srq's and 13's server ends the connection once it has DONE */
		ret |= rpma_send(conn, b.send_mr, 0, MSG, RPMA_F_COMPLETION_ON_ERROR, NULL);
		ret |= ex_close_passive(&conn);
	}
	(void) rpma_peer_delete(&peer);
	return ret ? -1 : 0;
}

int
ex08_client(const struct ex_args *a)
{
	return pingpong_client(a, 1, "", "Value sent", "Value received");
}

int
ex08srq_client(const struct ex_args *a)
{
	return pingpong_client(a, 0, "", "Value sent", "Value received");
}

int
ex13_client(const struct ex_args *a)
{
	char label[64];
	snprintf(label, sizeof(label), "[client #%d] ", (int)getpid());
	return pingpong_client(a, 0, label, "value sent", "value received");
}

int
ex08srq_server(const struct ex_args *a)
{
	struct rpma_peer *peer;
	struct rpma_ep *ep;
	struct rpma_srq_cfg *srq_cfg;
	struct rpma_srq *srq;
	struct rpma_conn_cfg *cfg;
	struct rpma_conn *conn;
	struct rpma_cq *rcq = NULL;
	struct bufs b;
	uint32_t qp_num;
	char mode = 's';

	if (a->argc > 0) {
		if (strcmp(a->argv[0], "m") && strcmp(a->argv[0], "r")) {
			fprintf(stderr, "bad mode %s\n", a->argv[0]);
			return -1;
		}
		mode = a->argv[0][0];
	}
	EX_TRY(ex_peer(a, 0, &peer));
	EX_TRY(rpma_srq_cfg_new(&srq_cfg));
	if (mode != 's')
		EX_TRY(rpma_srq_cfg_set_rcq_size(srq_cfg, 0));
	EX_TRY(rpma_srq_new(peer, srq_cfg, &srq));
	EX_TRY(rpma_conn_cfg_new(&cfg));
	if (mode == 'r')
		EX_TRY(rpma_conn_cfg_set_rcq_size(cfg, 10));
	EX_TRY(rpma_conn_cfg_set_srq(cfg, srq));
	EX_TRY(rpma_ep_listen(peer, a->addr, a->port, &ep));
	EX_TRY(bufs_new(peer, 1, &b));
	EX_TRY(rpma_srq_recv(srq, b.recv_mr, 0, MSG, b.recv));
	EX_TRY(ex_accept(ep, cfg, NULL, 0, &conn));
	EX_TRY(rpma_conn_get_qp_num(conn, &qp_num));
	if (mode == 's')
		EX_TRY(rpma_srq_get_rcq(srq, &rcq));
	else if (mode == 'm')
		rcq = ex_cq(conn);
	else
		rcq = ex_rcq(conn);
	int ret = 0;
	for (;;) {
		struct ibv_wc wc;
		int n = 0;
		while (n == 0) {
			EX_TRY(rpma_cq_wait(rcq));
			ret = rpma_cq_get_wc(rcq, 1, &wc, &n);
			if (ret && ret != RPMA_E_NO_COMPLETION)
				return ex_fail("rpma_cq_get_wc", ret);
			ret = 0;
		}
		if ((ret = ex_check_wc(&wc, IBV_WC_RECV, "rpma_srq_recv")))
			break;
		if (wc.wr_id != (uintptr_t)b.recv || wc.byte_len != MSG) {
			fprintf(stderr, "unexpected receive completion\n");
			ret = -1;
			break;
		}
		if (*b.recv == DONE)
			break;
		if (wc.qp_num != qp_num) {
			fprintf(stderr, "completion of QP %u, not %u\n", wc.qp_num, qp_num);
			ret = -1;
			break;
		}
		printf("Value received: %" PRIu64 "\n", *b.recv);
		*b.send = *b.recv + 1;
		EX_TRY(rpma_srq_recv(srq, b.recv_mr, 0, MSG, b.recv));
		printf("Value sent: %" PRIu64 "\n", *b.send);
		EX_TRY(rpma_send(conn, b.send_mr, 0, MSG, RPMA_F_COMPLETION_ON_ERROR, NULL));
	}
	(void) rpma_conn_disconnect(conn);
	(void) rpma_conn_delete(&conn);
	(void) rpma_ep_shutdown(&ep);
	(void) rpma_conn_cfg_delete(&cfg);
	(void) rpma_srq_delete(&srq);
	(void) rpma_srq_cfg_delete(&srq_cfg);
	(void) rpma_peer_delete(&peer);
	return ret ? -1 : 0;
}

/* 12: one completion of op, on its CQ or through the shared channel */
static int
rcq_wc(struct rpma_conn *conn, int scch, enum ibv_wc_opcode op)
{
	struct ibv_wc wc;
	if (scch)
		EX_TRY(ex_conn_wc(conn, &wc));
	else
		EX_TRY(ex_wc(op == IBV_WC_RECV ? ex_rcq(conn) : ex_cq(conn), &wc));
	return ex_check_wc(&wc, op, op == IBV_WC_RECV ? "rpma_recv" : "rpma_send");
}

static int
rcq_cfg(int scch, struct rpma_conn_cfg **cfg)
{
	EX_TRY(rpma_conn_cfg_new(cfg));
	EX_TRY(rpma_conn_cfg_set_rcq_size(*cfg, 10));
	EX_TRY(rpma_conn_cfg_set_compl_channel(*cfg, scch));
	return 0;
}

static int
rcq_server(const struct ex_args *a, int scch)
{
	struct rpma_peer *peer;
	struct rpma_ep *ep;
	struct rpma_conn_cfg *cfg;
	struct rpma_conn_req *req;
	struct rpma_conn *conn;
	struct bufs b;

	EX_TRY(ex_peer(a, 0, &peer));
	EX_TRY(rpma_ep_listen(peer, a->addr, a->port, &ep));
	EX_TRY(bufs_new(peer, 1, &b));
	EX_TRY(rcq_cfg(scch, &cfg));
	EX_TRY(rpma_ep_next_conn_req(ep, cfg, &req));
	EX_TRY(rpma_conn_req_recv(req, b.recv_mr, 0, MSG, b.recv));
	EX_TRY(ex_accept_req(&req, NULL, 0, &conn));
	int ret, sent = 1;
	while ((ret = rcq_wc(conn, scch, IBV_WC_RECV)) == 0 && *b.recv != DONE) {
		/*
		 * With CQs of their own, the send's completion is taken after
		 * the next receive, as ex08_server does and for its reason.
		 * Through the shared channel the send's comes first, as
		 * librpma's example has it.
		 */
		if (!sent && (ret = rcq_wc(conn, scch, IBV_WC_SEND)))
			break;
		printf("SERVER: Value received: %" PRIu64 "\n", *b.recv);
		*b.send = *b.recv + 1;
		EX_TRY(rpma_recv(conn, b.recv_mr, 0, MSG, b.recv));
		printf("SERVER: Value sent: %" PRIu64 "\n", *b.send);
		EX_TRY(rpma_send(conn, b.send_mr, 0, MSG, RPMA_F_COMPLETION_ALWAYS, NULL));
		if (scch && (ret = rcq_wc(conn, scch, IBV_WC_SEND)))
			break;
		sent = scch; /* with CQs of their own, taken after the next receive */
	}
	ret |= ex_close_active(&conn);
	(void) rpma_conn_cfg_delete(&cfg);
	(void) rpma_ep_shutdown(&ep);
	(void) rpma_peer_delete(&peer);
	return ret ? -1 : 0;
}

static int
rcq_client(const struct ex_args *a, int scch)
{
	struct rpma_peer *peer;
	struct rpma_conn_cfg *cfg;
	struct rpma_conn *conn;
	struct bufs b;

	uint64_t counter = ex_ul(a->argv[0]);
	uint64_t rounds = ex_ul(a->argv[1]);
	uint64_t usec = a->argc > 2 ? ex_ul(a->argv[2]) : 0;
	EX_TRY(ex_peer(a, 1, &peer));
	EX_TRY(bufs_new(peer, 1, &b));
	EX_TRY(rcq_cfg(scch, &cfg));
	EX_TRY(ex_connect(peer, a, cfg, NULL, 0, &conn));
	int ret = 0;
	while (--rounds) {
		EX_TRY(rpma_recv(conn, b.recv_mr, 0, MSG, b.recv));
		printf("CLIENT: Value sent: %" PRIu64 "\n", counter);
		*b.send = counter;
		EX_TRY(rpma_send(conn, b.send_mr, 0, MSG, RPMA_F_COMPLETION_ALWAYS, NULL));
		if ((ret = rcq_wc(conn, scch, IBV_WC_SEND)) || (ret = rcq_wc(conn, scch, IBV_WC_RECV)))
			break;
		counter = *b.recv;
		printf("CLIENT: Value received: %" PRIu64 "\n", counter);
		if (usec)
			usleep(usec);
	}
	*b.send = DONE;
	if (getenv("RPMAEX_LIBRPMA_END")) {
		/*
		 * As librpma's own example ends: DONE unsignaled and a disconnect
		 * at once, which on 6.12 can flush DONE before it leaves (see
		 * pingpong_client). The server must then see the disconnect end
		 * its wait instead of waiting for DONE for ever.
		 */
		ret |= rpma_send(conn, b.send_mr, 0, MSG, RPMA_F_COMPLETION_ON_ERROR, NULL);
	} else {
		/* signaled and waited for before disconnecting: see pingpong_client */
		ret |= rpma_send(conn, b.send_mr, 0, MSG, RPMA_F_COMPLETION_ALWAYS, NULL);
		if (ret == 0)
			ret = rcq_wc(conn, scch, IBV_WC_SEND);
	}
	ret |= ex_close_active(&conn);
	(void) rpma_conn_cfg_delete(&cfg);
	(void) rpma_peer_delete(&peer);
	return ret ? -1 : 0;
}

int
ex12_server(const struct ex_args *a)
{
	return rcq_server(a, 0);
}

int
ex12_client(const struct ex_args *a)
{
	return rcq_client(a, 0);
}

int
ex12scch_server(const struct ex_args *a)
{
	return rcq_server(a, 1);
}

int
ex12scch_client(const struct ex_args *a)
{
	return rcq_client(a, 1);
}

/* 13: take clients until none came for the timeout, then serve them all */
int
ex13_server(const struct ex_args *a)
{
	struct rpma_peer *peer;
	struct rpma_srq *srq;
	struct rpma_conn_cfg *cfg;
	struct rpma_ep *ep;
	struct rpma_cq *rcq;
	struct rpma_conn *conns[MAX_CLIENTS];
	uint32_t qps[MAX_CLIENTS];
	struct bufs b;
	int ep_fd, n = 0, done = 0;

	int timeout_ms = (a->argc > 0 ? atoi(a->argv[0]) : 5) * 1000;
	if (timeout_ms <= 0) {
		fprintf(stderr, "bad timeout\n");
		return -1;
	}
	EX_TRY(ex_peer(a, 0, &peer));
	EX_TRY(rpma_srq_new(peer, NULL, &srq));
	EX_TRY(rpma_conn_cfg_new(&cfg));
	EX_TRY(rpma_conn_cfg_set_srq(cfg, srq));
	EX_TRY(rpma_ep_listen(peer, a->addr, a->port, &ep));
	EX_TRY(bufs_new(peer, MAX_CLIENTS, &b));
	EX_TRY(rpma_ep_get_fd(ep, &ep_fd));
	struct pollfd pfd = {ep_fd, POLLIN, 0};
	while (poll(&pfd, 1, timeout_ms) == 1) {
		if (n == MAX_CLIENTS) {
			fprintf(stderr, "No free slot for a new connection request.\n");
			return -1;
		}
		EX_TRY(rpma_srq_recv(srq, b.recv_mr, (size_t)n * MSG, MSG, &b.recv[n]));
		EX_TRY(ex_accept(ep, cfg, NULL, 0, &conns[n]));
		EX_TRY(rpma_conn_get_qp_num(conns[n], &qps[n]));
		printf("The client #%d has been connected.\n", ++n);
	}
	printf("Server ended listening.\n");
	EX_TRY(rpma_srq_get_rcq(srq, &rcq));
	int ret = 0;
	while (ret == 0 && done < n) {
		struct ibv_wc wc[MAX_CLIENTS];
		int got = 0;
		EX_TRY(rpma_cq_wait(rcq));
		ret = rpma_cq_get_wc(rcq, n, wc, &got);
		if (ret == RPMA_E_NO_COMPLETION) {
			ret = 0;
			continue;
		}
		if (ret)
			return ex_fail("rpma_cq_get_wc", ret);
		for (int i = 0; i < got && ret == 0; i++) {
			if ((ret = ex_check_wc(&wc[i], IBV_WC_RECV, "rpma_srq_recv")))
				break;
			int k = 0;
			while (k < n && qps[k] != wc[i].qp_num)
				k++;
			if (k == n) {
				fprintf(stderr, "Unable to find the connection [qp#%d]\n", wc[i].qp_num);
				ret = -1;
				break;
			}
			uint64_t *msg = (uint64_t *)(uintptr_t)wc[i].wr_id;
			size_t slot = (size_t)(msg - b.recv);
			if (*msg == DONE) {
				done++;
				continue;
			}
			printf("[server] value received: %" PRIu64 " from the connection [qp#%d]\n",
				*msg, qps[k]);
			b.send[slot] = *msg + 1;
			EX_TRY(rpma_srq_recv(srq, b.recv_mr, slot * MSG, MSG, msg));
			printf("[server] value sent: %" PRIu64 " from the connection [qp#%d]\n",
				b.send[slot], qps[k]);
			EX_TRY(rpma_send(conns[k], b.send_mr, slot * MSG, MSG,
				RPMA_F_COMPLETION_ON_ERROR, NULL));
		}
	}
	if (done != n) {
		fprintf(stderr, "Unable to receive data from all connections\n");
		ret = -1;
	}
	for (int k = 0; k < n; k++) {
		(void) rpma_conn_disconnect(conns[k]);
		(void) rpma_conn_delete(&conns[k]);
	}
	(void) rpma_ep_shutdown(&ep);
	(void) rpma_conn_cfg_delete(&cfg);
	(void) rpma_srq_delete(&srq);
	(void) rpma_peer_delete(&peer);
	return ret ? -1 : 0;
}
