#!/usr/bin/env bash
# Builds siw.ko (soft-iWARP) for an unpacked test-bed kernel and adds it to
# that kernel's module tree, so modprobe --show-depends (and so run.sh) can
# load it like any other module.
#
# Usage: hack/vm/build-siw.sh KERNEL-DIR
#   KERNEL-DIR  a tree from fetch-kernel.sh (.cache/vm/linux-image-...)
#
# Debian's kernels are built without CONFIG_RDMA_SIW, but the driver builds
# out of tree in seconds: drivers/infiniband/sw/siw from linux-source-<series>
# at exactly the kernel's package version, against that kernel's
# linux-headers-*-amd64 (with its -common and linux-kbuild dependencies). All
# of them are fetched with apt-get download and unpacked with dpkg -x under
# .cache/vm/siw-build, never installed. The result is cached in the kernel
# tree (lib/modules/VERSION/extra/siw.ko, then depmod); a second run only
# checks the stamp.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${GOVERBS_VM_CACHE:-$repo/.cache/vm}

log() { printf 'build-siw: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

kdir=$(realpath "${1:?usage: build-siw.sh KERNEL-DIR}")
[[ -e $kdir/.complete && -r $kdir/version ]] || die "$kdir is not a complete kernel tree from fetch-kernel.sh"
kver=$(<"$kdir/version")
stamp=$kdir/.siw-complete
[[ -e $stamp ]] && exit 0

exec 9>"$cache/.siw.lock"
flock 9
[[ -e $stamp ]] && exit 0

# shellcheck source=apt-lock.sh
. "$here/apt-lock.sh"
goverbs_apt_lock
candidate() {
	apt-cache policy "$1" 2>/dev/null | awk '$1 == "Candidate:" && $2 != "(none)" { print $2 }'
}
image=${kdir##*/}
version=$(candidate "$image")
[[ -n $version ]] || { goverbs_apt_update || true; version=$(candidate "$image"); }
[[ -n $version ]] || die "apt does not know $image any more; remove $kdir to fetch the current kernel"
headers=${image/linux-image-/linux-headers-}
headers=${headers%-unsigned}
# The series of the source package: 6.1.0-56-amd64 -> 6.1, 6.12.117+deb12-amd64 -> 6.12.
series=$(sed -E 's/^([0-9]+\.[0-9]+)[.-].*/\1/' <<<"$kver")
deps=$(apt-cache depends "$headers" 2>/dev/null | awk '$1 == "Depends:" && $2 ~ /^linux-(headers|kbuild)-/ { print $2 }')
[[ -n $deps ]] || die "cannot resolve the dependencies of $headers"

build=$(mktemp -d "$cache/.siw-build.XXXXXX")
trap 'rm -rf "$build"' EXIT
log "downloading $headers, $(echo $deps) and linux-source-$series=$version"
(cd "$build" && apt-get download -q -o APT::Sandbox::User=root "$headers" $deps "linux-source-$series=$version" >&2) ||
	die "apt-get download failed"
for deb in "$build"/*.deb; do
	dpkg -x "$deb" "$build/root"
	rm -f "$deb"
done
src=$build/root/usr/src
kbuild=$src/$headers
[[ -d $kbuild ]] || die "$headers did not unpack to $kbuild"
# The arch headers' Makefile includes the -common tree by its installed,
# absolute path; point it into the unpacked tree.
sed -i -E "s#^include /usr/src/#include $src/#" "$kbuild/Makefile"
tarball=$(find "$src" -maxdepth 1 -name "linux-source-$series.tar.*" -print -quit)
[[ -n $tarball ]] || die "linux-source-$series has no tarball"
log "extracting drivers/infiniband/sw/siw"
tar -xf "$tarball" -C "$build" "linux-source-$series/drivers/infiniband/sw/siw"
mdir=$build/linux-source-$series/drivers/infiniband/sw/siw
# No BTF for the module: that needs pahole, and nothing here reads it.
make -s -C "$kbuild" M="$mdir" CONFIG_RDMA_SIW=m CONFIG_DEBUG_INFO_BTF_MODULES= modules >&2 ||
	die "building siw.ko failed"
vermagic=$(modinfo -F vermagic "$mdir/siw.ko")
[[ $vermagic == "$kver "* ]] || die "siw.ko has vermagic '$vermagic', the kernel is $kver"

mkdir -p "$kdir/lib/modules/$kver/extra"
cp "$mdir/siw.ko" "$kdir/lib/modules/$kver/extra/siw.ko"
depmod -b "$kdir" "$kver"
touch "$stamp"
log "siw.ko ready for $kver"
