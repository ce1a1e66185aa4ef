#!/usr/bin/env bash
# Runs a command inside a throw-away qemu VM (a Debian 12 kernel, TCG) that has
# two Soft-RoCE devices, rxe0 on veth0 (169.254.77.1) and rxe1 on veth1
# (169.254.77.2), and the host's root file system mounted read-only.
#
# Usage: hack/vm/run.sh [options] -- CMD [ARGS...]
#        hack/vm/run.sh [options] --server 'SERVER CMD' [--server-port PORT] -- CLIENT [ARGS...]
#
#   --timeout SECONDS  kill the VM and fail after this long (default 1800)
#   --cpus N           guest CPUs (default 2)
#   --mem SIZE         guest memory, qemu syntax (default 1G)
#   --rw DIR           also export host directory DIR read-write at the same
#                      path (repeatable); everything else is read-only
#   --arch ARCH        the guest's architecture: amd64 (default) or arm64
#   --bind DIR         arm64 only: also show host directory DIR (read-only)
#                      in the guest (repeatable; see "arm64" below)
#   --server 'CMD'     a server and its client in one VM: start CMD (a bash
#                      command line), wait until it listens (an rdma_cm ID
#                      or TCP socket in LISTEN that was not there before),
#                      run the client (the command after --), then wait for
#                      the server to exit; the status is the client's if it
#                      failed, else the server's. hack/vm/server-client.sh
#                      does it and documents the rest. For example:
#                      run.sh --server 'goverbs rdma_server -p 7471' \
#                             -- goverbs rdma_client -s 169.254.77.1 -p 7471
#   --server-port PORT wait for a listener on PORT only (with --server)
#   -v                 copy the kernel log to stderr while the VM runs
#   --prepare          build everything the VM needs (packages, kernel, siw.ko,
#                      arm64 userland, initramfs) and exit 0 without booting
#                      and without a command: make's bed-* targets run this
#                      once per stage, so that a bed that cannot be built
#                      fails once, with its own error, before any test runs
#   --link MODE:PORT:ADDR  two-host mode (hack/vm/two-host.sh): the guest gets
#                      a virtio-net NIC on a qemu socket netdev that listens
#                      on (MODE listen) or connects to (MODE connect)
#                      127.0.0.1:PORT, with address ADDR (169.254.77.x), and
#                      rxe0 on it instead of veth0/veth1 and rxe0/rxe1;
#                      sch_netem is loaded. amd64, without siw.
#
# Defaults can also come from GOVERBS_VM_TIMEOUT, GOVERBS_VM_CPUS,
# GOVERBS_VM_MEM, GOVERBS_VM_ARCH and GOVERBS_VM_VERBOSE=1 (handy under go
# test -exec).
# GOVERBS_VM_CACHE moves the cache (default <repo>/.cache/vm);
# GOVERBS_KERNEL=6.12|6.1 picks the kernel series (default 6.12, the newest
# build of it) and GOVERBS_KERNEL_PKG an exact package (see fetch-kernel.sh).
# GOVERBS_PROVIDER=siw (or GOVERBS_VM_SIW=1) also builds and loads siw.ko
# (build-siw.sh, cached) and creates siw0 on veth2 (169.254.77.3; veth3 is
# 169.254.77.4); with GOVERBS_PROVIDER=siw the tests get siw0 as their device.
# amd64 only.
# GOVERBS_PROVIDER=pvrdma boots the nested pvrdma bed (hack/vm/pvrdma-outer.sh
# has the details): this VM (the outer guest, --mem default 3G) gets rxe0 on
# veth0 only, ib_umad and no rdma_cm, runs rdmacm-mux and, in qemu 7.2, an
# inner guest with vmxnet3 + pvrdma (vmw_pvrdma.ko from build-pvrdma.sh); CMD
# runs in the inner guest, whose test device is vmw_pvrdma0 on eth0
# (169.254.77.10). amd64 only; the inner's kernel log of the latest run is
# kept at .cache/vm/last-pvrdma-inner-kernel.log.
# GOVERBS_VM_APPEND adds words to the guest kernel's command line (say
# "clocksource=tsc tsc=reliable", to compare a measurement with the
# clocksource the kernel picks itself); not passed to pvrdma's inner guest,
# whose command line takes GOVERBS_VM_INNER_APPEND (pvrdma-outer.sh).
# GOVERBS_VM_PANIC_MARK=FILE: run.sh creates FILE when the guest's kernel
# panicked before CMD reported its status (hack/vm/two-host.sh uses it).
# GOVERBS_VM_LOCK=FILE makes VMs share a lock file: each run holds it shared,
# or exclusively with GOVERBS_VM_LOCK_EXCLUSIVE=1, so a measurement never
# runs beside another VM on the same machine.
#
# CMD runs chrooted into the host root with the caller's working directory,
# stdin from /dev/null, stdout and stderr merged onto run.sh's stdout.
# run.sh exits with CMD's status; 124 if the timeout hit, 125 if the VM failed
# (setup error, kernel panic, no status written). The kernel log of the latest
# run is kept at .cache/vm/last-kernel.log; when CMD died of a signal (status
# above 128: the OOM killer, say) its tail, with the kernel's last messages,
# is printed too.
#
# A guest that has not started CMD GOVERBS_VM_BOOT_TIMEOUT seconds (default
# 300; a boot takes 4 s of guest time, and 66 amd64 boots of a fresh-clone
# run took 3 to 8 s of wall time) after qemu started is stopped and booted again, as one that died
# while booting is (at most 3 boots in all, not in --link mode). When run.sh
# itself is killed (go test's timeout), it prints the kernel log's tail and
# keeps it as .cache/vm/kernel-killed-*.log: where the guest was is the
# evidence.
#
# Guest environment: only HOME, PATH, GOROOT, GOCACHE, GOTRACEBACK, GODEBUG,
# GOMAXPROCS, GOCOVERDIR and GOVERBS_* pass through; then TMPDIR=/tmp,
# GOVERBS_IN_VM=1, GOVERBS_REQUIRE_DEVICE=1, GOVERBS_TEST_DEVICE=rxe0,
# GOVERBS_TEST_NETDEV=veth0, GOVERBS_TEST_ADDR=169.254.77.1 are set.
# /run and /dev/shm are empty guest tmpfs; /tmp shows the host's /tmp with
# writes kept in guest memory (overlayfs), so nothing written there reaches the
# host: use --rw for directories whose changes must come back.
#
# arm64: qemu-system-aarch64 -M virt -cpu max (TCG) boots Debian's arm64
# kernel (6.12 series only). The host's amd64 binaries cannot run there, so
# CMD runs chrooted into an arm64 userland from Debian's packages
# (hack/vm/rootfs.sh: busybox, bash, coreutils, iproute2, rdma-core and its
# tools, util-linux, gcc + librpma-dev) with writes kept in guest memory, and
# only these host directories shown at their own paths: the caller's working
# directory, the repository, the command's directory, /tmp (as above), the
# --rw directories and the --bind ones. CMD itself must be an arm64 (static)
# program or script.
set -euo pipefail
orig_args=("$@")

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${GOVERBS_VM_CACHE:-$repo/.cache/vm}

