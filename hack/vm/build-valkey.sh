#!/usr/bin/env bash
# Builds valkey-server 8.1.1 with its RDMA transport as a module, and
# valkey's own RDMA test client, for the interop tests (valkeyrdma) to run
# in the test bed. Nothing of valkey's is committed: the source is Debian's
# orig tarball, fetched with apt-get source --download-only through a
# private apt configuration (its own sources list with trixie's deb-src,
# its own lists and cache, under the cache directory: the machine's
# sources are not touched), checked against the digest pinned here, and
# built once with gcc against rdma-core's development packages.
#
# Usage: hack/vm/build-valkey.sh
#   Prints the directory holding valkey-server, valkey-rdma.so and
#   rdma-test. A second run only checks the stamp.
#
# Environment:
#   GOVERBS_VALKEY_CACHE  where to build (default .cache/valkey in the repo)
#   GOVERBS_VALKEY_JOBS   make's -j (default 2, at most 2)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${GOVERBS_VALKEY_CACHE:-$repo/.cache/valkey}

version=8.1.1
orig=valkey_${version}+dfsg1.orig.tar.xz
sha256=d9bbd82eecb82f359e649a0007ad3dc1b47cc15afa626348ca86b73c4ae2c7ee
suite=trixie
mirror=http://deb.debian.org/debian

log() { printf 'build-valkey: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

out=$cache/valkey-$version
stamp=$out/.complete
if [[ -e $stamp ]]; then
	echo "$out"
	exit 0
fi
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
if [[ -e $stamp ]]; then
	echo "$out"
	exit 0
fi

"$here/install-deps.sh" gcc make libc6-dev libibverbs-dev librdmacm-dev pkg-config xz-utils

tarball=$cache/$orig
if [[ ! -e $tarball ]]; then
	apt=$cache/apt
	mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/src"
	echo "deb-src $mirror $suite main" >"$apt/sources.list"
	opts=(-q -o "Dir::Etc::SourceList=$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
		-o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache"
		-o APT::Sandbox::User=root -o Debug::NoLocking=1)
	log "apt-get update with a private sources list ($suite deb-src only)"
	apt-get "${opts[@]}" update >&2 || die "apt-get update of $suite's sources failed"
	log "fetching $orig"
	# The .dsc and .debian.tar.xz answered 404 when this was written: apt
	# fails for them, and only the orig tarball matters. A newer upload
	# of the same upstream version shares the orig tarball; another
	# upstream version brings another one, which the test below reports.
	(cd "$apt/src" && apt-get "${opts[@]}" source --download-only valkey >&2) || true
	[[ -e $apt/src/$orig ]] ||
		die "$suite no longer serves $orig (apt-get source --download-only valkey fetched: $(ls "$apt/src" | tr '\n' ' ')); the pinned valkey $version is gone from the archive: pick a new version and pin it here"
	mv "$apt/src/$orig" "$tarball.part"
	mv "$tarball.part" "$tarball"
fi
got=$(sha256sum "$tarball" | cut -d' ' -f1)
if [[ $got != "$sha256" ]]; then
	mv "$tarball" "$tarball.bad"
	die "$orig has sha256 $got, not the pinned $sha256 (kept as $tarball.bad)"
fi

jobs=${GOVERBS_VALKEY_JOBS:-2}
((jobs >= 1 && jobs <= 2)) || jobs=2
build=$(mktemp -d "$cache/.build.XXXXXX")
trap 'rm -rf "$build"' EXIT
tar -C "$build" -xJf "$tarball"
src=$(find "$build" -mindepth 1 -maxdepth 1 -type d | head -n1)
[[ -f $src/src/rdma.c && -f $src/tests/rdma/rdma-test.c ]] || die "$orig has no src/rdma.c or tests/rdma/rdma-test.c"
log "building valkey $version with BUILD_RDMA=module (-j$jobs; several minutes)"
start=$SECONDS
# GIT_DIR: the build directory is inside this repository's tree, and
# valkey's release header would take this repository's commit as its own.
GIT_DIR=/nonexistent make -C "$src" -j"$jobs" BUILD_RDMA=module USE_SYSTEMD=no BUILD_TLS=no >"$build/make.log" 2>&1 ||
	{ tail -n 40 "$build/make.log" >&2; die "make failed"; }
make -C "$src/tests/rdma" >>"$build/make.log" 2>&1 || { tail -n 40 "$build/make.log" >&2; die "make -C tests/rdma failed"; }
log "built in $((SECONDS - start)) s"
rm -rf "$out"
mkdir -p "$out"
cp "$src/src/valkey-server" "$src/src/valkey-rdma.so" "$src/tests/rdma/rdma-test" "$out/"
echo "valkey $version ($orig, sha256 $sha256), make BUILD_RDMA=module USE_SYSTEMD=no BUILD_TLS=no" >"$out/VERSION"
touch "$stamp"
echo "$out"
