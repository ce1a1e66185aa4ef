#!/usr/bin/env bash
# Fetches the kernel UAPI headers that package uverbs is generated from, and
# prints the include directory (the equivalent of /usr/include for the kernel's
# headers) on stdout.
#
# Usage: uverbs/uapi-headers.sh [PACKAGE]
#
# The source is Debian 12's linux-headers-<series>-common package for the
# kernel series in $GOVERBS_ABI_SERIES (default 6.12, the newest line Debian 12
# serves; its RDMA headers are a superset of 6.1's). Without PACKAGE the newest
# build of the series is taken, since Debian serves only the current build of
# a kernel package. The .deb is fetched with apt-get download and unpacked with
# dpkg -x into .cache/abi; nothing is installed, and whatever kernel headers
# the host has in /usr/include play no part.
#
# That package carries the kernel tree's raw include/uapi, not the exported
# form that `make headers_install` writes (and linux-libc-dev ships). So the
# export is redone here on a copy: the kernel-internal annotations are removed
# and the _UAPI guard prefixes dropped, as headers_install does, and the
# asm/ headers that x86 takes from asm-generic unchanged (Kbuild generates
# one-line wrappers for them) are written as such wrappers.
#
# Progress goes to stderr. A second run with the same package only prints the
# directory.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
cache=${GOVERBS_ABI_CACHE:-$repo/.cache/abi}
series=${GOVERBS_ABI_SERIES:-6.12}

log() { printf 'uapi-headers: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

case $series in
6.1) re='^linux-headers-6\.1\.0-([0-9]+)-common$' ;;
6.12) re='^linux-headers-6\.12\.([0-9]+)\+deb12-common$' ;;
*) die "GOVERBS_ABI_SERIES=$series: known series are 6.12 and 6.1" ;;
esac

# shellcheck source=../hack/vm/apt-lock.sh
. "$repo/hack/vm/apt-lock.sh"
candidate() {
	apt-cache policy "$1" 2>/dev/null | awk '$1 == "Candidate:" && $2 != "(none)" { print $2 }'
}
newest() {
	apt-cache search --names-only "$re" 2>/dev/null | awk '{ print $1 }' |
		sed -E "s/$re/\\1 &/" | sort -k1,1nr |
		while read -r _ name; do
			if [[ -n $(candidate "$name") ]]; then
				echo "$name"
				break
			fi
		done
}

pkg=${1:-}
if [[ -z $pkg ]]; then
	pkg=$(newest)
	if [[ -z $pkg ]]; then
		log "no $series headers package known to apt; running apt-get update"
		goverbs_apt_update || die "apt-get update failed"
		pkg=$(newest)
	fi
	[[ -n $pkg ]] || die "apt knows no package matching $re (is this Debian 12?)"
fi

mkdir -p "$cache"
if [[ $cache == "$repo/.cache/abi" && ! -e $repo/.cache/.gitignore ]]; then
	printf '*\n' >"$repo/.cache/.gitignore"
fi
dest=$cache/$pkg
if [[ -e $dest/.complete ]]; then
	echo "$dest/include"
	exit 0
fi

exec 9>"$cache/.lock"
flock 9
if [[ -e $dest/.complete ]]; then
	echo "$dest/include"
	exit 0
fi
[[ -n $(candidate "$pkg") ]] || { goverbs_apt_update || true; }
[[ -n $(candidate "$pkg") ]] || die "apt cannot download $pkg"

tmp=$(mktemp -d "$cache/.fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
log "downloading $pkg ($(candidate "$pkg"))"
(cd "$tmp" && apt-get download -q -o APT::Sandbox::User=root "$pkg" >&2) || die "apt-get download $pkg failed"
deb=$(find "$tmp" -maxdepth 1 -name '*.deb' -print -quit)
[[ -n $deb ]] || die "apt-get download produced no .deb"
dpkg -x "$deb" "$tmp/root"
src=$(find "$tmp/root/usr/src" -mindepth 1 -maxdepth 1 -type d -name 'linux-headers-*' -print -quit)
[[ -n $src && -d $src/include/uapi/rdma ]] || die "$pkg has no include/uapi/rdma"

# The export: the generic tree, then x86's own asm headers over it.
out=$tmp/out/include
mkdir -p "$out/asm"
cp -r "$src/include/uapi/." "$out/"
cp -r "$src/arch/x86/include/uapi/asm/." "$out/asm/"
for f in "$out"/asm-generic/*.h; do
	name=${f##*/}
	[[ -e $out/asm/$name ]] || printf '#include <asm-generic/%s>\n' "$name" >"$out/asm/$name"
done
# What headers_install removes from every exported header: annotations that
# mean something only inside the kernel, the include of the compiler
# definitions, and the _UAPI prefix of include guards.
find "$out" -name '*.h' -print0 | xargs -0 sed -E -i \
	-e 's/([[:space:](])(__user|__force|__iomem)[[:space:]]/\1/g' \
	-e 's/__attribute_const__([[:space:]]|$)/\1/g' \
	-e 's@^#include <linux/compiler(_types)?\.h>@@' \
	-e 's/(^|[^a-zA-Z0-9])__packed([^a-zA-Z0-9_]|$)/\1__attribute__((packed))\2/g' \
	-e 's/(^|[[:space:](])(inline|asm|volatile)([[:space:](]|$)/\1__\2__\3/g' \
	-e 's@#(ifndef|define|endif[[:space:]]*/[*])[[:space:]]*_UAPI@#\1 @'
printf '%s\n' "$pkg" >"$tmp/out/package"

rm -rf "$dest"
mv "$tmp/out" "$dest"
touch "$dest/.complete"
log "$pkg ready"
echo "$dest/include"