timeout=${GOVERBS_VM_TIMEOUT:-1800}
boot_timeout=${GOVERBS_VM_BOOT_TIMEOUT:-300}
cpus=${GOVERBS_VM_CPUS:-2}
mem=${GOVERBS_VM_MEM:-1G}
verbose=${GOVERBS_VM_VERBOSE:-0}
arch=${GOVERBS_VM_ARCH:-amd64}
rw_dirs=()
bind_dirs=()
link=
prepare=
server=
server_port=

# Modules the guest needs, in load order; run.sh expands each to its
# dependencies. crc32_generic is no symbol dependency of rdma_rxe (rxe asks the
# crypto API for "crc32" at run time), so it has to be named, and before rxe.
guest_modules=(
	virtio_pci 9pnet_virtio 9p # host root and run directory over virtio-9p
	overlay                    # writable /tmp on top of the host's
	crc32_generic
	ib_core ib_uverbs rdma_cm rdma_ucm
	veth
	rdma_rxe
)
# Bump when the initramfs layout changes in a way the hash below cannot see.
initramfs_format=1

# usage prints the header above; to stdout and status 0 when asked for
# (-h), else to stderr and status 2.
usage() {
	if [[ ${1:-} == help ]]; then
		sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
		exit 0
	fi
	sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" >&2
	exit 2
}
die() {
	printf 'vm: %s\n' "$*" >&2
	exit 125
}

while (($# > 0)); do
	case $1 in
	--timeout) timeout=${2:?--timeout needs a value}; shift 2 ;;
	--timeout=*) timeout=${1#*=}; shift ;;
	--cpus) cpus=${2:?--cpus needs a value}; shift 2 ;;
	--cpus=*) cpus=${1#*=}; shift ;;
	--mem) mem=${2:?--mem needs a value}; shift 2 ;;
	--mem=*) mem=${1#*=}; shift ;;
	--rw) rw_dirs+=("${2:?--rw needs a directory}"); shift 2 ;;
	--rw=*) rw_dirs+=("${1#*=}"); shift ;;
	--arch) arch=${2:?--arch needs a value}; shift 2 ;;
	--arch=*) arch=${1#*=}; shift ;;
	--bind) bind_dirs+=("${2:?--bind needs a directory}"); shift 2 ;;
	--bind=*) bind_dirs+=("${1#*=}"); shift ;;
	--server) server=${2:?--server needs a command}; shift 2 ;;
	--server=*) server=${1#*=}; shift ;;
	--server-port) server_port=${2:?--server-port needs a port}; shift 2 ;;
	--server-port=*) server_port=${1#*=}; shift ;;
	-v) verbose=1; shift ;;
	--prepare) prepare=1; shift ;;
	--link) link=${2:?--link needs MODE:PORT:ADDR}; shift 2 ;;
	--link=*) link=${1#*=}; shift ;;
	-h | --help) usage help ;;
	--) shift; break ;;
	*) echo "vm: unknown option $1 (the command goes after --)" >&2; usage ;;
	esac
