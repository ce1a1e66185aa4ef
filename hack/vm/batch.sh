#!/usr/bin/env bash
# Runs several packages' test binaries in ONE boot of the test bed, where
# `go test -exec` boots once per package: on the nested pvrdma bed a boot
# costs 5 to 9 minutes, the tests of a package often less.
#
# Usage: hack/vm/batch.sh [-timeout DURATION] [-race] [-short] ENTRY...
#
# Each ENTRY is PKG[@RUN[@SKIP]]: a package directory (./verbs), and
# optionally the -run and -skip patterns of its binary ('@', since the
# patterns themselves use '|'; an empty RUN runs every test). The binaries are
# built on the host (go test -c, into .cache/test/batch), then one guest
# (hack/vm/run.sh with the caller's GOVERBS_PROVIDER, GOVERBS_KERNEL, ...)
# runs each one in its package's directory, in order, with -test.v,
# -test.count=1 and -test.timeout=DURATION (default 30m, per binary), as go
# test would; -short adds -test.short to each. The output is go test -v's:
# each binary's own, then go test's result line ("ok  <import path>
# <secs>s" or "FAIL <import path> <secs>s"), so that hack/testsum and
# hack/vm/check-integration-log.sh read it as they read go test's. Exit
# status: 0 if every binary passed, 1 if one failed, run.sh's status (124,
# 125) if the bed did.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
go=${GO:-go}
timeout=30m
race=()
short=()
while (($# > 0)); do
	case $1 in
	-timeout) timeout=$2; shift 2 ;;
	-race) race=(-race); shift ;;
	-short) short=(-test.short); shift ;;
	--) shift; break ;;
	-*) echo "batch: unknown option $1" >&2; exit 2 ;;
	*) break ;;
	esac
done
(($# > 0)) || { echo "usage: hack/vm/batch.sh [-timeout DURATION] [-race] [-short] PKG[@RUN[@SKIP]]..." >&2; exit 2; }

dir=$repo/.cache/test/batch
rm -rf "$dir"
mkdir -p "$dir"
guest=$dir/guest.sh
{
	echo '#!/usr/bin/env bash'
	echo 'rc=0'
} >"$guest"
i=0
for entry in "$@"; do
	IFS='@' read -r pkg run skip <<<"$entry"
	[[ -d $repo/$pkg ]] || { echo "batch: no package directory $pkg" >&2; exit 2; }
	pkgdir=$(cd "$repo/$pkg" && pwd)
	import=$(cd "$pkgdir" && "$go" list .)
	i=$((i + 1))
	bin=$dir/$i.test
	(cd "$pkgdir" && "$go" test -c "${race[@]}" -o "$bin" .) || exit 1
	[[ -x $bin ]] || { echo "batch: $pkg has no tests" >&2; exit 2; }
	args=(-test.v -test.count=1 "-test.timeout=$timeout" "${short[@]}")
	[[ -z $run ]] || args+=("-test.run=$run")
	[[ -z $skip ]] || args+=("-test.skip=$skip")
	# One binary's run, timed as go test times it; its status decides the
	# result line, as go test's does.
	printf 'cd %q && start=$(date +%%s%%N)\n' "$pkgdir" >>"$guest"
	printf '%q' "$bin" >>"$guest"
	printf ' %q' "${args[@]}" >>"$guest"
	printf ' 2>&1; st=$?\n' >>"$guest"
	printf 'secs=$(( ($(date +%%s%%N) - start) / 1000000 ))\n' >>"$guest"
	printf 'if ((st == 0)); then printf "ok  \\t%%s\\t%%d.%%03ds\\n" %q $((secs / 1000)) $((secs %% 1000)); else printf "FAIL\\t%%s\\t%%d.%%03ds\\n" %q $((secs / 1000)) $((secs %% 1000)); rc=1; fi\n' "$import" "$import" >>"$guest"
done
echo 'exit $rc' >>"$guest"
chmod +x "$guest"
exec "$here/run.sh" --rw "$dir" -- "$guest"
