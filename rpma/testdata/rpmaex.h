/*
 * rpmaex.h -- C peers for goverbs' ports of librpma's example programs
 * (examples/rpma). One binary runs the examples it is built with:
 *
 *	rpmaex NAME server|client ADDR PORT [ARGS]
 *
 * with the examples' arguments, wire protocols and standard output, so the
 * Go ports can be checked against real librpma. Written for goverbs'
 * tests; error paths just report and return (the process ends anyway).
 * rpmaex_util.c (main) names every example weakly: a binary built from it
 * and one other source (internal/testutil/rpmaex builds one per example's
 * tests) runs that source's examples and refuses the rest.
 */
#ifndef RPMAEX_H
#define RPMAEX_H

#include <stddef.h>
#include <stdint.h>
#include <librpma.h>

#define EX_KB 1024

/* The examples' private data (host byte order, 28 bytes). */
struct ex_cdata {
	uint16_t data_offset;
	uint8_t mr_desc_size;
	uint8_t pcfg_desc_size;
	char descriptors[24];
};

/* Arguments after NAME and the role. */
struct ex_args {
	const char *addr;
	const char *port;
	int argc;	/* arguments after the port */
	char **argv;
};

#define EX_NO_PMEM \
	"The example is unable to use libpmem. If unintended please check the build log. Using DRAM instead.\n"

/* report a failed call and return its code */
int ex_fail(const char *what, int ret);

#define EX_TRY(call) do { \
	int ex_ret_ = (call); \
	if (ex_ret_) \
		return ex_fail(#call, ex_ret_); \
} while (0)

void *ex_alloc(size_t size);
uint64_t ex_ul(const char *s);
int ex_peer(const struct ex_args *a, int remote, struct rpma_peer **peer);

int ex_connect(struct rpma_peer *peer, const struct ex_args *a, struct rpma_conn_cfg *cfg,
		const void *pdata, size_t len, struct rpma_conn **conn);
int ex_accept_req(struct rpma_conn_req **req, const void *pdata, size_t len,
		struct rpma_conn **conn);
int ex_accept(struct rpma_ep *ep, struct rpma_conn_cfg *cfg, const void *pdata, size_t len,
		struct rpma_conn **conn);
int ex_expect(struct rpma_conn *conn, enum rpma_conn_event want);
int ex_close_passive(struct rpma_conn **conn);
int ex_close_active(struct rpma_conn **conn);

int ex_cdata_of(struct rpma_conn *conn, struct ex_cdata *cd);
void ex_cdata_set_mr(struct ex_cdata *cd, struct rpma_mr_local *mr, uint16_t offset);

struct rpma_cq *ex_cq(struct rpma_conn *conn);
struct rpma_cq *ex_rcq(struct rpma_conn *conn);
int ex_wc(struct rpma_cq *cq, struct ibv_wc *wc);
int ex_conn_wc(struct rpma_conn *conn, struct ibv_wc *wc);
int ex_check_wc(const struct ibv_wc *wc, enum ibv_wc_opcode op, const char *what);

typedef int (*ex_main_fn)(const struct ex_args *a);

#define EX_DECL(n) \
	int n##_server(const struct ex_args *a) __attribute__((weak)); \
	int n##_client(const struct ex_args *a) __attribute__((weak));

EX_DECL(ex01) EX_DECL(ex02) EX_DECL(ex03) EX_DECL(ex04) EX_DECL(ex05)
EX_DECL(ex06) EX_DECL(ex06scch) EX_DECL(ex07) EX_DECL(ex08) EX_DECL(ex08srq)
EX_DECL(ex09) EX_DECL(ex09scch) EX_DECL(ex10) EX_DECL(ex11) EX_DECL(ex12)
EX_DECL(ex12scch) EX_DECL(ex13)

#endif
