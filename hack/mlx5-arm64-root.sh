#!/usr/bin/env bash
# Builds the arm64 root that make test-mlx5-arm64 runs libibverbs and
# libmlx5 in under qemu-aarch64 (-L): Debian 12's arm64 rdma-core 44.0-2
# (libibverbs1, ibverbs-providers, libibverbs-dev), its libraries (libnl)
# and the C library (libc6, libgcc-s1), each .deb checked against the
# sha256 pinned in hack/mlx5-arm64.pin and unpacked with dpkg -x. Nothing
# is installed and the host's apt state is left alone: apt runs with a
# private configuration (its own sources list with bookworm's arm64
# packages only, its own lists and cache, an empty dpkg status, arm64 as
# its only architecture), so no dpkg --add-architecture is needed.
#
# Usage: hack/mlx5-arm64-root.sh          prints the root's directory
#        hack/mlx5-arm64-root.sh -repin   rewrites the pin file with the
#                                         versions and digests Debian
#                                         serves today (then review and
#                                         commit it)
#
# Debian serves only the current build of each package. When a pinned
# version leaves the archive (a point release replaces libc6, say), this
# script fails and names the package; run it with -repin, check that
# rdma-core is still 44.0-2 (the version the traces are compared with),
# and commit the new pin file.
#
# Env: GOVERBS_MLX5_ARM64_CACHE  where to build (default .cache/mlx5-arm64)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
cache=${GOVERBS_MLX5_ARM64_CACHE:-$repo/.cache/mlx5-arm64}
pinfile=$here/mlx5-arm64.pin
suite=bookworm
mirror=http://deb.debian.org/debian
# What the root holds; -repin pins these (and only these).
pkgs=(libc6 libgcc-s1 libnl-3-200 libnl-route-3-200 libibverbs1 ibverbs-providers libibverbs-dev)
# The rdma-core version libmlx5's bytes are taken from.
rdma_version=44.0-2

log() { printf 'mlx5-arm64-root: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

repin=
case ${1:-} in
-repin) repin=1 ;;
"") ;;
*) die "usage: $0 [-repin]" ;;
esac

mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9

root=$cache/root
stamp=$root/.complete
key=$(sha256sum "$pinfile" | cut -d' ' -f1)
if [[ -z $repin && -e $stamp && $(cat "$stamp") == "$key" ]]; then
	echo "$root"
	exit 0
fi

apt=$cache/apt
mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/debs"
echo "deb $mirror $suite main" >"$apt/sources.list"
opts=(-q -o "Dir::Etc::SourceList=$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
	-o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o Dir::State::status=/dev/null
	-o Dir::Etc::Preferences=/dev/null -o Dir::Etc::PreferencesParts=/dev/null
	-o APT::Architecture=arm64 -o APT::Architectures::=arm64 -o Acquire::Languages=none
	-o Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false
	-o Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false
	-o Acquire::IndexTargets::deb::DEP-11-icons-small::DefaultEnabled=false
	-o Acquire::IndexTargets::deb::DEP-11-icons-hidpi::DefaultEnabled=false
	-o Acquire::IndexTargets::deb::CNF::DefaultEnabled=false
	-o APT::Sandbox::User=root -o Debug::NoLocking=1)
log "apt-get update with a private configuration ($suite main, arm64 only)"
apt-get "${opts[@]}" update >&2 || die "apt-get update of $suite's arm64 packages failed"

# candidate NAME: the version Debian serves today, and its sha256.
candidate() {
	apt-cache "${opts[@]}" show "$1" 2>/dev/null |
		awk '/^Version: / { v = $2 } /^SHA256: / { print v, $2; exit }'
}

if [[ -n $repin ]]; then
	{
		echo "# Debian 12 (bookworm) arm64 packages of make test-mlx5-arm64's root:"
		echo "# name, version, sha256 of the .deb. Written by hack/mlx5-arm64-root.sh -repin."
		echo "# Debian serves only the current build: when a version here leaves the"
		echo "# archive the script fails naming it; run it with -repin, check that"
		echo "# rdma-core is still $rdma_version, and commit this file."
		for p in "${pkgs[@]}"; do
			c=$(candidate "$p")
			[[ -n $c ]] || die "$suite serves no arm64 package $p"
			echo "$p $c"
		done
	} >"$pinfile.new"
	mv "$pinfile.new" "$pinfile"
	awk '!/^#/ && $2 != "'"$rdma_version"'" && ($1 ~ /ibverbs/) { bad = bad " " $1 "=" $2 } END { if (bad) { print "mlx5-arm64-root: warning: rdma-core is no longer " "'"$rdma_version"'" ":" bad > "/dev/stderr" } }' "$pinfile"
	log "pinned in $pinfile:"
	grep -v '^#' "$pinfile" >&2
	key=$(sha256sum "$pinfile" | cut -d' ' -f1)
fi

# name version sha256, one package a line, from the pin file.
pins=$(grep -v -e '^#' -e '^[[:space:]]*$' "$pinfile") || die "$pinfile pins no package"
deb() { echo "$apt/debs/${1}_${2//:/%3a}_arm64.deb"; }
# One apt-get download for every package not downloaded yet (each apt call
# reads the lists anew: about a second each).
want=()
while read -r name version _; do
	[[ -e $(deb "$name" "$version") ]] || want+=("$name=$version")
done <<<"$pins"
if ((${#want[@]} > 0)); then
	log "downloading ${#want[@]} packages"
	(cd "$apt/debs" && apt-get "${opts[@]}" download "${want[@]}" >&2) || {
		gone=
		for w in "${want[@]}"; do
			served=$(candidate "${w%%=*}")
			served=${served%% *}
			[[ $served == "${w#*=}" ]] || gone+=" ${w%%=*} ${w#*=} (Debian serves: ${served:-nothing});"
		done
		die "apt-get download failed;${gone:- every pinned version is still served (a network error?)}${gone:+ Debian $suite no longer serves these pinned versions: run hack/mlx5-arm64-root.sh -repin, check rdma-core is still $rdma_version, and commit hack/mlx5-arm64.pin}"
	}
fi

tmp=$(mktemp -d "$cache/.root.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
n=0
while read -r name version sha256; do
	f=$(deb "$name" "$version")
	[[ -e $f ]] || die "apt-get download $name=$version wrote no $f"
	got=$(sha256sum "$f" | cut -d' ' -f1)
	if [[ $got != "$sha256" ]]; then
		mv "$f" "$f.bad"
		die "$name $version has sha256 $got, not the pinned $sha256 (kept as $f.bad); if Debian rebuilt it, run hack/mlx5-arm64-root.sh -repin and commit hack/mlx5-arm64.pin"
	fi
	dpkg -x "$f" "$tmp"
	n=$((n + 1))
done <<<"$pins"
for f in lib/ld-linux-aarch64.so.1 usr/lib/aarch64-linux-gnu/libibverbs.so \
	usr/lib/aarch64-linux-gnu/libibverbs/libmlx5-rdmav34.so etc/libibverbs.d/mlx5.driver usr/include/infiniband/verbs.h; do
	[[ -e $tmp/$f ]] || die "the unpacked root has no /$f"
done
rm -rf "$root"
mv "$tmp" "$root"
trap - EXIT
echo "$key" >"$stamp"
log "unpacked $n packages into $root"
echo "$root"
