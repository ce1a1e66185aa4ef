#!/usr/bin/env bash
# The outer guest's half of the nested pvrdma test bed; run.sh runs it as the
# outer guest's command when GOVERBS_PROVIDER=pvrdma, never by hand.
#
# qemu's pvrdma device forwards every verb to an ibverbs device of the machine
# that runs qemu, and the host has no RDMA: so the outer guest (rxe0 on veth0,
# ib_umad, no ib_cm/rdma_cm) runs qemu 7.2 once more, for an inner guest with
# a vmxnet3 NIC (PCI function 0, the pairing the device model insists on) and
# the pvrdma device (function 1) backed by rxe0. The inner guest boots the
# same kernel with vmw_pvrdma.ko, mounts this guest's root (the host's, over
# a second 9p hop) and runs the command (run.sh's inner-cmd.sh).
#
# Usage: pvrdma-outer.sh --run DIR --kernel FILE --initrd FILE --mux FILE --timeout SECONDS
#   --run      run.sh's run directory (meta, inner-cmd.sh; the inner's kernel
#              log is copied there as inner-kernel.log)
#   --kernel   the kernel to boot (the outer's)
#   --initrd   the inner initramfs (run.sh builds it: vmxnet3, vmw_pvrdma, ...)
#   --mux      the rdmacm-mux binary (build-pvrdma.sh)
#   --timeout  kill the inner guest after this long
#
# Before the inner boots: rdmacm-mux on rxe0 port 1 (qemu's MAD chardev must
# be connected to it, or the device does not load and every guest GID add
# blocks), and the inner's addresses on veth0, because qemu maps each guest
# GID to the first rxe0 GID equal to it byte for byte: the inner's IPv4
# (::ffff:169.254.77.10) and its fe80 link-local address, the EUI-64 of the
# vmxnet3 MAC (qemu 7.2 looks up the backend index of guest GID 0 on every
# send, for every QP type, and loops forever without it). The vmxnet3's user
# netdev has ipv6=off, so no third (fec0) GID appears that rdmacm-mux would
# refuse as a duplicate.
#
# GOVERBS_VM_INNER_APPEND (exported to this guest by run.sh, as every
# GOVERBS_ variable is) adds words to the inner kernel's command line: say
# "clocksource=tsc tsc=reliable", to measure the inner guest on the TSC
# instead of the HPET its kernel picks under TCG.
#
# Exit status: the command's, or 125 if the inner guest failed before it
# reported one (setup error, panic, timeout).
set -euo pipefail

run= kernel= initrd= mux= timeout=
while (($# > 0)); do
	case $1 in
	--run) run=$2; shift 2 ;;
	--kernel) kernel=$2; shift 2 ;;
	--initrd) initrd=$2; shift 2 ;;
	--mux) mux=$2; shift 2 ;;
	--timeout) timeout=$2; shift 2 ;;
	*) echo "pvrdma-outer: unknown argument $1" >&2; exit 2 ;;
	esac
done
[[ -n $run && -n $kernel && -n $initrd && -n $mux && -n $timeout ]] || {
	echo "pvrdma-outer: --run, --kernel, --initrd, --mux and --timeout are all required" >&2
	exit 2
}

log() { printf 'pvrdma-outer: [%ss] %s\n' "$SECONDS" "$*" >&2; }
die() {
	log "error: $*"
	exit 125
}

inner_addr=169.254.77.10
inner_mac=52:54:00:aa:bb:01
# fe80 EUI-64 of inner_mac: the universal/local bit flipped, ff:fe inserted.
inner_ll=fe80::5054:ff:feaa:bb01

[[ -e /sys/class/infiniband/rxe0 ]] || die "no rxe0 in the outer guest"
[[ ! -e /sys/module/rdma_cm && ! -e /sys/module/ib_cm ]] ||
	die "ib_cm/rdma_cm are loaded in the outer guest; rdmacm-mux needs rxe0's MADs"

ip addr add "$inner_addr/24" dev veth0
ip -6 addr add "$inner_ll/64" dev veth0 nodad

mux_log=/tmp/rdmacm-mux.log
"$mux" -d rxe0 -p 1 -s /tmp/rdmacm-mux >"$mux_log" 2>&1 &
mux_pid=$!
inner=
cleanup() {
	kill "$mux_pid" 2>/dev/null || true
	[[ -z $inner ]] || rm -rf "$inner"
}
trap cleanup EXIT
sock=/tmp/rdmacm-mux-rxe0-1
for ((i = 0; i < 100; i++)); do
	[[ -S $sock ]] && break
	kill -0 "$mux_pid" 2>/dev/null || { cat "$mux_log" >&2; die "rdmacm-mux exited"; }
	sleep 0.1
done
[[ -S $sock ]] || die "rdmacm-mux did not create $sock in 10 s"