done
(($# > 0)) || [[ -n $prepare ]] || usage
[[ -z $server_port || -n $server ]] || die "--server-port needs --server"
if [[ -n $server ]]; then
	set -- "$here/server-client.sh" ${server_port:+--port "$server_port"} --server "$server" -- "$@"
fi
[[ $timeout =~ ^[0-9]+$ && $timeout -gt 0 ]] || die "--timeout wants seconds, got '$timeout'"
[[ $boot_timeout =~ ^[0-9]+$ && $boot_timeout -gt 0 ]] || die "GOVERBS_VM_BOOT_TIMEOUT wants seconds, got '$boot_timeout'"
[[ $cpus =~ ^[0-9]+$ && $cpus -gt 0 ]] || die "--cpus wants a number, got '$cpus'"

"$here/install-deps.sh" || die "missing packages; run hack/vm/install-deps.sh as root"

# ------------------------------------------------------------ architecture --

# userland: the guest's own root file system ("" = the host root);
# busybox: the initramfs' (static) busybox; out_dev: where the command's
# output leaves the guest.
case $arch in
amd64)
	qemu_arch=(qemu-system-x86_64 -accel tcg -cpu max)
	console=ttyS0
	out_dev=/dev/ttyS1
	userland=
	busybox=/bin/busybox
	;;
arm64)
	[[ ${GOVERBS_KERNEL:-6.12} == 6.12 ]] ||
		die "GOVERBS_KERNEL=$GOVERBS_KERNEL: the arm64 test bed runs the 6.12 kernel only"
	# pauth-impdef: -cpu max emulates pointer authentication with the
	# architected QARMA cipher, which TCG computes in software on every
	# signed return; qemu's own cheap algorithm keeps the feature (the
	# kernel and Go see the same CPU) at a fraction of the cost (guest
	# boot to command exit: 32 s -> 8 s in one measurement here).
	qemu_arch=(qemu-system-aarch64 -M virt -accel tcg -cpu max,pauth-impdef=on)
	console=ttyAMA0
	out_dev=/dev/hvc0
	userland=$("$here/rootfs.sh" arm64) || die "cannot build the arm64 userland (hack/vm/rootfs.sh)"
	busybox=$userland/usr/bin/busybox
	;;
