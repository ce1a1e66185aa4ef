#!/usr/bin/env bash
# Manages Soft-RoCE (rxe) devices on a real machine, for running goverbs'
# tests and examples without RDMA hardware. (The VM test bed, hack/vm/run.sh,
# creates its own rxe0/rxe1 and does not need this.)
#
# Usage:
#   hack/rxe-setup.sh add NETDEV [NAME]   create rxe device NAME (default
#                                         rxe_NETDEV) on Ethernet device NETDEV
#   hack/rxe-setup.sh del NAME            delete rxe device NAME
#   hack/rxe-setup.sh status              list rxe devices: name, netdev, state
#
# add and del are idempotent: adding a device that already exists on the same
# netdev, or deleting one that does not exist, succeeds without changes.
# add and del need root; status does not.
set -euo pipefail

prog=${0##*/}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
sysib=/sys/class/infiniband

die() {
	printf '%s: %s\n' "$prog" "$*" >&2
	exit 1
}
usage() {
	sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0" >&2
	exit 2
}

need_root() {
	((EUID == 0)) || die "$1 needs root (it changes kernel RDMA devices); run it with sudo"
}

need_rdma_tool() {
	command -v rdma >/dev/null ||
		die "the 'rdma' tool is missing; install it with: apt-get install iproute2"
}

# rxe is the only "rdma link add" driver whose devices are InfiniBand-style
# CAs; siw devices (the other one with a parent netdev) are iWARP RNICs. sysfs
# has no driver link for either (they have no parent bus device).
is_rxe() {
	local d=$sysib/$1
	[[ -r $d/parent ]] || return 1
	[[ $(<"$d/node_type") == 1:* ]]
}

parent_of() { cat "$sysib/$1/parent"; }

port_state() {
	local s
	s=$(cat "$sysib/$1/ports/1/state" 2>/dev/null) || s="?"
	echo "${s#*: }"
}

show() { printf '%-16s %-16s %s\n' "$1" "$(parent_of "$1")" "$(port_state "$1")"; }

load_rxe() {
	# Already loaded (or built in): modprobe would be redundant, and in the
	# VM test bed it would fail because modules come from an initramfs.
	[[ -d /sys/module/rdma_rxe ]] && return 0
	command -v modprobe >/dev/null || die "modprobe is missing; install it with: apt-get install kmod"
	if ! modprobe rdma_rxe 2>/dev/null; then
		die "this kernel ($(uname -r)) has no rdma_rxe (Soft-RoCE) module; use a kernel" \
			"built with CONFIG_RDMA_RXE (on Ubuntu: apt-get install linux-modules-extra-$(uname -r))," \
			"or run the tests in the VM test bed: go test -exec $here/vm/go-test-exec ./..."
	fi
}

cmd_add() {
	(($# >= 1 && $# <= 2)) || usage
	local netdev=$1 name=${2:-rxe_$1} d
	[[ $name =~ ^[A-Za-z0-9_.-]{1,63}$ ]] ||
		die "bad device name '$name' (letters, digits, '_', '.', '-'; at most 63)"
	need_root add
	need_rdma_tool
	[[ -e /sys/class/net/$netdev ]] || die "no network device '$netdev' (see: ip link show)"

	if [[ -e $sysib/$name ]]; then
		is_rxe "$name" || die "'$name' already exists and is not an rxe device"
		if [[ $(parent_of "$name") == "$netdev" ]]; then
			show "$name"
			return 0
		fi
		die "rxe device '$name' already exists on netdev $(parent_of "$name"), not $netdev"
	fi
	# The kernel allows one rxe device per netdev and would only say EEXIST.
	for d in "$sysib"/*; do
		[[ -e $d ]] || continue
		d=${d##*/}
		if is_rxe "$d" && [[ $(parent_of "$d") == "$netdev" ]]; then
			die "netdev $netdev already has rxe device '$d' (delete it first: $prog del $d)"
		fi
	done

	load_rxe
	rdma link add "$name" type rxe netdev "$netdev" ||
		die "rdma link add $name type rxe netdev $netdev failed"
	show "$name"
}

cmd_del() {
	(($# == 1)) || usage
	local name=$1
	need_root del
	need_rdma_tool
	if [[ ! -e $sysib/$name ]]; then
		echo "$prog: no rxe device '$name'; nothing to delete"
		return 0
	fi
	is_rxe "$name" || die "'$name' is not an rxe device; refusing to delete it"
	rdma link delete "$name" || die "rdma link delete $name failed"
	echo "$prog: deleted $name"
}

cmd_status() {
	(($# == 0)) || usage
	local d n=0
	if [[ -d /sys/module/rdma_rxe ]]; then
		echo "rdma_rxe module: loaded"
	else
		echo "rdma_rxe module: not loaded"
	fi
	for d in "$sysib"/*; do
		[[ -e $d ]] || continue
		d=${d##*/}
		is_rxe "$d" || continue
		((n++ == 0)) && printf '%-16s %-16s %s\n' NAME NETDEV STATE
		show "$d"
	done
	((n > 0)) || echo "no rxe devices"
}

(($# > 0)) || usage
cmd=$1
shift
case $cmd in
add) cmd_add "$@" ;;
del | delete) cmd_del "$@" ;;
status | show) cmd_status "$@" ;;
-h | --help | help) usage ;;
*)
	echo "$prog: unknown command '$cmd'" >&2
	usage
	;;
esac
