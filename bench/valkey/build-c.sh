#!/usr/bin/env bash
# Builds the C side of `make bench-valkey`: valkey's own RDMA client,
# tests/rdma/rdma-test.c from the valkey tarball hack/vm/build-valkey.sh
# fetched, once per value size, with four edits made by sed at build time
# (nothing of valkey's is committed):
#
#   - the value size, fixed at 1024 upstream, is VALUE (the size, and the
#     "$1024" header its GET check expects);
#   - BGSAVE, run once between the SETs and the GETs upstream, is skipped
#     (a forked child writing the data set would share the vCPUs with the
#     timed GETs);
#   - the SET loop and the GET loop are timed (bench/valkey/clock.h), and
#     the thread prints "BENCH keys set_us get_us" after its GETs.
#
# The workload is otherwise upstream's: one connection, a PING, then keys
# SETs of random upper-case values, each written and its "+OK" read before
# the next, then as many GETs, each reply read whole and compared.
#
#   bench/valkey/build-c.sh VALKEY-TARBALL OUTDIR SIZE...
#
# Writes OUTDIR/rdma-test-SIZE for each SIZE.
set -euo pipefail
tarball=$1
out=$2
shift 2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -C "$tmp" -xJf "$tarball" --wildcards '*/tests/rdma/rdma-test.c'
src=$(find "$tmp" -name rdma-test.c)
edit() { # sed expression, the text it must change
	grep -qF -- "$2" "$src" || {
		echo "build-c.sh: $src has no \"$2\": the edits need updating for this valkey" >&2
		exit 1
	}
	sed -i -e "$1" "$src"
}
edit 's/^static int keysize = 1024 + 1;/static int keysize = BENCH_VALUE + 1;/' 'static int keysize = 1024 + 1;'
edit 's/char \*getrespprex = "\$1024\\r\\n";/char *getrespprex = BENCH_PREFIX;/' 'char *getrespprex = "$1024\r\n";'
edit 's/^\( *\)static int bgsaved;/\1static int bgsaved = 1;/' 'static int bgsaved;'
edit 's|^\( *\)/\* # round 2, test SET \*/|\1long long bench_t0 = bench_us();|' '/* # round 2, test SET */'
edit 's|^\( *\)printf("Valkey Over RDMA test thread\[%d\] SET|\1long long bench_t1 = bench_us();\n&|' 'printf("Valkey Over RDMA test thread[%d] SET'
edit 's|^\( *\)/\* # round 4, test GET.*|\1long long bench_t2 = bench_us();|' '/* # round 4, test GET'
edit 's|^\( *\)printf("Valkey Over RDMA test thread\[%d\] GET|\1printf("BENCH %d %lld %lld\\n", keys, bench_t1 - bench_t0, bench_us() - bench_t2);\n&|' 'printf("Valkey Over RDMA test thread[%d] GET'
mkdir -p "$out"
for size in "$@"; do
	gcc -O2 -include "$here/clock.h" -DBENCH_VALUE="$size" -DBENCH_PREFIX="\"\$$size\\r\\n\"" \
		-o "$out/rdma-test-$size" "$src" -lrdmacm -libverbs -lpthread
done
