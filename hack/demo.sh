#!/usr/bin/env bash
# The main job, run inside the test VM by `make demo`: goverbs' own view of
# the rxe devices next to nothing else but the kernel.
set -euo pipefail
goverbs=${1:?usage: demo.sh PATH-TO-GOVERBS}

echo "== goverbs rxe list"
"$goverbs" rxe list
echo
echo "== goverbs devinfo -v"
"$goverbs" devinfo -v

# Ping-pong over rxe, our tool against itself and against rdma-core's, the
# two ends pinned to different vCPUs (busy-polling ends sharing one CPU turn
# microseconds into milliseconds). Both ends use the same device: two rxe
# devices in one network namespace cannot reach each other.
dev=${GOVERBS_TEST_DEVICE:-rxe0}
addr=${GOVERBS_TEST_ADDR:-169.254.77.1}
# The GID index of the test address (the RoCEv2 ::ffff:a.b.c.d entry).
gid=$("$goverbs" devinfo -v -d "$dev" |
	awk -v want="::ffff:$addr," '$1 ~ /^GID\[/ && $0 ~ want { gsub(/[^0-9]/, "", $2); print $2; exit }')
[[ -n $gid ]] || { echo "demo: no GID for $addr on $dev" >&2; exit 1; }
pin() { # pin CPU CMD...: run CMD on CPU when taskset is there
	local cpu=$1
	shift
	if command -v taskset >/dev/null; then taskset -c "$cpu" "$@"; else "$@"; fi
}
wait_listen() { # wait_listen PORT: until a TCP socket listens on PORT
	local hex i
	hex=$(printf ':%04X' "$1")
	for ((i = 0; i < 600; i++)); do
		awk -v p="$hex" '$4 == "0A" && substr($2, length($2) - 4) == p { f = 1 } END { exit !f }' \
			/proc/net/tcp /proc/net/tcp6 2>/dev/null && return 0
		sleep 0.05
	done
	return 1
}
pp_tmp=$(mktemp -d)
trap 'rm -rf "$pp_tmp"' EXIT
pp_port=18515
pingpong() { # pingpong TITLE SERVER-CMD CLIENT-CMD: one rc ping-pong, both outputs
	local title=$1 server=$2 client=$3 spid src=0 crc=0
	pp_port=$((pp_port + 1))
	local args=(-d "$dev" -g "$gid" -p "$pp_port" -n 1000 -s 4096)
	echo
	echo "== $title (-n 1000 -s 4096, server on CPU 0, client on CPU 1)"
	# shellcheck disable=SC2086 # the commands are words on purpose
	pin 0 timeout 120 $server "${args[@]}" >"$pp_tmp/server" 2>&1 &
	spid=$!
	wait_listen "$pp_port" || echo "demo: the server does not listen on $pp_port" >&2
	# shellcheck disable=SC2086
	pin 1 timeout 120 $client "${args[@]}" "$addr" >"$pp_tmp/client" 2>&1 || crc=$?
	wait "$spid" || src=$?
	echo "-- server: $server (exit $src)"
	cat "$pp_tmp/server"
	echo "-- client: $client (exit $crc)"
	cat "$pp_tmp/client"
	((src == 0 && crc == 0))
}
pingpong "goverbs pingpong -t rc: Go server <-> Go client" "$goverbs pingpong -t rc" "$goverbs pingpong -t rc"
pingpong "goverbs pingpong -t rc server <-> ibv_rc_pingpong client (rdma-core)" "$goverbs pingpong -t rc" ibv_rc_pingpong

# librpma's 08-messages-ping-pong, both sides goverbs (rpma package).
rpma_port=19000
echo
# The example is a program of its own (examples/rpma), built beside goverbs.
rpma_ex=$(dirname "$goverbs")/08-messages-ping-pong
echo "== examples/rpma/08-messages-ping-pong: Go server <-> Go client (seed 7, 4 rounds)"
timeout 120 "$rpma_ex" server "$addr" "$rpma_port" >"$pp_tmp/rpma-server" 2>&1 &
rpma_spid=$!
wait_listen_rdma() { # the rdma_cm listener shows up as a cm_id in LISTEN state
	for _ in $(seq 200); do
		rdma res show cm_id 2>/dev/null | grep -q "LISTEN.*$rpma_port" && return 0
		sleep 0.05
	done
	return 1
}
wait_listen_rdma || echo "demo: the rpma server does not listen on $rpma_port" >&2
rpma_crc=0
timeout 120 "$rpma_ex" client "$addr" "$rpma_port" 7 4 >"$pp_tmp/rpma-client" 2>&1 || rpma_crc=$?
rpma_src=0
wait "$rpma_spid" || rpma_src=$?
echo "-- server (exit $rpma_src)"
cat "$pp_tmp/rpma-server"
echo "-- client (exit $rpma_crc)"
cat "$pp_tmp/rpma-client"
((rpma_src == 0 && rpma_crc == 0))