*) die "--arch $arch: the test bed knows amd64 and arm64" ;;
esac
((${#bind_dirs[@]} == 0)) || [[ -n $userland ]] ||
	die "--bind is for a guest with its own userland (arm64); the $arch guest sees the whole host root"
export GOVERBS_VM_ARCH=$arch # for fetch-kernel.sh

kdir=$("$here/fetch-kernel.sh") || die "cannot fetch the kernel (hack/vm/fetch-kernel.sh)"
kver=$(<"$kdir/version")

# soft-iWARP: Debian builds no siw.ko; build-siw.sh adds one to the tree.
siw=
if [[ ${GOVERBS_PROVIDER:-} == siw || ${GOVERBS_VM_SIW:-0} == 1 ]]; then
	[[ $arch == amd64 ]] || die "siw: the $arch test bed has no siw.ko (build-siw.sh builds for amd64 kernels)"
	"$here/build-siw.sh" "$kdir" || die "cannot build siw.ko for $kver (hack/vm/build-siw.sh)"
	siw=1
	# crc32c for siw's MPA CRC is asked for by name at run time, like
	# crc32_generic for rxe.
	guest_modules+=(crc32c_generic siw)
fi

# pvrdma: the outer guest lends rxe0 to qemu's pvrdma backend. rdmacm-mux
# takes rxe0's MADs through ib_umad, so ib_cm and rdma_cm must stay unloaded
# (rdma_cm pulls ib_cm in). The inner guest gets its own initramfs.
pvrdma=
if [[ ${GOVERBS_PROVIDER:-} == pvrdma ]]; then
	[[ $arch == amd64 && -z $siw && -z $link ]] || die "pvrdma: amd64 only, without siw and --link"
	pvrdma_mux=$("$here/build-pvrdma.sh" "$kdir") || die "cannot build vmw_pvrdma.ko/rdmacm-mux for $kver (hack/vm/build-pvrdma.sh)"
	pvrdma=1
	outer=()
	for m in "${guest_modules[@]}"; do
		case $m in rdma_cm | rdma_ucm) ;; *) outer+=("$m") ;; esac
	done
	guest_modules=("${outer[@]}" ib_umad)
	inner_modules=(
		virtio_pci 9pnet_virtio 9p overlay
		vmxnet3
		ib_core ib_uverbs rdma_cm rdma_ucm
		vmw_pvrdma
	)
	mem=${GOVERBS_VM_MEM:-3G}
fi

# Two-host mode: a NIC joined to another VM through 127.0.0.1 only.
if [[ -n $link ]]; then
	[[ $link =~ ^(listen|connect):([0-9]+):(169\.254\.77\.([0-9]+))$ ]] ||
		die "--link $link: want listen|connect:PORT:169.254.77.N"
	link_mode=${BASH_REMATCH[1]} link_port=${BASH_REMATCH[2]} link_addr=${BASH_REMATCH[3]}
	link_host=${BASH_REMATCH[4]}
	((link_host > 0 && link_host < 255 && link_port > 0 && link_port < 65536)) || die "--link $link: bad port or address"
	[[ $arch == amd64 && -z $siw ]] || die "--link: amd64 and rxe only"
	guest_modules+=(virtio_net sch_netem)
fi

# ------------------------------------------------------------------- kernel --

# qemu can boot the uncompressed vmlinux through its PVH entry point
# (CONFIG_PVH), which skips the in-guest decompression of the bzImage: that
# takes ~3 s under TCG, half of the whole boot. Extracted once and cached.
extract_vmlinux() {
	local vmlinuz=$1 out=$2 magic cmd off
	case $(grep -E '^CONFIG_KERNEL_(XZ|ZSTD|GZIP)=y' "$kdir/boot/config-$kver" || true) in
	*XZ*) magic=$'\xfd7zXZ' cmd=(xz -dc --single-stream) ;;
	*ZSTD*) magic=$'\x28\xb5\x2f\xfd' cmd=(zstd -qdc) ;;
	*GZIP*) magic=$'\x1f\x8b\x08' cmd=(gzip -dc) ;;
	*) return 1 ;;
	esac
	grep -q '^CONFIG_PVH=y' "$kdir/boot/config-$kver" || return 1
	# The compressed payload follows the setup code; its first occurrence of
	# the format's magic is its start. Trailing bytes are ignored or warned
	# about by the decompressors, hence the ELF check instead of the status.
	off=$(LC_ALL=C grep -abo -m1 "$magic" "$vmlinuz" | head -n1 | cut -d: -f1) || return 1
	[[ -n $off ]] || return 1
	tail -c +"$((off + 1))" "$vmlinuz" | "${cmd[@]}" >"$out.tmp.$$" 2>/dev/null || true
	if [[ $(head -c 4 "$out.tmp.$$" | od -An -c | tr -d ' ') != 177ELF ]]; then
		rm -f "$out.tmp.$$"
		return 1
	fi
	mv "$out.tmp.$$" "$out"
}
kernel=$kdir/boot/vmlinuz-$kver
# (arm64's vmlinuz is an uncompressed Image already.)
if [[ $arch == amd64 ]] &&
	{ [[ -s $kdir/boot/vmlinux-$kver ]] || extract_vmlinux "$kernel" "$kdir/boot/vmlinux-$kver"; }; then
	kernel=$kdir/boot/vmlinux-$kver
fi

# ---------------------------------------------------------------- initramfs --

