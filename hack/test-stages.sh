#!/usr/bin/env bash
# Runs make test's stages one after another, every one of them even when an
# earlier one failed, and ends with one summary (hack/testsum): each stage's
# result, time and test counts, where its full log is, and every failed test
# with the last lines of its output.
#
# Usage: hack/test-stages.sh STAGE...     (make test passes its list)
#
# The summary also names the rotation slot (TEST_ROTATION, from make) and
# the run's time against CI_BUDGET and CI_LIMIT (seconds; from CI_START,
# epoch seconds, when .ci/run sets it): past the budget it warns.
#
# Each STAGE is a make target. Its whole output goes to
# $LOGDIR/stages/STAGE.log (default .cache/test); the terminal gets the package result lines and the
# test bed's messages as they come. A stage with a bed-STAGE target builds
# its test bed first (hack/vm/run.sh --prepare: packages, kernel, siw.ko,
# arm64 userland, initramfs): if that fails, the stage is reported as
# "BED FAILED" with the bed's error, once, and its tests do not run.
#
# The summary is also written to $LOGDIR/summary.txt, and every failed
# test's whole output to $LOGDIR/failures.txt. Exit status: 0 if every stage
# passed, else 1.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
cd "$repo" || exit 2
logdir=${LOGDIR:-$repo/.cache/test}
mkdir -p "$logdir"
(($# > 0)) || { echo "usage: hack/test-stages.sh STAGE..." >&2; exit 2; }

# The summariser is built first, from the standard library alone, so that a
# tree that does not compile still gets its summary.
go build -o "$logdir/testsum" ./hack/testsum || { echo "test-stages: cannot build hack/testsum" >&2; exit 2; }
rm -rf "$logdir/stages" "$logdir/summary.txt" "$logdir/failures.txt"
mkdir -p "$logdir/stages"
tsv=$logdir/stages.tsv
: >"$tsv"

# What the terminal shows of a stage as it runs.
live='^(ok |FAIL|--- FAIL|panic: |vm: |go-test-exec: |rootfs: |fetch-kernel: |build-siw: |apt: |install-deps: |two-host: |integration log: |rerun-failed: |rerun-stage: |[a-z]\| (--- FAIL|faults|vm|panic|fatal error): )'

has_target() { make -n "$1" >/dev/null 2>&1; }
# Tests run under go test (or the two-host wrapper, faults) print results
# testsum can count; the others only pass or fail.
kind_of() {
	case $1 in
	unit | integration* | test-* | faults | faults-*) echo tests ;;
	*) echo plain ;;
	esac
}

any_failed=0
run_start=$SECONDS
for st in "$@"; do
	log=$logdir/stages/$st.log
	kind=$(kind_of "$st")
	printf '== %s (log: %s)\n' "$st" "${log#"$repo"/}"
	start=$SECONDS
	rc=0
	if has_target "bed-$st"; then
		make --no-print-directory "bed-$st" >"$log" 2>&1 || rc=$?
		if ((rc != 0)); then
			kind=bed
			grep -E "$live" "$log" | tail -n 20
		fi
	fi
	if ((rc == 0)); then
		make --no-print-directory "$st" >>"$log" 2>&1 &
		mpid=$!
		# Follow the log for the terminal while the stage runs.
		tail -n +1 -f --pid="$mpid" "$log" 2>/dev/null | grep --line-buffered -E "$live" &
		tpid=$!
		wait "$mpid" || rc=$?
		wait "$tpid" 2>/dev/null
	fi
	secs=$((SECONDS - start))
	printf '%s\t%d\t%d\t%s\t%s\n' "$st" "$rc" "$secs" "$kind" "$log" >>"$tsv"
	if ((rc != 0)); then
		any_failed=1
		printf '== %s: FAILED (status %d, %d s)\n' "$st" "$rc" "$secs"
	else
		printf '== %s: ok (%d s)\n' "$st" "$secs"
	fi
done

echo
echo "stages: $((SECONDS - run_start)) s; this summary is also in ${logdir#"$repo"/}/summary.txt"
# The whole run's clock: CI_START (epoch seconds, set by .ci/run) counts
# what ran before the first stage too; without it, the stages' own.
elapsed=$((SECONDS - run_start))
if [[ ${CI_START:-} =~ ^[0-9]+$ ]]; then
	elapsed=$(($(date +%s) - CI_START))
fi
# The summary ends with the totals line: the last line of the run.
"$logdir/testsum" -failures "$logdir/failures.txt" -rotation "${TEST_ROTATION:-}" \
	-elapsed "$elapsed" -budget "${CI_BUDGET:-3000}" -limit "${CI_LIMIT:-5400}" "$tsv" | tee "$logdir/summary.txt"
exit "$any_failed"
