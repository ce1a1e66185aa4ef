#!/usr/bin/env bash
# Runs inside the test VM (make bench-valkey): valkey's C client
# (rdma-test, timed: build-c.sh) against the Go client (bench-valkey, the
# same command sequence over valkeyrdma) and, as context, the Go client
# over TCP, all against one valkey-server 8.1.1 (RDMA and TCP on
# 169.254.77.1), values of 64 B, 1 KiB and 16 KiB, ROUNDS rounds, the
# order of the clients rotating by round and size. At 16 KiB "cvec" is
# rdma-test again with glibc's memcpy kept off "rep movsb", which TCG runs
# slowly (docs/performance.md). The server, each client and the kernel's
# unbound workqueues (rxe's work runs on one) share vCPU 1
# (BENCH_SERVER_CPU moves the server): a request that has to wake the
# halted other vCPU took 4-12 ms instead of 0.4-1.3 ms in many runs, of
# C and Go alike. A FLUSHALL before each run gives every run an empty data
# set.
# Any bench-valkey-NAME in BIN-DIR (another build of bench/valkey, say
# from an older commit) joins the rotation as "NAME": a before/after
# comparison in one boot. Prints "round impl size keys set_us get_us" per
# run.
#
#   bench/valkey/run.sh VALKEY-DIR BIN-DIR [ROUNDS]
#
# VALKEY-DIR holds valkey-server and valkey-rdma.so (hack/vm/build-valkey.sh),
# BIN-DIR bench-valkey and rdma-test-SIZE (build-c.sh).
set -euo pipefail
vk=$1
bin=$2
rounds=${3:-5}
addr=169.254.77.1
rport=6380
tport=6379
# size, keys
sizes=("64 400" "1024 400" "16384 150")
cvec_env=GLIBC_TUNABLES=glibc.cpu.x86_rep_movsb_threshold=1073741824
extra=()
for f in "$bin"/bench-valkey-*; do
	[[ -x $f ]] && extra+=("${f##*/bench-valkey-}")
done
"$(dirname "$0")/../clocksource.sh" "valkey/${0##*/}"
dir=$(mktemp -d)
wq=/sys/devices/virtual/workqueue/cpumask
if [[ -w $wq ]]; then
	echo 2 >"$wq"
fi
echo "valkey/run.sh: unbound workqueues on CPUs $(cat "$wq" 2>/dev/null || echo unknown)" >&2
taskset -c "${BENCH_SERVER_CPU:-1}" "$vk/valkey-server" --protected-mode no --dir "$dir" --save "" --appendonly no \
	--bind "$addr" --port "$tport" \
	--loadmodule "$vk/valkey-rdma.so" --rdma-bind "$addr" --rdma-port "$rport" >"$dir/log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$dir"' EXIT
for try in $(seq 1 300); do
	"$bin/bench-valkey" -addr "$addr:$rport" -flush 2>/dev/null && break
	if ((try == 300)); then
		echo "bench-valkey: valkey-server does not answer over RDMA; its log:" >&2
		cat "$dir/log" >&2
		exit 1
	fi
	sleep 0.2
done
run() { # impl size keys round
	local impl=$1 size=$2 keys=$3 r=$4 out
	"$bin/bench-valkey" -addr "$addr:$tport" -tcp -flush
	case $impl in
	c) out=$(taskset -c 1 "$bin/rdma-test-$size" -h "$addr" -p "$rport" -m "$keys" -M $((keys + 1))) ;;
	cvec) out=$(env "$cvec_env" taskset -c 1 "$bin/rdma-test-$size" -h "$addr" -p "$rport" -m "$keys" -M $((keys + 1))) ;;
	go) out=$(taskset -c 1 "$bin/bench-valkey" -addr "$addr:$rport" -size "$size" -keys "$keys") ;;
	tcp) out=$(taskset -c 1 "$bin/bench-valkey" -addr "$addr:$tport" -tcp -size "$size" -keys "$keys") ;;
	*) out=$(taskset -c 1 "$bin/bench-valkey-$impl" -addr "$addr:$rport" -size "$size" -keys "$keys") ;;
	esac
	echo "$out" | awk -v r="$r" -v i="$impl" -v s="$size" '$1 == "BENCH" { print r, i, s, $2, $3, $4; n++ } END { exit n != 1 }' || {
		echo "bench-valkey: $impl at $size B gave no result:" >&2
		echo "$out" >&2
		return 1
	}
}
for ((r = 1; r <= rounds; r++)); do
	for ((j = 0; j < ${#sizes[@]}; j++)); do
		read -r size keys <<<"${sizes[j]}"
		impls=(c go tcp "${extra[@]}")
		((size < 8192)) || impls+=(cvec)
		for ((k = 0; k < ${#impls[@]}; k++)); do
			run "${impls[(r + j + k) % ${#impls[@]}]}" "$size" "$keys" "$r"
		done
	done
done
