/* Included (gcc -include) into the timed build of valkey's
 * tests/rdma/rdma-test.c that bench/valkey/build-c.sh makes: a monotonic
 * clock in microseconds for the lines that build adds around the SET and
 * GET loops. */
#define _GNU_SOURCE /* as rdma-test.c defines it, before any header */
#include <time.h>

static inline long long bench_us(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}
