#!/usr/bin/env bash
# Runs inside the test VM (make bench-cmtime): rdma-core's cmtime and
# goverbs cmtime, each against a server of its own kind on rxe0, for 1, 100
# and 1000 connections, ROUNDS rounds, the order of C and Go alternating by
# round and size, so a per-round ratio compares runs seconds apart. Prints
# one line per step and run: "round impl connections step total_ms".
#
#   bench/cmtime/run.sh GOVERBS-BINARY [ROUNDS [CONNECTIONS...]]
set -euo pipefail
gobin=$1
rounds=${2:-5}
shift $(($# < 2 ? $# : 2))
sizes=("$@")
((${#sizes[@]})) || sizes=(1 100 1000)
addr=169.254.77.1
port=7700
run() { # impl connections round
	local impl=$1 n=$2 r=$3 srv cli
	case $impl in
	c) srv=(cmtime) cli=(cmtime) ;;
	go) srv=("$gobin" cmtime) cli=("$gobin" cmtime) ;;
	esac
	port=$((port + 1))
	# Server on vCPU 0, client on vCPU 1.
	taskset -c 0 "${srv[@]}" -p "$port" >/dev/null 2>&1 &
	local spid=$!
	local ok=0
	for _ in $(seq 1 200); do
		if rdma resource show cm_id 2>/dev/null | grep -qE "LISTEN.*:$port( |$)"; then
			ok=1
			break
		fi
		sleep 0.05
	done
	if ((!ok)); then
		echo "bench-cmtime: $impl server on port $port not listening" >&2
		kill "$spid" 2>/dev/null || true
		return 1
	fi
	local out
	if ! out=$(taskset -c 1 "${cli[@]}" -s "$addr" -p "$port" -c "$n"); then
		echo "bench-cmtime: $impl client failed:" >&2
		echo "$out" >&2
		kill "$spid" 2>/dev/null || true
		return 1
	fi
	kill "$spid" 2>/dev/null || true
	wait "$spid" 2>/dev/null || true
	# "create id    :       12.34 ..." -> round impl n step total
	echo "$out" | awk -v r="$r" -v i="$impl" -v n="$n" -F: '
		/^[a-z ]+ *: / { step = $1; sub(/ +$/, "", step); gsub(/ /, "_", step); split($2, f, " "); print r, i, n, step, f[1] }'
}
for ((r = 1; r <= rounds; r++)); do
	for ((j = 0; j < ${#sizes[@]}; j++)); do
		if (((r + j) % 2)); then order=(c go); else order=(go c); fi
		for impl in "${order[@]}"; do
			run "$impl" "${sizes[j]}" "$r"
		done
	done
done
