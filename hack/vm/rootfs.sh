#!/usr/bin/env bash
# Builds the guest userland of a foreign-architecture test VM: a small root
# file system unpacked from Debian bookworm's packages of that architecture.
#
# Usage: hack/vm/rootfs.sh [ARCH]        (default: $GOVERBS_VM_ARCH, else arm64)
#   Prints the tree's directory (.cache/vm/rootfs-ARCH-KEY) on stdout,
#   progress on stderr. A second run finds the cache and only prints it.
#
# The amd64 VM runs its commands in the host's own root; an arm64 guest cannot
# execute the host's binaries, so it gets this tree instead (run.sh mounts it
# as the guest's root and shows the host's directories the command needs on
# top). The packages are fetched with apt-get download and unpacked with
# dpkg -x, never installed: no maintainer scripts run, nothing on the host
# changes except apt's architecture list (dpkg --add-architecture, if missing)
# and its package lists.
#
# Contents: busybox-static (the initramfs' /init), bash and coreutils (the
# command runner), iproute2 (ip, rdma), rdma-core's libraries, providers and
# tools (ibv_*, rping, ucmatose, udaddy, perftest), util-linux (taskset), and
# gcc with librpma-dev (the interop tests build their C peers in the guest,
# see below) -- plus every library those need, resolved from the packages'
# Depends and then checked against the ELF files' DT_NEEDED entries.
#
# Why gcc runs in the guest: testutil.BuildC compiles the C peers from inside
# the test binary, which runs in the guest. A cross compiler on the host
# (gcc-aarch64-linux-gnu with --sysroot=this tree) would build the same
# program, but the test could only use it through a side channel from the
# host (a prebuilt binary handed in by path), which would make the C end of
# the interop tests depend on the harness instead of on its sources.
#
# Env: GOVERBS_VM_CACHE  cache directory (default: <repo>/.cache/vm).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${GOVERBS_VM_CACHE:-$repo/.cache/vm}
arch=${1:-${GOVERBS_VM_ARCH:-arm64}}

log() { printf 'rootfs: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

case $arch in
arm64) triplet=aarch64-linux-gnu elf_machine=AArch64 ;;
*) die "no foreign userland for '$arch' (the test bed knows arm64; amd64 uses the host root)" ;;
esac

# What the guest needs by name; their library dependencies are added below.
pkgs=(
	libc6 busybox-static bash coreutils
	iproute2
	libibverbs1 librdmacm1 ibverbs-providers rdma-core
	ibverbs-utils rdmacm-utils perftest
	util-linux
	# C peers of the interop tests (testutil.BuildC: gcc -lrpma -libverbs -lrdmacm)
	gcc gcc-12 cpp-12 binutils binutils-aarch64-linux-gnu
	libc6-dev linux-libc-dev libgcc-12-dev libc-dev-bin
	librpma0 librpma-dev libibverbs-dev librdmacm-dev libnl-3-dev libnl-route-3-dev
)
# Bump when the tree's layout changes in a way the package list cannot show.
format=2

# shellcheck source=apt-lock.sh
. "$here/apt-lock.sh"

