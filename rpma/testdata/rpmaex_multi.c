/*
 * rpmaex_multi.c -- 06(scch)-multiple-connections: a server reading the
 * names of up to 10 clients at a time, driven by poll(2) over the
 * endpoint's fd and each connection's event and completion fds; it ends
 * after 15 s without an event.
 */
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpmaex.h"

#define NAME_SIZE 32
#define SLOTS 10
#define IDLE_MS 15000

static const char *const names[] = {"Andy", "Chet", "Derek", "Janek", "Kacper", "Lukasz",
	"Oksana", "Pawel", "Piotr", "Tomasz", "Xiang", "Xiaoran", "Xiaoyan"};

static int
nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

struct slot {
	struct rpma_conn *conn;
	int ev_fd, cq_fd;
};

static int
multi_server(const struct ex_args *a, int scch)
{
	struct rpma_peer *peer;
	struct rpma_ep *ep;
	struct rpma_mr_local *mr;
	struct rpma_conn_cfg *cfg;
	struct slot slots[SLOTS];
	int ep_fd;

	memset(slots, 0, sizeof(slots));
	char *names_buf = ex_alloc(NAME_SIZE * SLOTS);
	EX_TRY(ex_peer(a, 0, &peer));
	EX_TRY(rpma_mr_reg(peer, names_buf, NAME_SIZE * SLOTS, RPMA_MR_USAGE_READ_DST, &mr));
	EX_TRY(rpma_conn_cfg_new(&cfg));
	EX_TRY(rpma_conn_cfg_set_compl_channel(cfg, scch));
	EX_TRY(rpma_ep_listen(peer, a->addr, a->port, &ep));
	EX_TRY(rpma_ep_get_fd(ep, &ep_fd));
	if (nonblock(ep_fd))
		return -1;
	printf("Today I have got in touch with:\n");

	for (;;) {
		struct pollfd fds[1 + 2 * SLOTS];
		int n = 0;
		fds[n++] = (struct pollfd){ep_fd, POLLIN, 0};
		for (int i = 0; i < SLOTS; i++) {
			if (slots[i].conn == NULL)
				continue;
			fds[n++] = (struct pollfd){slots[i].ev_fd, POLLIN, 0};
			fds[n++] = (struct pollfd){slots[i].cq_fd, POLLIN, 0};
		}
		int ready = poll(fds, n, IDLE_MS);
		if (ready < 0) {
			perror("poll");
			return -1;
		}
		if (ready == 0)
			break;
		if (fds[0].revents) {
			/* a client */
			struct rpma_conn_req *req = NULL;
			if (rpma_ep_next_conn_req(ep, cfg, &req) == 0) {
				int i = 0;
				while (i < SLOTS && slots[i].conn)
					i++;
				if (i == SLOTS) {
					(void) rpma_conn_req_delete(&req);
				} else if (rpma_conn_req_connect(&req, NULL, &slots[i].conn) == 0) {
					struct rpma_conn *c = slots[i].conn;
					(void) rpma_conn_get_event_fd(c, &slots[i].ev_fd);
					if (scch)
						(void) rpma_conn_get_compl_fd(c, &slots[i].cq_fd);
					else
						(void) rpma_cq_get_fd(ex_cq(c), &slots[i].cq_fd);
					(void) nonblock(slots[i].ev_fd);
					(void) nonblock(slots[i].cq_fd);
				}
			}
		}
		for (int k = 1; k < n; k++) {
			if (!fds[k].revents)
				continue;
			int i = 0;
			while (i < SLOTS && !(slots[i].conn &&
					(slots[i].ev_fd == fds[k].fd || slots[i].cq_fd == fds[k].fd)))
				i++;
			if (i == SLOTS)
				continue;
			struct rpma_conn *c = slots[i].conn;
			if (fds[k].fd == slots[i].cq_fd) {
				/* the read of the name */
				struct rpma_cq *cq = ex_cq(c);
				struct ibv_wc wc;
				int ret = scch ? rpma_conn_wait(c, 0, &cq, NULL) : rpma_cq_wait(cq);
				if (ret == RPMA_E_NO_COMPLETION)
					continue;
				if (ret == 0)
					ret = rpma_cq_get_wc(cq, 1, &wc, NULL);
				if (ret == RPMA_E_NO_COMPLETION)
					continue;
				if (ret == 0 && ex_check_wc(&wc, IBV_WC_RDMA_READ, "rpma_read") == 0)
					printf("- %s\n", names_buf + NAME_SIZE * i);
				(void) rpma_conn_disconnect(c);
				continue;
			}
			enum rpma_conn_event ev;
			int ret = rpma_conn_next_event(c, &ev);
			if (ret) {
				(void) rpma_conn_disconnect(c);
				continue;
			}
			if (ev == RPMA_CONN_ESTABLISHED) {
				struct ex_cdata cd;
				struct rpma_mr_remote *src;
				if (ex_cdata_of(c, &cd) ||
				    rpma_mr_remote_from_descriptor(cd.descriptors, cd.mr_desc_size,
						&src)) {
					(void) rpma_conn_disconnect(c);
					continue;
				}
				if (rpma_read(c, mr, (size_t)NAME_SIZE * i, src, 0, NAME_SIZE,
						RPMA_F_COMPLETION_ALWAYS, NULL))
					(void) rpma_conn_disconnect(c);
				(void) rpma_mr_remote_delete(&src);
			} else {
				(void) rpma_conn_delete(&slots[i].conn);
				/* the fds of this round are stale now */
				break;
			}
		}
	}
	for (int i = 0; i < SLOTS; i++) {
		if (slots[i].conn) {
			(void) rpma_conn_disconnect(slots[i].conn);
			(void) rpma_conn_delete(&slots[i].conn);
		}
	}
	fprintf(stderr, "Server timed out.\n");
	(void) rpma_ep_shutdown(&ep);
	(void) rpma_conn_cfg_delete(&cfg);
	(void) rpma_mr_dereg(&mr);
	return rpma_peer_delete(&peer);
}

static int
multi_client(const struct ex_args *a)
{
	struct rpma_peer *peer;
	struct rpma_conn *conn;
	struct rpma_mr_local *mr;
	struct ex_cdata cd;

	unsigned long seed = ex_ul(a->argv[0]);
	EX_TRY(ex_peer(a, 1, &peer));
	char *name = ex_alloc(NAME_SIZE);
	srand((unsigned)(seed % UINT_MAX));
	strncpy(name, names[(unsigned long)rand() % (sizeof(names) / sizeof(names[0]))],
		NAME_SIZE - 1);
	printf("My names is: %s\n", name);
	EX_TRY(rpma_mr_reg(peer, name, NAME_SIZE, RPMA_MR_USAGE_READ_SRC, &mr));
	ex_cdata_set_mr(&cd, mr, 0);
	EX_TRY(ex_connect(peer, a, NULL, &cd, sizeof(cd), &conn));
	/* the server reads the name, then disconnects */
	int ret = ex_close_passive(&conn);
	(void) rpma_mr_dereg(&mr);
	(void) rpma_peer_delete(&peer);
	return ret;
}

int
ex06_server(const struct ex_args *a)
{
	return multi_server(a, 0);
}

int
ex06_client(const struct ex_args *a)
{
	return multi_client(a);
}

int
ex06scch_server(const struct ex_args *a)
{
	return multi_server(a, 1);
}

int
ex06scch_client(const struct ex_args *a)
{
	return multi_client(a);
}
