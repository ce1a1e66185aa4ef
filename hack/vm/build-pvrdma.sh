#!/usr/bin/env bash
# Builds the two pieces of the pvrdma test bed (hack/vm/pvrdma.sh) that Debian
# does not ship, and prints the rdmacm-mux binary's path on stdout:
#
#   vmw_pvrdma.ko  the guest driver of qemu's paravirtual RDMA device. Debian
#                  builds its kernels with CONFIG_INFINIBAND_VMWARE_PVRDMA
#                  unset; the driver builds out of tree in seconds, like siw.ko
#                  in build-siw.sh: drivers/infiniband/hw/vmw_pvrdma from
#                  linux-source-<series> at exactly the kernel's package
#                  version, against that kernel's linux-headers-*-amd64. It
#                  goes into the kernel tree (lib/modules/VERSION/extra, then
#                  depmod), so run.sh and modprobe --show-depends find it.
#   rdmacm-mux     qemu's MAD multiplexer (contrib/rdmacm-mux), which the
#                  pvrdma device model must be connected to. Built with gcc
#                  from the source package of the qemu-system-x86 that is
#                  installed (Debian 12's 7.2: upstream removed the device and
#                  the mux after 9.0), against libibumad and glib, with a
#                  stand-in for the only qemu header it includes (qemu/osdep.h).
#                  Cached as .cache/vm/rdmacm-mux-<source version>/rdmacm-mux.
#
# Usage: hack/vm/build-pvrdma.sh KERNEL-DIR
#   KERNEL-DIR  a tree from fetch-kernel.sh (.cache/vm/linux-image-...)
#
# Every package is fetched with apt-get download / apt-get source
# --download-only and unpacked in a temporary directory, never installed. The
# qemu source comes through a private apt configuration (a deb-src twin of the
# system's Debian sources, its lists kept in the cache), so the machine's own
# apt sources stay as they are. A second run only checks the stamps.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${GOVERBS_VM_CACHE:-$repo/.cache/vm}