# Prints the ordered, de-duplicated module files (relative to the modules
# directory) for guest_modules, skipping built-in ones. modprobe --show-depends
# on the unpacked tree gives the dependency order without loading anything;
# -C /dev/null keeps the host's modprobe.d options out of the guest.
module_files() {
	local m line path seen=" "
	for m in "$@"; do
		modprobe -C /dev/null -d "$kdir" -S "$kver" --show-depends "$m" ||
			die "module $m not found in $kver"
	done | while read -r line; do
		case $line in
		insmod\ *) ;;
		*) continue ;; # "builtin NAME": nothing to load
		esac
		path=${line#insmod }
		path=${path%% *} # drop module options
		path=${path#"$kdir"/}
		path=${path#./}
		path=${path#lib/modules/"$kver"/}
		[[ $seen == *" $path "* ]] && continue
		seen+="$path "
		echo "$path"
	done
}

build_initramfs() {
	local out=$1 modlist=$2 stage f name
	stage=$(mktemp -d "$cache/.initramfs.XXXXXX")
	# shellcheck disable=SC2064 # expand now: $stage is local
	trap "rm -rf '$stage'" RETURN
	mkdir -p "$stage"/{bin,dev,proc,sys,host,hostrun,modules}
	cp "$busybox" "$stage/bin/busybox"
	install -m 0755 "$here/init" "$stage/init"
	while read -r f; do
		name=${f##*/}
		# busybox insmod reads plain ELF only, so decompress on the host.
		case $f in
		*.ko.xz) name=${name%.xz}; xz -dc "$kdir/lib/modules/$kver/$f" >"$stage/modules/$name" ;;
		*.ko.zst) name=${name%.zst}; zstd -qdc "$kdir/lib/modules/$kver/$f" >"$stage/modules/$name" ;;
		*.ko.gz) name=${name%.gz}; gzip -dc "$kdir/lib/modules/$kver/$f" >"$stage/modules/$name" ;;
		*.ko) cp "$kdir/lib/modules/$kver/$f" "$stage/modules/$name" ;;
		*) die "unexpected module file $f" ;;
		esac
		echo "$name" >>"$stage/modules/order"
	done <<<"$modlist"
	# Uncompressed: the kernel would spend longer inflating it under TCG than
	# qemu spends loading a few extra megabytes.
	(cd "$stage" && find . -mindepth 1 -print0 | LC_ALL=C sort -z |
		cpio --null --quiet -o -H newc --reproducible) >"$out.tmp.$$"
	mv "$out.tmp.$$" "$out"
}

# busybox from the non-static "busybox" package would need a libc the
# initramfs does not have (ldd fails on static executables). The arm64 one
# comes from busybox-static by construction (and ldd cannot read it here).
if [[ $arch == amd64 ]] && LC_ALL=C ldd "$busybox" >/dev/null 2>&1; then
	die "$busybox is dynamically linked; install busybox-static"
fi
# Prints the path of the (cached) initramfs of flavor $1 with modules $2...
initramfs_for() {
	local flavor=$1 modlist key out stale
	shift
	modlist=$(module_files "$@")
	[[ -n $modlist ]] || die "no modules resolved for $kver"
	key=$({
		echo "format $initramfs_format"
		cat "$here/init"
		echo "$modlist"
		sha256sum <"$busybox"
	} | sha256sum | cut -c1-16)
	out=$cache/initramfs-$flavor-$key.cpio
	if [[ ! -s $out ]]; then
		build_initramfs "$out" "$modlist"
		# Older builds for this kernel are dead weight (a VM still booting from
		# one has it open); other kernels' and flavors' images stay.
		stale=(-name "initramfs-$flavor-*.cpio" ! -name "${out##*/}")
		for f in siw link pvrdma pvrdma-inner; do
			[[ $flavor == "$kver-$f" ]] || stale+=(! -name "initramfs-$kver-$f-*")
		done
		find "$cache" -maxdepth 1 "${stale[@]}" -delete
	fi
	echo "$out"
}
flavor=$kver${siw:+-siw} # with and without siw: two images, both kept
[[ -z $link ]] || flavor=$kver-link
[[ -z $pvrdma ]] || flavor=$kver-pvrdma
initramfs=$(initramfs_for "$flavor" "${guest_modules[@]}") || exit
[[ -z $pvrdma ]] || inner_initramfs=$(initramfs_for "$kver-pvrdma-inner" "${inner_modules[@]}") || exit

if [[ -n $prepare ]]; then
	printf 'vm: bed ready: %s kernel %s%s%s, initramfs %s%s%s\n' "$arch" "$kver" "${siw:+ with siw.ko}" \
		"${pvrdma:+ with vmw_pvrdma.ko}" "${initramfs##*/}" "${pvrdma:+ and ${inner_initramfs##*/}}" \
		"${userland:+, userland ${userland##*/}}" >&2
	exit 0
fi

# ------------------------------------------------------------------ the run --

mkdir -p "$cache"
run=$(mktemp -d "${TMPDIR:-/tmp}/goverbs-vm.XXXXXX")
run=$(realpath "$run")
trap 'rm -rf "$run"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP QUIT

# Read-write exports: canonical paths (the guest mounts them before the
# chroot, where a symlink in the path would resolve wrongly), and none that
# lies inside another one (it is writable already, and mounting it separately
# could hide files written through the outer one).
rw_canon=()
for d in "${rw_dirs[@]}"; do
	[[ -d $d ]] || die "--rw $d: not a directory"
	d=$(realpath "$d")
	[[ $d != / ]] || die "--rw /: refusing to export the whole root read-write"
	rw_canon+=("$d")
