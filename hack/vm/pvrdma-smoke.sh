#!/usr/bin/env bash
# Smoke test of the nested pvrdma test bed with rdma-core's own tools:
#
#   GOVERBS_PROVIDER=pvrdma hack/vm/run.sh -- hack/vm/pvrdma-smoke.sh
#
# Runs in the inner guest. Checks that vmw_pvrdma0 is there, PORT_ACTIVE and
# RoCE (Ethernet link layer), and that RC traffic works: ibv_rc_pingpong
# server and client both on vmw_pvrdma0 (the device model forwards both ends
# to the same rxe0, which loops back), pinned to different vCPUs, busy polling
# (qemu 7.2 disarms a CQ armed for all completions, so -e would hang), GID
# index 1 (::ffff:IPv4, RoCE v1: qemu offers no v2).
set -euo pipefail

dev=${GOVERBS_TEST_DEVICE:-vmw_pvrdma0}
addr=${GOVERBS_TEST_ADDR:-169.254.77.10}
iters=${PVRDMA_SMOKE_ITERS:-200}
failed=0

step() { printf '\n=== [%ss] %s\n' "$SECONDS" "$*"; }
fail() {
	printf 'SMOKE FAIL: %s\n' "$*"
	failed=1
}

step "ibv_devices"
ibv_devices || fail "ibv_devices"

step "ibv_devinfo -v -d $dev"
if out=$(ibv_devinfo -v -d "$dev" 2>&1); then
	echo "$out"
	grep -q 'state:.*PORT_ACTIVE' <<<"$out" || fail "$dev port is not PORT_ACTIVE"
	grep -q 'link_layer:.*Ethernet' <<<"$out" || fail "$dev link layer is not Ethernet"
else
	echo "$out"
	fail "ibv_devinfo -d $dev"
fi

step "GIDs of $dev"
for f in /sys/class/infiniband/"$dev"/ports/1/gids/[01]; do
	printf '%s %s (%s)\n' "${f##*/}" "$(<"$f")" "$(cat "/sys/class/infiniband/$dev/ports/1/gid_attrs/types/${f##*/}" 2>/dev/null)"
done

step "ibv_rc_pingpong on $dev, $iters round trips (server vCPU 0, client vCPU 1, GID index 1)"
slog=$(mktemp)
clog=$(mktemp)
timeout 300 taskset -c 0 ibv_rc_pingpong -d "$dev" -g 1 -n "$iters" >"$slog" 2>&1 &
spid=$!
# The server prints nothing when ready; wait for its TCP listener.
for ((i = 0; i < 300; i++)); do
	ss -Hltn 'sport = :18515' | grep -q . && break
	sleep 0.1
done
crc=0 src=0
if ((i < 300)); then
	timeout 300 taskset -c 1 ibv_rc_pingpong -d "$dev" -g 1 -n "$iters" "$addr" >"$clog" 2>&1 || crc=$?
else
	echo "no ibv_rc_pingpong listener on port 18515 after 30 s"
	kill "$spid" 2>/dev/null || true
	crc=1
fi
wait "$spid" || src=$?
sed 's/^/client: /' "$clog"
sed 's/^/server: /' "$slog"
((crc == 0 && src == 0)) || fail "ibv_rc_pingpong (client status $crc, server status $src)"
grep -q "$iters iters in" "$clog" || fail "ibv_rc_pingpong client did not report $iters iterations"

echo
if ((failed)); then
	echo "SMOKE: FAILED"
	exit 1
fi
echo "SMOKE: OK (${SECONDS}s)"
