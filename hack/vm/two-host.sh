#!/usr/bin/env bash
# Runs a command on two test VMs joined by one link: a two-host RoCEv2 test
# bed for fault tests (make faults).
#
# Usage: hack/vm/two-host.sh [--timeout SECONDS] [--rerun-after-panic] -- CMD [ARGS...]
#        hack/vm/two-host.sh -h|--help   (this text)
#
# VM a (169.254.77.11) and VM b (169.254.77.12) each boot with run.sh --link:
# one virtio-net NIC, eth0, joined to the other VM's by a qemu socket netdev
# (a listens on 127.0.0.1:PORT, b connects; nothing else on the host is
# used), and rxe0 on it. CMD runs in both, with GOVERBS_FAULT_ROLE=a or b,
# GOVERBS_FAULT_PEER=the other VM's address, GOVERBS_REQUIRE_TWO_HOST=1 and
# GOVERBS_FAULT_DIR=a directory both guests can write (read-write 9p, kept
# until the end of the run). Each VM gets one CPU (--cpus 1).
#
# Output: each VM's output, live, with "a| " or "b| " in front of each line,
# then one status line per VM. Exit status: 0 if both commands exited 0;
# else a's status if non-zero, else b's. A VM that powered itself off on
# request (the command created $GOVERBS_FAULT_DIR/ROLE.poweroff first: the
# "peer VM powered off" fault) counts as status 0 although it wrote none.
# A VM whose guest kernel panics stops the other VM at once (its status is
# then run.sh's 143): the survivor's tests could only fail or wait out their
# timeout on a dead link.
#
# --rerun-after-panic (make faults): a guest kernel that panics (run.sh says
# "the guest kernel panicked") cuts the run short for a reason no
# user-space program may cause: 6.12's rxe has corrupted its own slab under
# the fault tests (docs/kernels.md, section 8). Then both VMs boot again and
# run CMD once more, with a new shared directory, after a line beginning
# "rerun-stage: " that hack/testsum reads: the earlier runs' failures are
# listed as flaky when the last run passes. At most twice, and only after a
# panic: a third panic, or any other failure, is the run's status.
#
# GOVERBS_VM_LOCK is taken here (shared, or exclusive with
# GOVERBS_VM_LOCK_EXCLUSIVE=1) for both VMs, as run.sh takes it for one.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
timeout=${GOVERBS_VM_TIMEOUT:-900}
usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }
rerun_after_panic=
while (($# > 0)); do
	case $1 in
	--timeout) timeout=${2:?--timeout needs a value}; shift 2 ;;
	--timeout=*) timeout=${1#*=}; shift ;;
	--rerun-after-panic) rerun_after_panic=1; shift ;;
	-h | --help) usage; exit 0 ;;
	--) shift; break ;;
	*) echo "two-host: unknown option $1 (the command goes after --)" >&2; usage >&2; exit 2 ;;
	esac