log() { printf 'build-pvrdma: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

kdir=$(realpath "${1:?usage: build-pvrdma.sh KERNEL-DIR}")
[[ -e $kdir/.complete && -r $kdir/version ]] || die "$kdir is not a complete kernel tree from fetch-kernel.sh"
kver=$(<"$kdir/version")
stamp=$kdir/.pvrdma-complete

# The qemu that runs the device: its source package names the mux's cache.
qver=$(dpkg-query -W -f='${Version}' qemu-system-x86 2>/dev/null || true)
[[ $qver == 1:7.2+dfsg-* ]] ||
	die "qemu-system-x86 is '${qver:-not installed}'; the pvrdma bed needs Debian 12's 7.2 (qemu deprecated pvrdma in 8.2 and removed it after 9.0)"
srcver=$(dpkg-query -W -f='${source:Version}' qemu-system-x86)
muxdir=$cache/rdmacm-mux-${srcver#*:}
mux=$muxdir/rdmacm-mux

if [[ -e $stamp && -x $mux ]]; then
	echo "$mux"
	exit 0
fi

mkdir -p "$cache"
exec 9>"$cache/.pvrdma.lock"
flock 9

# shellcheck source=apt-lock.sh
. "$here/apt-lock.sh"
candidate() {
	apt-cache policy "$1" 2>/dev/null | awk '$1 == "Candidate:" && $2 != "(none)" { print $2 }'
}

build=$(mktemp -d "$cache/.pvrdma-build.XXXXXX")
trap 'rm -rf "$build"' EXIT

# ------------------------------------------------------------- vmw_pvrdma.ko --

if [[ ! -e $stamp ]]; then
	goverbs_apt_lock
	image=${kdir##*/}
	version=$(candidate "$image")
	[[ -n $version ]] || { goverbs_apt_update || true; version=$(candidate "$image"); }
	[[ -n $version ]] || die "apt does not know $image any more; remove $kdir to fetch the current kernel"
	headers=${image/linux-image-/linux-headers-}
	headers=${headers%-unsigned}
	# 6.1.0-56-amd64 -> 6.1, 6.12.117+deb12-amd64 -> 6.12.
	series=$(sed -E 's/^([0-9]+\.[0-9]+)[.-].*/\1/' <<<"$kver")
	deps=$(apt-cache depends "$headers" 2>/dev/null | awk '$1 == "Depends:" && $2 ~ /^linux-(headers|kbuild)-/ { print $2 }')
	[[ -n $deps ]] || die "cannot resolve the dependencies of $headers"
	log "downloading $headers, $(echo $deps) and linux-source-$series=$version"
	mkdir "$build/k"
	(cd "$build/k" && apt-get download -q -o APT::Sandbox::User=root "$headers" $deps "linux-source-$series=$version" >&2) ||
		die "apt-get download failed"
	for deb in "$build"/k/*.deb; do
		dpkg -x "$deb" "$build/k/root"
		rm -f "$deb"
	done
	src=$build/k/root/usr/src
	kbuild=$src/$headers
	[[ -d $kbuild ]] || die "$headers did not unpack to $kbuild"
	# The arch headers' Makefile includes the -common tree by its installed,
	# absolute path; point it into the unpacked tree.
	sed -i -E "s#^include /usr/src/#include $src/#" "$kbuild/Makefile"
	tarball=$(find "$src" -maxdepth 1 -name "linux-source-$series.tar.*" -print -quit)
	[[ -n $tarball ]] || die "linux-source-$series has no tarball"
	log "extracting drivers/infiniband/hw/vmw_pvrdma"
	tar -xf "$tarball" -C "$build/k" "linux-source-$series/drivers/infiniband/hw/vmw_pvrdma"
	mdir=$build/k/linux-source-$series/drivers/infiniband/hw/vmw_pvrdma
	# No BTF for the module: that needs pahole, and nothing here reads it.
	make -s -C "$kbuild" M="$mdir" CONFIG_INFINIBAND_VMWARE_PVRDMA=m CONFIG_DEBUG_INFO_BTF_MODULES= modules >&2 ||
		die "building vmw_pvrdma.ko failed"
	vermagic=$(modinfo -F vermagic "$mdir/vmw_pvrdma.ko")
	[[ $vermagic == "$kver "* ]] || die "vmw_pvrdma.ko has vermagic '$vermagic', the kernel is $kver"
	mkdir -p "$kdir/lib/modules/$kver/extra"
	cp "$mdir/vmw_pvrdma.ko" "$kdir/lib/modules/$kver/extra/vmw_pvrdma.ko.tmp"
	mv "$kdir/lib/modules/$kver/extra/vmw_pvrdma.ko.tmp" "$kdir/lib/modules/$kver/extra/vmw_pvrdma.ko"
	depmod -b "$kdir" "$kver"
	touch "$stamp"
	rm -rf "$build/k"
	log "vmw_pvrdma.ko ready for $kver"
fi

# --------------------------------------------------------------- rdmacm-mux --

if [[ ! -x $mux ]]; then
	"$here/install-deps.sh" gcc libc6-dev pkg-config libibumad-dev libibverbs-dev libglib2.0-dev ||
		die "missing packages to build rdmacm-mux"
	# A private apt configuration with only deb-src lines, derived from the
	# system's Debian sources (deb822 .sources or one-line .list files).
	apt_dir=$cache/apt-src
	mkdir -p "$apt_dir/parts" "$apt_dir/lists/partial"
	{
		for f in /etc/apt/sources.list.d/*.sources; do
			[[ -e $f ]] || continue
			grep -qi 'debian' "$f" || continue
			sed -E 's/^Types:.*/Types: deb-src/' "$f"
			echo
		done
	} >"$apt_dir/parts/debian-src.sources"
	{
		for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
			[[ -e $f ]] || continue
			sed -n -E 's/^deb[[:space:]]+(.*debian.*)$/deb-src \1/p' "$f"
		done
	} >"$apt_dir/parts/debian-src.list"
	[[ -s $apt_dir/parts/debian-src.sources ]] || rm -f "$apt_dir/parts/debian-src.sources"
	[[ -s $apt_dir/parts/debian-src.list ]] || rm -f "$apt_dir/parts/debian-src.list"
	[[ -n $(ls "$apt_dir/parts") ]] || die "no Debian apt sources to derive deb-src lines from"
	apt_src=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$apt_dir/parts"
		-o "Dir::State::Lists=$apt_dir/lists" -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache=
		-o APT::Sandbox::User=root)
	mkdir "$build/q"
	log "downloading the source of qemu=$srcver"
	if ! (cd "$build/q" && apt-get "${apt_src[@]}" source --download-only -qq "qemu=$srcver" >&2); then
		apt-get "${apt_src[@]}" update -qq >&2 || die "apt-get update of the deb-src lists ($apt_dir) failed"
		(cd "$build/q" && apt-get "${apt_src[@]}" source --download-only -qq "qemu=$srcver" >&2) ||
			die "apt-get source qemu=$srcver failed"
	fi
	orig=$(find "$build/q" -maxdepth 1 -name 'qemu_*.orig.tar.*' -print -quit)
	debian=$(find "$build/q" -maxdepth 1 -name 'qemu_*.debian.tar.*' -print -quit)
	[[ -n $orig && -n $debian ]] || die "qemu=$srcver: no orig or debian tarball"
	# Only the mux's directory is unpacked; Debian's patches must leave it
	# alone, or the build would not be the packaged qemu's mux.
	tar -xf "$debian" -C "$build/q" debian/patches
	if grep -ls '^+++ .*contrib/rdmacm-mux/' "$build"/q/debian/patches/* "$build"/q/debian/patches/*/* 2>/dev/null | grep -q .; then
		die "qemu=$srcver: Debian patches contrib/rdmacm-mux; build-pvrdma.sh does not apply patches"
	fi
	tar -xf "$orig" -C "$build/q" --wildcards '*/contrib/rdmacm-mux/*'
	msrc=$(find "$build/q" -path '*/contrib/rdmacm-mux/main.c' -print -quit)
	[[ -n $msrc ]] || die "qemu=$srcver has no contrib/rdmacm-mux/main.c"
	# The stand-in for qemu/osdep.h: the C and POSIX headers, glib and the
	# branch hints main.c uses from qemu's own headers.
	mkdir -p "$build/q/include/qemu"
	cat >"$build/q/include/qemu/osdep.h" <<-'EOF'
		/* Stand-in for qemu's osdep.h, written by hack/vm/build-pvrdma.sh. */
		#include <errno.h>
		#include <fcntl.h>
		#include <getopt.h>
		#include <signal.h>
		#include <stdbool.h>
		#include <stddef.h>
		#include <stdint.h>
		#include <stdio.h>
		#include <stdlib.h>
		#include <string.h>
		#include <sys/socket.h>
		#include <sys/stat.h>
		#include <sys/types.h>
		#include <sys/un.h>
		#include <unistd.h>
		#include <glib.h>
		#define likely(x) __builtin_expect(!!(x), 1)
		#define unlikely(x) __builtin_expect(!!(x), 0)
	EOF
	# g_memdup is deprecated in this glib but is what the 7.2 source calls.
	# shellcheck disable=SC2046 # pkg-config prints several words
	gcc -O2 -Wall -Wno-deprecated-declarations -I"$build/q/include" $(pkg-config --cflags glib-2.0) \
		-o "$build/q/rdmacm-mux" "$msrc" -libumad -libverbs -lpthread $(pkg-config --libs glib-2.0) >&2 ||
		die "building rdmacm-mux failed"
	tmpdir=$(mktemp -d "$cache/.rdmacm-mux.XXXXXX")
	cp "$build/q/rdmacm-mux" "$tmpdir/rdmacm-mux"
	chmod 0755 "$tmpdir" "$tmpdir/rdmacm-mux"
	rm -rf "$muxdir"
	mv "$tmpdir" "$muxdir"
	log "rdmacm-mux ready for qemu $srcver"
fi
echo "$mux"
