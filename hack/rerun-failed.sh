#!/usr/bin/env bash
# Runs the failed tests of a go test -v log once more, each alone:
#
#   hack/rerun-failed.sh LOG -- GO-TEST-FLAGS...
#
# make test-siw uses it. siw (soft-iWARP) has connection-setup races that
# fail about one test in a thousand, a different one each run, C against C
# as well as Go (docs/providers.md, "siw: a failed test runs once more").
# A test that fails again fails the stage. Nothing is rerun when a rerun
# cannot settle the failures (hack/testsum -rerun-plan: a package that
# failed outside any test, such as a build failure, a panic or a timeout,
# or more than RERUN_MAX failed tests, default 3), and the exit status
# then stays 1.
#
# Before the reruns it prints a line beginning "rerun-failed: ", so that
# hack/testsum counts a failed test whose rerun passed as flaky, listed
# with its first run's output, not as passed.
#
# Exit status: 0 if every rerun passed, 1 if one failed or none could run,
# 2 on bad usage.
set -uo pipefail

if (($# < 2)) || [[ $2 != -- ]] || [[ ! -r $1 ]]; then
	echo "usage: hack/rerun-failed.sh LOG -- GO-TEST-FLAGS..." >&2
	exit 2
fi
log=$1
shift 2
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
go=${GO:-go}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$repo" && "$go" build -o "$tmp/testsum" ./hack/testsum) || exit 1
plan=$("$tmp/testsum" -rerun-plan -rerun-max "${RERUN_MAX:-3}" "$log") || exit 1

echo "rerun-failed: running each failed test of ${log##*/} once more:"
printf '%s\n' "$plan" | cut -f1,3 | sed 's/^/rerun-failed:   /'
rc=0
while IFS=$'\t' read -r pkg pattern test; do
	echo "rerun-failed: $pkg -run '$pattern'"
	"$go" test "$@" -run "$pattern" "$pkg" 2>&1 | tee "$tmp/out"
	st=${PIPESTATUS[0]}
	# A pattern that selected nothing passes too: the test must have.
	if ((st != 0)) || ! grep -qF -- "--- PASS: $test (" "$tmp/out"; then
		echo "rerun-failed: $pkg $test did not pass (status $st)"
		rc=1
	fi
done <<<"$plan"
if ((rc == 0)); then
	echo "rerun-failed: every rerun passed; each such test is counted flaky"
else
	echo "rerun-failed: a test failed again"
fi
exit "$rc"
