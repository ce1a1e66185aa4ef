#!/usr/bin/env bash
# Runs inside the test VM (make bench-rstream): librdmacm's rstream against
# goverbs rstream (each client against a server of its own kind) and, over
# the same link, rstream -T s (kernel TCP), for latency (one transfer per
# iteration) and bandwidth (many transfers, one iteration) at 64 B, 4 KiB,
# 64 KiB and 1 MiB, ROUNDS rounds, the order of the implementations
# rotating by round and test. Each test moves the data both ways (client
# to server and back). Prints "round impl test gbps usec_per_xfer" per
# run.
#
#   bench/rstream/run.sh GOVERBS-BINARY [ROUNDS [GOVERBS-BEFORE]]
#
# GOVERBS-BEFORE, another goverbs binary (say one built from an older
# commit), adds another implementation, "gobefore", to the rotation: a
# before/after comparison in one boot.
#
# "cvec" is librdmacm's rstream again, with glibc's memcpy kept off
# "rep movsb": GLIBC_TUNABLES raises the threshold from which memcpy uses
# it (8 KiB in the bed's guest, glibc.cpu.x86_rep_movsb_threshold 0x2000)
# above any copy rsocket makes, so every copy takes the vector loop that
# smaller ones take anyway. Under TCG "rep movsb" is slow: a 64 KiB memcpy
# took 116-121 us in the 6.1 guest, 16-20 us with the tunable, and Go's
# copy 17-19 us (2026-11-29). rsocket's messages grow from 2 KiB to
# 64 KiB, so in the 64 KiB and 1 MiB tests plain C pays for copies of
# 8 KiB and more what C on hardware with fast "rep movsb" (ERMS) does not.
# goverbs' copies are vector loops at every size.
set -euo pipefail
gobin=$1
rounds=${2:-5}
before=${3:-}
addr=169.254.77.1
port=7900
# test name, -S, -C, -I
tests=(
	"64_lat 64 1 10000" "4k_lat 4096 1 2000" "64k_lat 65536 1 300" "1m_lat 1048576 1 20"
	"64_bw 64 2000 1" "4k_bw 4096 1000 1" "64k_bw 65536 200 1" "1m_bw 1048576 20 1"
)
impls=(c go tcp cvec)
# glibc's x86 tunable; other architectures' glibc ignores it.
cvec_env=GLIBC_TUNABLES=glibc.cpu.x86_rep_movsb_threshold=1073741824
"$(dirname "$0")/../clocksource.sh" "rstream/${0##*/}"
[[ -z $before ]] || impls+=(gobefore)
run() { # impl test size count iters round
	local impl=$1 name=$2 size=$3 count=$4 iters=$5 r=$6 bin extra=()
	case $impl in
	c) bin=(rstream) ;;
	go) bin=("$gobin" rstream) ;;
	gobefore) bin=("$before" rstream) ;;
	tcp) bin=(rstream) extra=(-T s) ;;
	cvec) bin=(env "$cvec_env" rstream) ;;
	esac
	port=$((port + 1))
	taskset -c 0 "${bin[@]}" "${extra[@]}" -p "$port" -S "$size" -C "$count" -I "$iters" >/dev/null 2>&1 &
	local spid=$! out="" try
	for try in $(seq 1 100); do
		if out=$(taskset -c 1 "${bin[@]}" "${extra[@]}" -s "$addr" -p "$port" -S "$size" -C "$count" -I "$iters" 2>&1); then
			break
		fi
		out=""
		sleep 0.1
	done
	wait "$spid" 2>/dev/null || true
	if [[ -z $out ]]; then
		echo "bench-rstream: $impl $name failed" >&2
		return 1
	fi
	# The custom test's row: name bytes xfers iters total time Gb/sec usec/xfer
	echo "$out" | awk -v r="$r" -v i="$impl" -v t="$name" '$1 == "custom" { print r, i, t, $(NF-1), $NF }'
}
for ((r = 1; r <= rounds; r++)); do
	for ((j = 0; j < ${#tests[@]}; j++)); do
		read -r name size count iters <<<"${tests[j]}"
		for ((k = 0; k < ${#impls[@]}; k++)); do
			run "${impls[(r + j + k) % ${#impls[@]}]}" "$name" "$size" "$count" "$iters" "$r"
		done
	done
done
