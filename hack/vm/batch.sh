#!/usr/bin/env bash
# Runs several packages' test binaries in few boots of the test bed, where
# `go test -exec` boots once per package: on the nested pvrdma bed a boot
# costs 5 to 9 minutes, the tests of a package often less; on the rxe, siw
# and arm64 beds a boot costs 8 to 15 s, against 10 to 60 s for the tests of
# most packages.
#
# Usage: hack/vm/batch.sh [-timeout DURATION] [-race] [-short] [-j N] [-name NAME] ENTRY...
#
# Each ENTRY is PKG[@RUN[@SKIP]]: a package (a directory such as ./verbs, or
# an import path), and optionally the -run and -skip patterns of its binary
# ('@', since the patterns themselves use '|'; an empty RUN runs every
# test). A package may come in several entries (a long one split by its
# tests); it is built once. The binaries are built on the host (go test -c,
# into .cache/test/NAME.bin, default batch) and run in their package's
# directory with -test.v, -test.count=1 and -test.timeout=DURATION (default
# 30m, per binary), as go test would; -short adds -test.short to each.
#
# N guests (-j N, default 1; hack/vm/run.sh with the caller's
# GOVERBS_PROVIDER, GOVERBS_KERNEL, ...) run at once, and each takes the
# next entry from a queue in the shared directory until none is left, while
# the host is still building the later ones: list the long entries first.
# One guest runs the entries in order. The output is go test -v's: each
# binary's own, then go test's result line ("ok <import path> <secs>s" or
# "FAIL <import path> <secs>s"), so that hack/testsum,
# hack/rerun-failed.sh and hack/vm/check-integration-log.sh read it as they
# read go test's; an entry's output is printed whole once it has finished,
# in the order they finish. An entry whose guest failed under it (a kernel
# panic, run.sh's timeout) gets a FAIL line after what it printed, and the
# entries no guest took one each. Between two binaries a guest kills
# whatever the first left running in its session.
#
# A guest whose kernel panicked (run.sh's GOVERBS_VM_PANIC_MARK; 6.12's rxe
# corrupts its slab now and then, docs/kernels.md) leaves the entry it was
# running and those no guest took. When nothing else failed, they run again
# in new guests, at most twice: the panicked entry's output and FAIL line
# are printed, then a line beginning "rerun-panicked: ", then the entries'
# second run, so that hack/testsum counts the first as flaky when the
# second passed (and the stage as passed).
#
# Exit status: 0 if every binary passed, 1 if one failed or a guest did, 2
# on bad usage.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
go=${GO:-go}
timeout=30m
race=()
short=()
jobs=1
name=batch
usage="usage: hack/vm/batch.sh [-timeout DURATION] [-race] [-short] [-j N] [-name NAME] PKG[@RUN[@SKIP]]..."
while (($# > 0)); do
	case $1 in
	-timeout) timeout=$2; shift 2 ;;
	-race) race=(-race); shift ;;
	-short) short=(-test.short); shift ;;
	-j) jobs=$2; shift 2 ;;
	-name) name=$2; shift 2 ;;
	--) shift; break ;;
	-*) echo "batch: unknown option $1" >&2; exit 2 ;;
	*) break ;;
	esac