# Prints "name=version" for packages $@ (names without :arch) and the
# library packages they depend on, recursively: Depends and Pre-Depends,
# the first choice of each alternative. Only libraries are followed: the
# named packages' other dependencies (udev, adduser, perl, debconf ...)
# serve installation and services, not the programs the guest runs.
resolve() {
	local -A seen=()
	local todo=("$@") next name line dep
	while ((${#todo[@]} > 0)); do
		next=()
		for name in "${todo[@]}"; do seen[$name]=1; done
		apt-cache depends --no-recommends --no-suggests --no-conflicts \
			--no-breaks --no-replaces --no-enhances "${todo[@]/%/:$arch}" >"$cache/.depends.$$" 2>"$cache/.depends.$$.err" || {
			cat "$cache/.depends.$$.err" >&2
			rm -f "$cache/.depends.$$" "$cache/.depends.$$.err"
			die "apt-cache depends failed for the $arch packages"
		}
		rm -f "$cache/.depends.$$.err"
		while IFS= read -r line; do
			case $line in
			" |"*) [[ -n ${alt:-} ]] || alt=${line#*: } ; continue ;;
			"  Depends: "* | "  PreDepends: "*) dep=${alt:-${line#*: }}; alt= ;;
			*) alt=; continue ;;
			esac
			dep=${dep%:"$arch"}
			[[ $dep == \<* || $dep == *:* ]] && continue # virtual, or another arch
			[[ $dep == lib* || $dep == zlib1g || $dep == gcc-12-base ]] || continue
			[[ -n ${seen[$dep]:-} ]] && continue
			seen[$dep]=1
			next+=("$dep")
		done <"$cache/.depends.$$"
		todo=("${next[@]}")
	done
	rm -f "$cache/.depends.$$"
	# apt-cache depends that answers nothing for a package apt knows is a
	# list being rewritten, not a package without libraries: every guest
	# program needs at least libc6, so the set must have grown.
	((${#seen[@]} > $#)) || die "apt-cache depends resolved no dependency of the named $arch packages (package lists incomplete?)"
	# One apt-cache call for all: each costs about a second.
	printf '%s\n' "${!seen[@]}" | sed "s/\$/:$arch/" | xargs apt-cache policy 2>/dev/null |
		awk -v arch=":$arch" '
			/^[^ ]/ { name = $1; sub(":$", "", name); sub(arch "$", "", name) }
			$1 == "Candidate:" { print name "=" $2 }' |
		LC_ALL=C sort >"$cache/.resolve.$$"
	if grep -q '=(none)$' "$cache/.resolve.$$" || (($(wc -l <"$cache/.resolve.$$") != ${#seen[@]})); then
		grep '=(none)$' "$cache/.resolve.$$" >&2 || true
		rm -f "$cache/.resolve.$$"
		die "apt cannot download all of these $arch packages (apt-get update?)"
	fi
	cat "$cache/.resolve.$$"
	rm -f "$cache/.resolve.$$"
}

mkdir -p "$cache"
# One builder at a time per cache; the others wait here and then find the
# finished tree (the check below runs under the lock).
exec 9>"$cache/.rootfs-$arch.lock"
flock 9

# The tree is named after what was asked for, not after the versions apt
# resolves today: a cached tree is reused without asking apt (offline, and
# about a second per VM instead of ten), and a Debian point release does
# not change the guest under a developer mid-task. Delete the tree to
# pick up newer packages.
key=$({
	echo "format $format"
	printf '%s\n' "${pkgs[@]}"
} | sha256sum | cut -c1-16)
dest=$cache/rootfs-$arch-$key
if [[ -e $dest/.complete ]]; then
	echo "$dest"
	exit 0
fi
# From here to the last download apt's lists must hold still (apt-lock.sh).
goverbs_apt_lock
goverbs_apt_ensure_arch "$arch" || die "cannot add the $arch architecture to dpkg and update apt's lists (run as root)"
# A machine whose architecture was added by a run that died before its
# update finished has it without its lists: update once, then insist.
list=$(resolve "${pkgs[@]}" 2>/dev/null) || {
	log "resolving the $arch packages failed; updating apt's lists once"
	goverbs_apt_update || die "apt-get update failed"
	list=$(resolve "${pkgs[@]}")
}

log "downloading $(wc -l <<<"$list") $arch packages"
tmp=$(mktemp -d "$cache/.rootfs.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/debs" "$tmp/root"
# As root apt drops to _apt for downloads, which cannot write into a 0700
# mktemp directory; the files are only unpacked.
# shellcheck disable=SC2046 # one word per package
(cd "$tmp/debs" && apt-get download -q -o APT::Sandbox::User=root \
	$(sed "s/=/:$arch=/" <<<"$list") >&2) || die "apt-get download failed"
for deb in "$tmp"/debs/*.deb; do
	dpkg -x "$deb" "$tmp/root"
done
root=$tmp/root

# bookworm's packages still ship /bin, /sbin and /lib; on a Debian system
# usrmerge turns those into links to /usr. Do the same, so that every path
# (the interpreter /lib/ld-linux-aarch64.so.1, /usr/bin/env, /bin/bash) exists.
for d in bin sbin lib; do
	mkdir -p "$root/usr/$d"
	if [[ -d $root/$d && ! -L $root/$d ]]; then
		cp -a "$root/$d/." "$root/usr/$d/"
		rm -rf "${root:?}/$d"
	fi
	ln -sfn "usr/$d" "$root/$d"
done
# gcc is an alternative-free name in Debian's gcc package (a link to
# gcc-12); cc is a dpkg alternative, made by postinst, which dpkg -x skips.
[[ -e $root/usr/bin/cc ]] || ln -s gcc "$root/usr/bin/cc"
mkdir -p "$root"/{proc,sys,dev,run,tmp,root,etc}
chmod 1777 "$root/tmp"
# A few files an installed system has (tests read /etc/hostname as a
# regular file that is surely there).
[[ -e $root/etc/passwd ]] || printf 'root:x:0:0:root:/root:/bin/bash\n' >"$root/etc/passwd"
[[ -e $root/etc/group ]] || printf 'root:x:0:\n' >"$root/etc/group"
[[ -e $root/etc/hosts ]] || printf '127.0.0.1\tlocalhost\n' >"$root/etc/hosts"
[[ -e $root/etc/hostname ]] || printf 'goverbs-vm\n' >"$root/etc/hostname"

# Every ELF file's DT_NEEDED must be in the tree: a missing library would
# otherwise show up as a test failing with "cannot open shared object file"
# in the guest.
libdirs=("$root/usr/lib/$triplet" "$root/usr/lib")
missing=()
while IFS= read -r -d '' f; do
	hdr=$(LC_ALL=C readelf -h "$f" 2>/dev/null) || continue
	grep -q "Machine:.*$elf_machine" <<<"$hdr" || continue
	while read -r lib; do
		found=
		for d in "${libdirs[@]}"; do
			[[ -e $d/$lib ]] && found=1 && break
		done
		[[ -n $found ]] || missing+=("${f#"$root"}: $lib")
	done < <(LC_ALL=C readelf -d "$f" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
done < <(
	# Programs, the libraries on the default path and the verbs providers;
	# not plugin directories such as gconv/ or tc/, which find their
	# libraries through their own RUNPATH or never get loaded here.
	find "$root/usr/bin" "$root/usr/sbin" "$root/usr/lib/gcc/$triplet" "$root/usr/libexec" \
		"$root/usr/lib/$triplet/libibverbs" -type f -print0 2>/dev/null
	find "$root/usr/lib/$triplet" -maxdepth 1 -type f -print0
)
if ((${#missing[@]} > 0)); then
	printf '%s\n' "${missing[@]}" | sort -u | head -n 40 | sed "s/^/rootfs: missing: /" >&2
	die "libraries missing from the $arch tree (add their packages to rootfs.sh)"
fi

printf '%s\n' "$list" >"$root/.packages"
rm -rf "$dest"
mv "$root" "$dest"
touch "$dest/.complete"
# Older trees of this architecture are dead weight.
find "$cache" -maxdepth 1 -name "rootfs-$arch-*" ! -name "${dest##*/}" -exec rm -rf {} +
log "$arch userland ready: $(du -sh "$dest" | cut -f1)"
echo "$dest"
