#!/usr/bin/env bash
# Runs inside the test VM (make bench): the C, Go and cgo benchmarks
# interleaved row by row, ROUNDS times. In each round every row runs once
# in each implementation back to back, a fresh process each, the order
# rotated by round and row, so the results a per-round ratio compares were
# taken seconds apart. Prints one line per result: "round impl name value
# unit". bench/report turns it into the table.
#
#   bench/run.sh BINDIR [ROUNDS [OP-PREFIX...]]
#
# OP-PREFIXes (say post_recv poll) run only the rows whose names start
# with one of them.
set -euo pipefail
bin=$1
rounds=${2:-5}
shift $(($# < 2 ? $# : 2))
# c, go, cgo, and any other bench-* binary in BINDIR (say a bench-gobefore
# built against an older goverbs, for a before/after column).
impls=()
for f in "$bin"/bench-*; do
	[[ -x $f ]] && impls+=("${f##*/bench-}")
done
n=${#impls[@]}
"$(dirname "$0")/clocksource.sh" "${0##*/}"
# The device and address the bed tests on (rxe0 and 169.254.77.1 on the rxe
# bed, vmw_pvrdma0 and 169.254.77.10 in the nested pvrdma bed).
export GOVERBS_BENCH_DEV=${GOVERBS_BENCH_DEV:-${GOVERBS_TEST_DEVICE:-rxe0}}
export GOVERBS_BENCH_ADDR=${GOVERBS_BENCH_ADDR:-${GOVERBS_TEST_ADDR:-169.254.77.1}}
# The rows, in the programs' order; the scaling rows go up to the vCPUs.
# msgtimed and msgtimed_send (the WRITE and SEND message-rate loops with
# each post timed, four rows of output each) run only when named, which this
# script always does; they are listed after the message rates they explain,
# so the table shows them there.
all=(post_recv post_recv_list32 post_recv_rts post_recv_rts_list32 poll_cq_empty_1 poll_cq_empty_16 post_send_write_64
	post_send_write_64_list32 post_send_send_64 post_send_send_64_list32 round_write_64
	round_send_64 pingpong_send_64_1t pingpong_send_64_2t msgrate_write_64_w64
	msgrate_send_64_w64 msgtimed msgtimed_send)
for ((t = 1; t <= $(nproc); t++)); do
	all+=("scale_write_64_w64_x$t")
done
rows=()
for row in "${all[@]}"; do
	want=$(($# == 0))
	for p in "$@"; do
		[[ $row == "$p"* ]] && want=1
	done
	((want)) && rows+=("$row")
done
for ((r = 1; r <= rounds; r++)); do
	for ((j = 0; j < ${#rows[@]}; j++)); do
		for ((k = 0; k < n; k++)); do
			impl=${impls[(r + j + k) % n]}
			"$bin/bench-$impl" "${rows[j]}\$" | while IFS=$'\t' read -r name value unit; do
				echo "$r $impl $name $value $unit"
			done
		done
	done
done
