#!/usr/bin/env bash
# Downloads and unpacks a Debian bookworm kernel for the VM test bed.
#
# Usage: hack/vm/fetch-kernel.sh
#   Prints the unpacked tree's directory (.cache/vm/<pkg>) on stdout, progress
#   on stderr. A second run finds the cache and only prints the directory.
#
# Env: GOVERBS_KERNEL       the kernel series: 6.12 (default: the newest line
#                           Debian 12 serves) or 6.1. The newest build of the
#                           series is taken (Debian serves only current builds,
#                           so no build number is written down anywhere).
#      GOVERBS_KERNEL_PKG   an exact package instead (e.g. linux-image-6.1.0-56-amd64).
#      GOVERBS_VM_ARCH      amd64 (default) or arm64. arm64 has only the 6.12
#                           series; its package comes from Debian's arm64
#                           archive (dpkg --add-architecture arm64 is done
#                           here when missing, under apt-lock.sh's lock).
#      GOVERBS_VM_CACHE     cache directory (default: <repo>/.cache/vm).
#
# The package is only unpacked with dpkg -x, never installed: the host keeps
# its own kernel, and installing would run initramfs and bootloader hooks.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${GOVERBS_VM_CACHE:-$repo/.cache/vm}

log() { printf 'fetch-kernel: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

arch=${GOVERBS_VM_ARCH:-amd64}
# apt's name for a package of the guest's architecture: a foreign one needs
# the :ARCH qualifier.
apt_qual=
case $arch in
amd64) ;;
arm64) apt_qual=:arm64 ;;
*) die "GOVERBS_VM_ARCH=$arch: the test bed knows amd64 and arm64" ;;
esac

# Prints the candidate version of package $1, or nothing if apt cannot get it.
candidate() {
	apt-cache policy "$1$apt_qual" 2>/dev/null | awk '$1 == "Candidate:" && $2 != "(none)" { print $2 }'
}

series=${GOVERBS_KERNEL:-6.12}
# Package names per series: 6.1 is linux-image-6.1.0-ABI-ARCH, 6.12 is
# linux-image-6.12.PATCH+deb12-ARCH. Both have an -unsigned twin (arm64 also
# has -16k, -cloud and -rt flavours, which the patterns leave out).
case $series in
6.1) pkg_re="^linux-image-6\.1\.0-([0-9]+)-$arch(-unsigned)?\$" ;;
6.12) pkg_re="^linux-image-6\.12\.([0-9]+)\+deb12-$arch(-unsigned)?\$" ;;
*) die "GOVERBS_KERNEL=$series: the test bed knows 6.1 and 6.12" ;;
esac
# shellcheck source=apt-lock.sh
. "$here/apt-lock.sh"

# Prints the newest package name of the series. The signed and the
# -unsigned packages carry the same kernel and modules; the signed one is
# preferred only because it is the one Debian users actually boot.
newest_pkg() {
	apt-cache search --names-only "$pkg_re" 2>/dev/null |
		awk '{ print $1 }' |
		sed -E "s/$pkg_re/\\1 & \\2/" |
		# N descending, then the signed name (empty suffix) before -unsigned.
		sort -k1,1nr -k3,3 |
		while read -r _ name _; do
			if [[ -n $(candidate "$name") ]]; then
				echo "$name"
				break
			fi
		done
}

# The repository's .gitignore may not list .cache/; a self-ignoring .gitignore
# inside it keeps the ~450 MB kernel tree out of git either way.
mkdir -p "$cache"
if [[ $cache == "$repo/.cache/vm" && ! -e $repo/.cache/.gitignore ]]; then
	printf '*\n' >"$repo/.cache/.gitignore"
fi

# go test -exec starts several VMs at once; on a fresh machine they would all
# download the kernel and replace each other's trees while in use.
exec 9>"$cache/.fetch.lock"
flock 9

pkg=${GOVERBS_KERNEL_PKG:-}
if [[ -z $pkg ]]; then
	# Reuse any complete tree already in the cache before asking apt: this keeps
	# repeated runs offline and fast, and stops a new Debian point release from
	# silently changing the kernel under a developer mid-task.
	pkg=$(find "$cache" -mindepth 2 -maxdepth 2 -path '*/linux-image-*/.complete' -printf '%h\n' |
		xargs -r -n1 basename | grep -E "$pkg_re" | sort -V | tail -n1 || true)
	if [[ -n $pkg ]]; then
		echo "$cache/$pkg"
		exit 0
	fi
fi

dest=$cache/${pkg:-unknown}
if [[ -n $pkg && -e $dest/.complete ]]; then
	echo "$dest"
	exit 0
fi

# From the first question to apt to the download, apt's lists hold still
# (apt-lock.sh): rootfs.sh may be adding an architecture at the same time.
goverbs_apt_lock
if [[ $arch != amd64 ]]; then
	goverbs_apt_ensure_arch "$arch" || die "cannot add the $arch architecture to dpkg and update apt's lists (run as root)"
fi
if [[ -z $pkg ]]; then
	pkg=$(newest_pkg)
	if [[ -z $pkg ]]; then
		# Fresh machines (CI) may have no package lists yet.
		log "no $series kernel package known to apt; running apt-get update"
		goverbs_apt_update || die "apt-get update failed"
		pkg=$(newest_pkg)
	fi
	[[ -n $pkg ]] || die "apt knows no $series kernel package matching $pkg_re (is this Debian bookworm?)"
	dest=$cache/$pkg
	if [[ -e $dest/.complete ]]; then
		echo "$dest"
		exit 0
	fi
elif [[ -z $(candidate "$pkg") ]]; then
	goverbs_apt_update || die "apt-get update failed"
	[[ -n $(candidate "$pkg") ]] || die "apt cannot download $pkg (GOVERBS_KERNEL_PKG)"
fi

command -v dpkg >/dev/null || die "dpkg is missing"
command -v depmod >/dev/null || "$here/install-deps.sh" kmod

log "downloading $pkg ($(candidate "$pkg"))"
tmp=$(mktemp -d "$cache/.fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# As root apt would drop to the _apt user for the download and complain that
# it cannot write into a 0700 mktemp directory; the file is only unpacked, so
# the sandbox buys nothing here.
(cd "$tmp" && apt-get download -q -o APT::Sandbox::User=root "$pkg$apt_qual" >&2) ||
	die "apt-get download $pkg failed"
deb=$(find "$tmp" -maxdepth 1 -name '*.deb' -print -quit)
[[ -n $deb ]] || die "apt-get download produced no .deb"

log "unpacking into $dest"
dpkg -x "$deb" "$tmp/root"
rm -f "$deb"

vmlinuz=$(find "$tmp/root/boot" -maxdepth 1 -name 'vmlinuz-*' -print -quit)
[[ -n $vmlinuz ]] || die "$pkg contains no boot/vmlinuz-*"
version=${vmlinuz##*/vmlinuz-}
[[ -d $tmp/root/lib/modules/$version ]] || die "$pkg has no lib/modules/$version"
if [[ ! -s $tmp/root/lib/modules/$version/modules.dep ]]; then
	# Debian generates modules.dep in postinst, which dpkg -x does not run.
	log "depmod $version"
	depmod -b "$tmp/root" "$version"
fi
printf '%s\n' "$version" >"$tmp/root/version"

# Publish atomically so an interrupted run never leaves a half tree that a
# later run would mistake for a complete one.
rm -rf "$dest"
mv "$tmp/root" "$dest"
touch "$dest/.complete"
log "kernel $version ready"
echo "$dest"