done
rw_final=()
if ((${#rw_canon[@]} > 0)); then
	while IFS= read -r d; do
		for p in "${rw_final[@]}"; do
			[[ $d == "$p" || $d == "$p"/* ]] && continue 2
		done
		rw_final+=("$d")
	done < <(printf '%s\n' "${rw_canon[@]}" | LC_ALL=C sort -u)
fi
# A guest with its own userland sees only the host directories the command
# needs: the working directory, the repository, the command's own directory
# and --bind ones.
binds=()
if [[ -n $userland ]]; then
	cands=("$PWD" "$repo" "${bind_dirs[@]}")
	[[ $1 != /* ]] || cands+=("$(dirname "$1")")
	for d in "${cands[@]}"; do
		[[ -d $d ]] || die "--bind $d: not a directory"
		binds+=("$(realpath "$d")")
	done
fi
{
	echo "run $run"
	[[ -z $siw ]] || echo "siw 1"
	[[ -z $pvrdma ]] || echo "pvrdma outer"
	[[ -z $link ]] || echo "link $link_addr"
	i=0
	for d in "${rw_final[@]}"; do
		echo "rw rw$i $d"
		i=$((i + 1))
	done
	if [[ -n $userland ]]; then
		echo userland
		echo "out $out_dev"
		# Parents before children, so a child's bind lands on top.
		printf 'bind %s\n' "${binds[@]}" | LC_ALL=C sort -u
	fi
} >"$run/meta"

# cmd.sh is run by the host's bash inside the guest chroot with an empty
# environment; %q quoting round-trips any argument bytes through bash.
# $1 is the provider: the test device's lines differ.
write_cmd() {
	local provider=$1
	shift
	echo '# generated by hack/vm/run.sh'
	while IFS= read -r name; do
		case $name in
		HOME | PATH | GOROOT | GOCACHE | GOTRACEBACK | GODEBUG | GOMAXPROCS | GOCOVERDIR | GOVERBS_*)
			printf 'export %s=%q\n' "$name" "${!name}"
			;;
		esac
	done < <(compgen -e)
	[[ -n ${PATH:-} ]] || echo 'export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
	echo 'export TMPDIR=/tmp GOVERBS_IN_VM=1 GOVERBS_REQUIRE_DEVICE=1'
	if [[ -n $link ]]; then
		echo "export GOVERBS_TEST_DEVICE=rxe0 GOVERBS_TEST_NETDEV=eth0 GOVERBS_TEST_ADDR=$link_addr"
	elif [[ $provider == pvrdma ]]; then
		echo 'export GOVERBS_TEST_DEVICE=vmw_pvrdma0 GOVERBS_TEST_NETDEV=eth0 GOVERBS_TEST_ADDR=169.254.77.10'
	elif [[ $provider == siw ]]; then
		echo 'export GOVERBS_TEST_DEVICE=siw0 GOVERBS_TEST_NETDEV=veth2 GOVERBS_TEST_ADDR=169.254.77.3'
	else
		echo 'export GOVERBS_TEST_DEVICE=rxe0 GOVERBS_TEST_NETDEV=veth0 GOVERBS_TEST_ADDR=169.254.77.1'
	fi
	# MRs pin memory, so RDMA hosts run with an unlimited memlock limit; root
	# would bypass the limit anyway, but code that reads it should see the same.
	echo 'ulimit -l unlimited'
	printf 'cd -- %q || { echo "vm: cannot cd to %q in the guest" >&2; exit 125; }\n' "$PWD" "$PWD"
	printf 'exec'
	printf ' %q' "$@"
	printf '\n'
}
if [[ -n $pvrdma ]]; then
	# The outer guest runs pvrdma-outer.sh (as root, from the repository it
	# came from); the inner guest runs inner-cmd.sh, the command.
	write_cmd rxe "$here/pvrdma-outer.sh" --run "$run" --kernel "$kernel" --initrd "$inner_initramfs" \
		--mux "$pvrdma_mux" --timeout "$((timeout > 120 ? timeout - 60 : timeout))" >"$run/cmd.sh"
	write_cmd pvrdma "$@" >"$run/inner-cmd.sh"
else
	write_cmd "${GOVERBS_PROVIDER:-rxe}" "$@" >"$run/cmd.sh"
fi

# qemu option values are comma-separated; a comma inside a path is doubled.
qpath() { printf '%s' "${1//,/,,}"; }

virtfs=(
	-virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap"
	-virtfs "local,path=$(qpath "$run"),mount_tag=hostrun,security_model=none,multidevs=remap"
)
while read -r _ tag d; do
	virtfs+=(-virtfs "local,path=$(qpath "$d"),mount_tag=$tag,security_model=none,multidevs=remap")
done < <(grep '^rw ' "$run/meta" || true)
[[ -z $userland ]] ||
	virtfs+=(-virtfs "local,path=$(qpath "$userland"),mount_tag=userland,security_model=none,readonly=on,multidevs=remap")

# ttyS0 is the console (firmware, kernel, init), kept in a file; ttyS1 carries
# only the command's output to our stdout. The firmware always talks to the
# first port, so the command's port must be the second. With -v the console
# goes to stderr as it happens, and qemu itself still copies it to the file.
# no_timer_check: under TCG on a loaded host the timer can tick too slowly
# for the kernel's IO-APIC timer check, which then panics ("IO-APIC + timer
# doesn't work!", seen with 6.12 while other VMs ran); a VM's timer needs
# no such check.
append="console=$console panic=-1 oops=panic no_timer_check${GOVERBS_VM_APPEND:+ $GOVERBS_VM_APPEND}"
if [[ $verbose == 1 ]]; then
	append+=" loglevel=7"
	klog_dev=(-chardev "file,id=klog,path=/dev/stderr,append=on,logfile=$(qpath "$run/kernel.log")")
else
	append+=" quiet"
	klog_dev=(-chardev "file,id=klog,path=$(qpath "$run/kernel.log")")
fi

# arm64's virt machine has one UART (the console): the command's output
# leaves through a virtio console instead.
case $out_dev in
/dev/ttyS1) out_port=(-serial chardev:out) ;;
/dev/hvc0) out_port=(-device virtio-serial-pci -device virtconsole,chardev=out) ;;
esac
qemu=(
	"${qemu_arch[@]}"
	-smp "$cpus" -m "$mem"
	-nographic -nodefaults -no-user-config -no-reboot -nic none
	-kernel "$(qpath "$kernel")" -initrd "$(qpath "$initramfs")" -append "$append"
	"${klog_dev[@]}" -serial chardev:klog
	-chardev "stdio,id=out,signal=off" "${out_port[@]}"
	-monitor none
	"${virtfs[@]}"
)
[[ -z $link ]] || qemu+=(
	-netdev "socket,id=link0,$link_mode=127.0.0.1:$link_port"
	-device "virtio-net-pci,netdev=link0,mac=52:54:00:77:00:$(printf %02x "$link_host")"
)

# qboot (shipped with qemu) starts the kernel ~0.3 s sooner than SeaBIOS and
# prints nothing on the console.
qboot=/usr/share/qemu/qboot.rom
[[ $arch != amd64 || ! -f $qboot ]] || qemu+=(-bios "$qboot")

# If run.sh itself is killed (go test's own timeout kills only its direct
# child, which is us), the VM must not live on: the parent-death signal makes
# timeout pass a SIGTERM on to qemu. setpriv is in util-linux (Essential).
guard=()
command -v setpriv >/dev/null && guard=(setpriv --pdeathsig TERM)

if [[ -n ${GOVERBS_VM_LOCK:-} ]]; then
	exec 8>>"$GOVERBS_VM_LOCK"
	if [[ ${GOVERBS_VM_LOCK_EXCLUSIVE:-0} == 1 ]]; then flock -x 8; else flock -s 8; fi
fi

# A crash's kernel log is kept under its own name too: the next VM (two-host
# runs two) overwrites last-kernel.log, and the head of an oops is the part
# that names the bug.
keep_klog() {
	[[ -f $run/kernel.log ]] || return 0
	klog=$cache/kernel-crash-$(date +%Y%m%d-%H%M%S)-$$.log
	cp "$run/kernel.log" "$klog"
}

show_klog_tail() {
	[[ -f $run/kernel.log ]] || return 0
	# From the first oops marker when there is one (its head names the bug),
	# else the tail.
	local first
	first=$(grep -n -m1 -E 'BUG:|Oops:|general protection fault|kernel BUG' "$run/kernel.log" | cut -d: -f1 || true)
	if [[ -n $first ]]; then
		echo "vm: kernel log from line $first:" >&2
		tail -n "+$first" "$run/kernel.log" | head -n 120 | sed 's/^/vm:   /' >&2
		return 0
	fi
	echo "vm: last kernel log lines:" >&2
	tail -n 40 "$run/kernel.log" | sed 's/^/vm:   /' >&2
}

# cmd_started reports whether the guest has started the command.
cmd_started() {
	grep -q 'goverbs-init: .* running the command' "$run/kernel.log" 2>/dev/null
}

# killed is the INT/TERM/HUP/QUIT trap while qemu runs: stop qemu and
# leave the evidence of where the guest was (go test's timeout kills
# run.sh, and the test binary's output may hold nothing).
killed() {
	kill -TERM "$qpid" "${wpid:-}" 2>/dev/null || true
	wait "$qpid" || true
	if [[ -f $run/kernel.log ]]; then
		klog=$cache/kernel-killed-$(date +%Y%m%d-%H%M%S)-$$.log
		cp "$run/kernel.log" "$klog"
		if cmd_started; then
			echo "vm: killed after $((SECONDS - start)) s, while the command ran; kernel log: $klog" >&2
		else
			echo "vm: killed after $((SECONDS - start)) s, before the command ran (the guest was booting); kernel log: $klog" >&2
		fi
		show_klog_tail
	fi
	exit "$1"
}

start=$SECONDS
# Backgrounded and waited for, because bash runs traps only after a
# foreground child exits; `wait` returns at once when a signal arrives.
# --foreground keeps qemu in our process group so ^C reaches it too.
"${guard[@]}" timeout --foreground -k 10 "$timeout" "${qemu[@]}" </dev/null &
qpid=$!
trap 'killed 130' INT
trap 'killed 143' TERM HUP QUIT
# The boot watchdog: stops a guest that has not started the command in
# boot_timeout seconds (a boot hang; what follows boots it again).
(
	trap - INT TERM HUP QUIT
	for ((i = 0; i < boot_timeout; i++)); do
		sleep 1
		kill -0 "$qpid" 2>/dev/null || exit 0
		cmd_started && exit 0
	done
	echo "$boot_timeout" >"$run/boot-hang"
	kill -TERM "$qpid" 2>/dev/null
) &
wpid=$!
qrc=0
wait "$qpid" || qrc=$?
trap - INT TERM HUP QUIT
kill "$wpid" 2>/dev/null || true
wait "$wpid" 2>/dev/null || true
elapsed=$((SECONDS - start))

if [[ -f $run/kernel.log ]]; then
	cp "$run/kernel.log" "$cache/.last-kernel.log.$$"
	mv -f "$cache/.last-kernel.log.$$" "$cache/last-kernel.log"
fi
klog=$cache/last-kernel.log
if [[ -f $run/inner-kernel.log ]]; then
	cp "$run/inner-kernel.log" "$cache/.last-pvrdma-inner-kernel.log.$$"
	mv -f "$cache/.last-pvrdma-inner-kernel.log.$$" "$cache/last-pvrdma-inner-kernel.log"
fi

if [[ ! -s $run/kernel.log && ! -f $run/rc && ! -f $run/boot-hang ]]; then
	echo "vm: qemu failed to start (status $qrc); see its messages above" >&2
	exit 125
fi
# 137: qemu ignored timeout's SIGTERM and got the SIGKILL 10 s later.
if ((qrc == 124 || (qrc == 137 && elapsed >= timeout))); then
	keep_klog
	echo "vm: timed out after ${timeout}s; qemu killed. Kernel log: $klog" >&2
	show_klog_tail
	exit 124
fi
if [[ -f $run/setup-error ]]; then
	echo "vm: guest setup failed: $(<"$run/setup-error"). Kernel log: $klog" >&2
	show_klog_tail
	exit 125
fi
if [[ ! -f $run/rc ]]; then
	keep_klog
	# A guest that died before it ran the command (seen: an int3 oops in
	# 6.12's boot-time code patching under TCG, "Oops: int3" at ~1.5 s) ran
	# nothing of ours: boot it again, at most twice, and say so. Not in
	# two-host mode, whose peer is already waiting on the link.
	boot_try=${GOVERBS_VM_BOOT_TRY:-1}
	how="died while booting"
	[[ ! -f $run/boot-hang ]] || how="had not started the command after $(<"$run/boot-hang") s (a boot hang; stopped)"
	if [[ -z $link ]] && ((boot_try < 3)) && ! cmd_started; then
		echo "vm: the guest $how, before the command ran (attempt $boot_try); kernel log: $klog; booting again" >&2
		show_klog_tail
		rm -rf "$run"
		trap - EXIT
		GOVERBS_VM_BOOT_TRY=$((boot_try + 1)) exec "${BASH_SOURCE[0]}" "${orig_args[@]}"
	fi
	[[ ! -f $run/boot-hang ]] || echo "vm: the guest $how" >&2
	# The guest's kernel, not the command, ended the run (every oops panics:
	# oops=panic). GOVERBS_VM_PANIC_MARK: a file to create then
	# (hack/vm/two-host.sh runs the command again once).
	if grep -q 'Kernel panic - not syncing' "$run/kernel.log" 2>/dev/null; then
		[[ -z ${GOVERBS_VM_PANIC_MARK:-} ]] || : >"$GOVERBS_VM_PANIC_MARK"
		echo "vm: the guest kernel panicked after ${elapsed}s, before the command reported" \
			"an exit status (qemu status $qrc). Kernel log: $klog" >&2
	else
		echo "vm: the guest stopped after ${elapsed}s without reporting an exit status" \
			"(qemu status $qrc; kernel panic or crash?). Kernel log: $klog" >&2
	fi
	show_klog_tail
	exit 125
fi
rc=$(<"$run/rc")
[[ $rc =~ ^[0-9]+$ ]] || die "garbled exit status '$rc' from the guest"
if ((rc > 128)); then
	keep_klog
	echo "vm: the command died of signal $((rc - 128)) (status $rc). Kernel log: $klog" >&2
	show_klog_tail
fi
exit "$rc"
