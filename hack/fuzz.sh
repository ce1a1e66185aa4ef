#!/usr/bin/env bash
# Runs every fuzz target of the module for a while, one after the other.
#
# Usage: hack/fuzz.sh [-save] FUZZTIME
#   FUZZTIME  go test's -fuzztime per target (20s, 5m, 10000x)
#   -save     afterwards copy the corpus the fuzzer grew (kept in the Go build
#             cache) into each package's testdata/fuzz/<target>/, so that it
#             is committed and every plain `go test` replays it
#
# The targets are found with `go test -list`, so a new Fuzz function is never
# left out.
set -euo pipefail
cd "$(dirname "$0")/.."
save=0
if [[ ${1:-} == -save ]]; then
	save=1
	shift
fi
fuzztime=${1:?usage: hack/fuzz.sh [-save] FUZZTIME}
cache=$(go env GOCACHE)/fuzz
mod=$(go list -m)

n=0
for pkg in $(go list ./...); do
	targets=$(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true)
	for t in $targets; do
		echo "== $pkg $t ($fuzztime)"
		go test -run '^$' -fuzz "^$t\$" -fuzztime "$fuzztime" "$pkg"
		n=$((n + 1))
		if ((save)) && [[ -d $cache/$pkg/$t ]]; then
			dir=${pkg#"$mod"}
			dir=.${dir}/testdata/fuzz/$t
			mkdir -p "$dir"
			cp -n "$cache/$pkg/$t"/* "$dir"/ 2>/dev/null || true
			echo "   corpus: $(find "$dir" -type f | wc -l) inputs in $dir"
		fi
	done
done
echo "fuzz: $n targets ran for $fuzztime each"