# rxe0 must have taken both addresses as GIDs before the inner adds its own.
for ((i = 0; i < 100; i++)); do
	gids=$(cat /sys/class/infiniband/rxe0/ports/1/gids/* 2>/dev/null)
	grep -q '0000:0000:0000:0000:0000:ffff:a9fe:4d0a' <<<"$gids" &&
		grep -q 'fe80:0000:0000:0000:5054:00ff:feaa:bb01' <<<"$gids" && break
	sleep 0.1
done
((i < 100)) || die "rxe0 has no GIDs for $inner_addr and $inner_ll: $(echo $gids)"
log "rdmacm-mux up, rxe0 GIDs in place"

# The inner guest's run directory lives in this guest's memory (/tmp); the
# read-write exports of the outer (test binary directory and the like) are
# passed on at the same paths and tags.
inner=$(mktemp -d /tmp/pvrdma-inner.XXXXXX)
cp "$run/inner-cmd.sh" "$inner/cmd.sh"
{
	echo "run $inner"
	echo "pvrdma inner $inner_addr"
	grep '^rw ' "$run/meta" || true
} >"$inner/meta"

qpath() { printf '%s' "${1//,/,,}"; }
virtfs=(
	-virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap"
	-virtfs "local,path=$(qpath "$inner"),mount_tag=hostrun,security_model=none,multidevs=remap"
)
# (No process substitution: the guest's /dev has no /dev/fd.)
rw_lines=$(grep '^rw ' "$inner/meta" || true)
while read -r _ tag d; do
	[[ -n $tag ]] || continue
	virtfs+=(-virtfs "local,path=$(qpath "$d"),mount_tag=$tag,security_model=none,multidevs=remap")
done <<<"$rw_lines"

# Both levels run TCG (the CPUs offer no vmx/svm to the outer guest). The
# device model wants guest RAM in a shared memory backend (it maps guest
# memory for rxe0's MRs). tb-size: TCG's default 1 GiB code cache would not
# fit beside the inner's RAM.
qemu=(
	qemu-system-x86_64 -accel tcg,tb-size=256 -smp 2 -m 1G
	-object memory-backend-ram,id=mb1,size=1G,share=on -numa node,memdev=mb1
	-nographic -nodefaults -no-user-config -no-reboot
	-kernel "$(qpath "$kernel")" -initrd "$(qpath "$initrd")"
	-append "console=ttyS0 panic=-1 oops=panic no_timer_check quiet${GOVERBS_VM_INNER_APPEND:+ $GOVERBS_VM_INNER_APPEND}"
	-chardev "file,id=klog,path=$(qpath "$inner/kernel.log")" -serial chardev:klog
	-chardev "stdio,id=out,signal=off" -serial chardev:out
	-monitor none
	-netdev user,id=n0,restrict=on,ipv6=off
	-device "vmxnet3,netdev=n0,addr=10.0,multifunction=on,mac=$inner_mac"
	-chardev "socket,path=$sock,id=mads"
	-device pvrdma,addr=10.1,ibdev=rxe0,netdev=veth0,mad-chardev=mads
	"${virtfs[@]}"
)
[[ ! -f /usr/share/qemu/qboot.rom ]] || qemu+=(-bios /usr/share/qemu/qboot.rom)

# A guest that dies before it runs the command ran nothing of ours (as in
# run.sh: seen here, 6.12's inner guest double-faulting in start_kernel under
# TCG in TCG): boot it again, at most twice, and say so.
start=$SECONDS
for attempt in 1 2 3; do
	log "booting the inner guest (attempt $attempt)"
	rm -f "$inner/kernel.log"
	qrc=0
	timeout -k 10 "$((timeout - (SECONDS - start)))" "${qemu[@]}" </dev/null || qrc=$?
	log "inner guest stopped (qemu status $qrc)"
	[[ ! -f $inner/kernel.log ]] || cp "$inner/kernel.log" "$run/inner-kernel.log"
	[[ ! -f $inner/rc && ! -f $inner/setup-error && $qrc != 124 ]] || break
	grep -q 'goverbs-init: .* running the command' "$inner/kernel.log" 2>/dev/null && break
	((attempt == 3)) && break
	log "the inner guest died while booting, before the command ran; last kernel log lines:"
	tail -n 12 "$inner/kernel.log" 2>/dev/null | sed 's/^/pvrdma-outer:   /' >&2 || true
	((timeout - (SECONDS - start) > 60)) || break
done

show_klog() {
	[[ -f $inner/kernel.log ]] || return 0
	echo "pvrdma-outer: last lines of the inner kernel log:" >&2
	tail -n 40 "$inner/kernel.log" | sed 's/^/pvrdma-outer:   /' >&2
	if [[ -s $mux_log ]]; then
		echo "pvrdma-outer: rdmacm-mux said:" >&2
		tail -n 20 "$mux_log" | sed 's/^/pvrdma-outer:   /' >&2
	fi
}
if [[ -f $inner/setup-error ]]; then
	show_klog
	die "inner guest setup failed: $(<"$inner/setup-error")"
fi
if [[ ! -f $inner/rc ]]; then
	show_klog
	((qrc != 124)) || die "inner guest timed out after ${timeout}s"
	die "the inner guest stopped without reporting an exit status (qemu status $qrc)"
fi
rc=$(<"$inner/rc")
[[ $rc =~ ^[0-9]+$ ]] || die "garbled exit status '$rc' from the inner guest"
exit "$rc"