done
(($# > 0)) || { echo "$usage" >&2; exit 2; }
[[ $jobs =~ ^[1-9][0-9]*$ ]] || { echo "batch: -j wants a number of guests (1 or more), got '$jobs'" >&2; exit 2; }
[[ $name =~ ^[A-Za-z0-9._-]+$ ]] || { echo "batch: -name wants a plain file name, got '$name'" >&2; exit 2; }

dir=$repo/.cache/test/$name
# The binaries live beside the shared directory, not in it: the guest
# reads them through the read-only host root, which it caches
# (cache=loose, hack/vm/init), where the read-write share is uncached and
# every exec reads the whole binary again. Measured in a 6.12 guest on
# 2026-12-02: a test binary that starts in 0.24 s from the host root took
# 1.46 s from the share, each time, and the interop tests start their Go
# peers by running their test binary again, hundreds of times a stage.
bindir=$repo/.cache/test/$name.bin
rm -rf "$dir" "$bindir"
mkdir -p "$dir" "$bindir"

# Every entry's package, resolved before anything is built or booted, so
# that a misspelt one fails at once; one go list resolves them all (a few
# tenths of a second a call). A package without test files gets go test's
# line for it and no entry.
declare -a pkgdirs imports runs skips args
declare -A info=() binof=()
for entry in "$@"; do
	IFS='@' read -r pkg _ <<<"$entry"
	if [[ $pkg == ./* || $pkg == /* ]]; then
		[[ -d $repo/$pkg || -d $pkg ]] || { echo "batch: no package directory $pkg" >&2; exit 2; }
		[[ $pkg == /* ]] || pkg=$(cd "$repo/$pkg" && pwd)
	fi
	args+=("$pkg")
done
while IFS=$'\t' read -r pdir import ntest; do
	info[$pdir]="$pdir	$import	$ntest"
	info[$import]="$pdir	$import	$ntest"
done < <(cd "$repo" && "$go" list -f '{{.Dir}}	{{.ImportPath}}	{{len .TestGoFiles}}{{len .XTestGoFiles}}' "${args[@]}")
i=0
for entry in "$@"; do
	IFS='@' read -r _ run skip <<<"$entry"
	pkg=${args[i]}
	i=$((i + 1))
	[[ -n ${info[$pkg]:-} ]] || { echo "batch: go list did not list $pkg" >&2; exit 2; }
	IFS=$'\t' read -r pdir import ntest <<<"${info[$pkg]}"
	if [[ $ntest == 00 ]]; then
		printf '?   \t%s\t[no test files]\n' "$import"
		continue
	fi
	pkgdirs+=("$pdir")
	imports+=("$import")
	runs+=("$run")
	skips+=("$skip")
done
((${#imports[@]} > 0)) || { echo "batch: no entry has tests" >&2; exit 2; }

# build I: the test binary of entry I's package (once per package).
build() {
	local i=$1 bin
	bin=${binof[${imports[i]}]:-}
	if [[ -z $bin ]]; then
		bin=$bindir/$((${#binof[@]} + 1)).test
		(cd "${pkgdirs[i]}" && "$go" test -c "${race[@]}" -o "$bin" .) || return 1
		[[ -x $bin ]] || { echo "batch: ${imports[i]} has no tests" >&2; return 2; }
		binof[${imports[i]}]=$bin
	fi
	local args=(-test.v -test.count=1 "-test.timeout=$timeout" "${short[@]}")
	[[ -z ${runs[i]} ]] || args+=("-test.run=${runs[i]}")
	[[ -z ${skips[i]} ]] || args+=("-test.skip=${skips[i]}")
	cmd=("$bin" "${args[@]}")
}

# The queue. queue/NNNN is an entry not yet taken (a file of bash
# assignments); a guest takes one by renaming it into run/ (a rename on the
# shared directory is the host's rename(2): of two guests, one wins) and
# writes its output to out/NNNN.part, renamed to out/NNNN when the entry is
# done. "sealed" says that no entry will be added.
mkdir -p "$dir/queue" "$dir/run" "$dir/out" "$dir/new"
cat >"$dir/guest.sh" <<'EOF'
#!/usr/bin/env bash
# A batch.sh guest: takes entries from the queue in DIR until none is left.
dir=$1
# killsession SID: kills every process of session SID (pkill -s, which the
# arm64 userland lacks).
killsession() {
	local sid=$1 f stat
	for f in /proc/[0-9]*/stat; do
		read -r stat <"$f" 2>/dev/null || continue
		# After the command's name (in parentheses): state ppid pgrp session.
		set -- ${stat##*) }
		[[ ${4:-} == "$sid" ]] && kill -9 "${f//[^0-9]/}" 2>/dev/null
	done
}
while :; do
	job=
	for f in "$dir"/queue/*; do
		[[ -e $f ]] || break
		if mv "$f" "$dir/run/" 2>/dev/null; then
			job=${f##*/}
			break
		fi
	done
	if [[ -z $job ]]; then
		if [[ -e $dir/sealed ]] && ! compgen -G "$dir/queue/*" >/dev/null; then
			exit 0
		fi
		sleep 0.5
		continue
	fi
	pkgdir= import= cmd=()
	source "$dir/run/$job"
	out=$dir/out/$job
	start=$(date +%s%N)
	# The binary leads a session of its own (the shell's pid, kept by exec),
	# so that what it leaves running can be found and killed afterwards.
	setsid -w bash -c 'echo $$ >"$0"; cd "$1" || exit 125; shift; exec "$@"' \
		"$dir/run/$job.sid" "$pkgdir" "${cmd[@]}" >"$out.part" 2>&1 </dev/null
	st=$?
	secs=$((($(date +%s%N) - start) / 1000000))
	sid=$(cat "$dir/run/$job.sid" 2>/dev/null) && killsession "$sid"
	result=ok
	((st == 0)) || result=FAIL
	printf '%-4s\t%s\t%d.%03ds\n' "$result" "$import" $((secs / 1000)) $((secs % 1000)) >>"$out.part"
	mv "$out.part" "$out"
done
EOF
chmod +x "$dir/guest.sh"

# start_guests N: boots N guests for round $round (the first is 0, each
# rerun after a kernel panic one more); guest G's log is guest.ROUND.G.log,
# and panicked.ROUND.G exists once its kernel has panicked.
max_panic_reruns=2
round=0
start_guests() {
	local g
	pids=()
	for g in $(seq 1 "$1"); do
		GOVERBS_VM_PANIC_MARK=$dir/panicked.$round.$g \
			"$here/run.sh" --rw "$dir" -- "$dir/guest.sh" "$dir" >"$dir/guest.$round.$g.log" 2>&1 &
		pids+=($!)
	done
}
start_guests "$jobs"

# Entries go into the queue as their binaries are built, in order.
rc=0
for i in "${!imports[@]}"; do
	n=$(printf '%04d' "$i")
	if ! build "$i"; then
		rc=1
		break
	fi
	{
		printf 'pkgdir=%q import=%q\n' "${pkgdirs[i]}" "${imports[i]}"
		printf 'cmd=('
		printf ' %q' "${cmd[@]}"
		printf ' )\n'
	} >"$dir/new/$n"
	mv "$dir/new/$n" "$dir/queue/$n"
done
if ((rc != 0)); then
	# A build failed (its errors are above): the guests take nothing more and
	# stop after their current entry; the entries left get FAIL lines below.
	rm -f "$dir"/queue/*
fi
touch "$dir/sealed"

# Print each entry's output once it is done, until every guest has exited.
declare -A printed=()
flush() {
	local f
	for f in "$dir"/out/*; do
		[[ -e $f && $f != *.part && -z ${printed[${f##*/}]:-} ]] || continue
		cat "$f"
		printed[${f##*/}]=1
		tail -n1 "$f" | grep -q '^ok  ' || rc=1
	done
}
# guest_log G: prints guest G's log of this round, each line marked.
guest_log() {
	sed 's/^/batch: guest '"$1"': /' "$dir/guest.$round.$1.log"
}
# panicked_logs: prints the log of each guest of this round whose kernel
# panicked.
panicked_logs() {
	local g
	for g in "${panicked[@]}"; do
		echo "batch: the kernel of guest $g panicked; its log:"
		guest_log "$g"
	done
}
# fail_entry I WHY: prints what entry I printed before its guest failed (if
# it started), WHY, and a FAIL line for its package.
fail_entry() {
	local n
	n=$(printf '%04d' "$1")
	[[ ! -e $dir/out/$n.part ]] || cat "$dir/out/$n.part"
	printf 'batch: %s\nFAIL\t%s\t0.000s\n' "$2" "${imports[$1]}"
}
while :; do
	while :; do
		alive=0
		for p in "${pids[@]}"; do
			kill -0 "$p" 2>/dev/null && alive=1
		done
		flush
		((alive)) || break
		sleep 2
	done
	panicked=()
	for g in $(seq 1 "${#pids[@]}"); do
		st=0
		wait "${pids[g - 1]}" || st=$?
		((st != 0)) || continue
		if [[ -f $dir/panicked.$round.$g ]]; then
			panicked+=("$g")
			continue
		fi
		echo "batch: guest $g failed (run.sh status $st); its log:"
		guest_log "$g"
		rc=1
	done
	flush
	# The entries left: taken and not finished (out/N.part: started; else
	# only taken), or never taken.
	left=()
	for i in "${!imports[@]}"; do
		n=$(printf '%04d' "$i")
		[[ -n ${printed[$n]:-} ]] || left+=("$i")
	done
	# Run them again after a panic, when nothing else failed: not after a
	# build failure (rc is set, the queue emptied), a failed entry or
	# guest, or a test that failed before the panic. With rc 0 every entry
	# was queued, so each one left is in run/ or queue/.
	again=0
	if ((${#panicked[@]} > 0 && rc == 0 && round < max_panic_reruns && ${#left[@]} > 0)); then
		again=1
		for i in "${left[@]}"; do
			n=$(printf '%04d' "$i")
			[[ ! -e $dir/out/$n.part ]] || ! grep -q -- '--- FAIL' "$dir/out/$n.part" || again=0
		done
	fi
	((again)) || break
	panicked_logs
	for i in "${left[@]}"; do
		n=$(printf '%04d' "$i")
		if [[ -e $dir/out/$n.part ]]; then
			fail_entry "$i" "the kernel of the guest running ${imports[i]} panicked under it"
			rm -f "$dir/out/$n.part"
		fi
		[[ ! -e $dir/run/$n ]] || mv "$dir/run/$n" "$dir/queue/$n"
		rm -f "$dir/run/$n.sid"
	done
	round=$((round + 1))
	n=${#left[@]}
	((n <= jobs)) || n=$jobs
	echo "rerun-panicked: a guest kernel panicked; the entries left (${#left[@]}) run again in new guests ($n; rerun $round of at most $max_panic_reruns)"
	start_guests "$n"
done
panicked_logs
((${#panicked[@]} == 0)) || rc=1
# Entries a guest took and never finished, and entries nobody took.
for i in "${left[@]}"; do
	n=$(printf '%04d' "$i")
	if [[ -e $dir/out/$n.part ]]; then
		fail_entry "$i" "the guest running ${imports[i]} failed under it"
	elif [[ -e $dir/run/$n ]]; then
		fail_entry "$i" "the guest that took ${imports[i]} failed before starting it"
	else
		fail_entry "$i" "${imports[i]} did not run (no guest left, or a build failed)"
	fi
	rc=1
done
exit "$rc"
