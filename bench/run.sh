#!/usr/bin/env bash
# Runs inside the test VM (make bench): the C, Go and cgo benchmarks
# interleaved, ROUNDS times, rotating which goes first. Prints one line per
# result: "round impl name value unit". bench/report turns it into the table.
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
for ((r = 1; r <= rounds; r++)); do
	for ((k = 0; k < n; k++)); do
		impl=${impls[(r + k) % n]}
		"$bin/bench-$impl" "$@" | while IFS=$'\t' read -r name value unit; do
			echo "$r $impl $name $value $unit"
		done
	done
done