done
(($# > 0)) || { usage >&2; exit 2; }

if [[ -n ${GOVERBS_VM_LOCK:-} ]]; then
	exec 7>>"$GOVERBS_VM_LOCK"
	if [[ ${GOVERBS_VM_LOCK_EXCLUSIVE:-0} == 1 ]]; then flock -x 7; else flock -s 7; fi
	# The VMs run under this lock; run.sh must not take it again (an
	# exclusive lock would wait for itself).
	unset GOVERBS_VM_LOCK GOVERBS_VM_LOCK_EXCLUSIVE
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/goverbs-two-host.XXXXXX")
work=$(realpath "$work")
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP QUIT

addr_a=169.254.77.11
addr_b=169.254.77.12

listening() { ss -Hltn "sport = :$1" 2>/dev/null | grep -q .; }

# Run one VM: its output prefixed, its run.sh's pid in $work/ROLE.pid, its
# status in $work/ROLE.rc.
vm() {
	local role=$1 mode=$2 port=$3 addr=$4 peer=$5
	shift 5
	local rc=0 p
	GOVERBS_FAULT_ROLE=$role GOVERBS_FAULT_PEER=$peer GOVERBS_REQUIRE_TWO_HOST=1 \
		GOVERBS_FAULT_DIR=$work/shared GOVERBS_VM_TIMEOUT=$timeout \
		GOVERBS_VM_PANIC_MARK=$work/$role.panicked \
		"$here/run.sh" --cpus 1 --rw "$work/shared" --link "$mode:$port:$addr" -- "$@" \
		> >(sed -u "s/^/$role| /") 2>&1 &
	p=$!
	echo "$p" >"$work/$role.pid"
	wait "$p" || rc=$?
	echo "$rc" >"$work/$role.rc"
}

# stop_peer_of_panicked stops the other VM, once, when one VM's kernel has
# panicked and the other is still running.
stop_peer_of_panicked() {
	local role other
	[[ ! -f $work/peer-stopped ]] || return 0
	for role in a b; do
		other=b
		[[ $role == a ]] || other=a
		if [[ -f $work/$role.panicked && ! -f $work/$other.rc && -f $work/$other.pid ]]; then
			echo "two-host: the kernel of VM $role panicked: stopping VM $other" >&2
			: >"$work/peer-stopped"
			kill -TERM "$(<"$work/$other.pid")" 2>/dev/null || true
			return 0
		fi
	done
}

# pair runs CMD once on both VMs, with a new shared directory; each VM's
# status is then in $work/ROLE.rc, and $work/ROLE.panicked exists if its
# kernel panicked.
pair() {
	rm -rf "$work/shared" "$work"/[ab].* "$work/peer-stopped"
	mkdir -p "$work/shared"
	chmod 0777 "$work/shared"
	local started= port
	# A free port for a to listen on; a few tries, as another run may take it
	# between the check and qemu's bind.
	for _ in 1 2 3 4 5; do
		port=$((20000 + RANDOM % 40000))
		listening "$port" && continue
		rm -f "$work/a.rc"
		vm a listen "$port" "$addr_a" "$addr_b" "$@" &
		pids=($!)
		# qemu opens the listening socket before the guest boots.
		for _ in $(seq 300); do
			if listening "$port"; then
				started=1
				break
			fi
			[[ ! -f $work/a.rc ]] || break
			sleep 0.1
		done
		[[ -z $started ]] || break
		kill -TERM "${pids[0]}" 2>/dev/null || true
		wait "${pids[0]}" 2>/dev/null || true
		pids=()
	done
	[[ -n $started ]] || { echo "two-host: VM a never listened on 127.0.0.1" >&2; exit 125; }
	vm b connect "$port" "$addr_b" "$addr_a" "$@" &
	pids+=($!)
	# a's command ending ends the run. Until then, a VM whose kernel panicked
	# stops its peer: the peer's tests can only fail or wait on a dead link
	# until their own timeout (go test's -test.timeout, 12 minutes in make
	# faults), and the run is decided, or run again, by the panic alone.
	while [[ ! -f $work/a.rc ]] && kill -0 "${pids[0]}" 2>/dev/null; do
		sleep 1
		stop_peer_of_panicked
	done
	# Once more: a's panic mark and its status can both appear in one sleep.
	stop_peer_of_panicked
	# A b that powered itself off on request is off for the test from then
	# on; its kernel may still hang on the way down (6.1 once spun in
	# ksoftirqd until the timeout, 900 s): stop its qemu.
	wait "${pids[0]}" || true
	if [[ -f $work/shared/b.poweroff && ! -f $work/b.rc && -f $work/b.pid ]]; then
		echo "two-host: a is done and b powered itself off on request: stopping b's VM" >&2
		kill -TERM "$(<"$work/b.pid")" 2>/dev/null || true
	fi
	wait "${pids[@]}" || true
	pids=()
}

status() {
	local role=$1 rc
	rc=$(<"$work/$role.rc")
	if [[ $rc != 0 && -f $work/shared/$role.poweroff ]]; then
		echo "two-host: VM $role powered off on request (run.sh status $rc)" >&2
		rc=0
	fi
	echo "two-host: VM $role exited with $rc" >&2
	echo "$rc"
}
# With --rerun-after-panic, a run in which a guest kernel panicked is run
# again, at most max_panic_reruns times.
max_panic_reruns=2
for ((run = 0; ; run++)); do
	pair "$@"
	rc_a=$(status a)
	rc_b=$(status b)
	panicked=
	for role in a b; do
		[[ ! -f $work/$role.panicked ]] || panicked+=" $role"
	done
	[[ -n $rerun_after_panic && -n $panicked ]] && ((run < max_panic_reruns)) || break
	echo "rerun-stage: the kernel of VM${panicked} panicked (its oops is above); both VMs run the command once more" >&2
done
((rc_a != 0)) && exit "$rc_a"
exit "$rc_b"
