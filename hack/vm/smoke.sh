#!/usr/bin/env bash
# Smoke test of the VM test bed with rdma-core's own tools:
#
#   hack/vm/run.sh -- hack/vm/smoke.sh
#
# Checks that rxe0 is visible and ACTIVE, that the rdma tool sees it, and that
# RC traffic (ibv_rc_pingpong) and the RDMA CM (rping) work. Both ends of each
# exchange use rxe0: two rxe devices in one network namespace cannot reach
# each other (the peer address resolves through lo), but one device loops back.
set -euo pipefail

dev=${GOVERBS_TEST_DEVICE:-rxe0}
addr=${GOVERBS_TEST_ADDR:-169.254.77.1}
failed=0

step() { printf '\n=== [%ss] %s\n' "$SECONDS" "$*"; }
fail() {
	printf 'SMOKE FAIL: %s\n' "$*"
	failed=1
}

# Servers print nothing when ready, and a client started too early fails at
# once, so wait for the listener: "tcp PORT" for the TCP socket the verbs
# pingpong tools exchange addresses over, "cm" for an RDMA CM listen.
listening() {
	case $1 in
	tcp) ss -Hltn "sport = :$2" | grep -q . ;;
	cm) rdma resource show cm_id 2>/dev/null | grep -q LISTEN ;;
	esac
}
wait_listen() {
	local i
	for ((i = 0; i < 100; i++)); do
		listening "$@" && return 0
		sleep 0.1
	done
	return 1
}

# Runs a server in the background and a client against it, each bounded by a
# timeout; both must succeed. Usage: pair KIND PORT -- SERVER... -- CLIENT...
pair() {
	local kind=$1 port=$2 srv=() cli=() spid crc=0 src=0 log clog
	shift 3
	while [[ $1 != -- ]]; do
		srv+=("$1")
		shift
	done
	shift
	cli=("$@")
	log=$(mktemp)
	clog=$(mktemp)
	timeout 60 "${srv[@]}" >"$log" 2>&1 &
	spid=$!
	if wait_listen "$kind" "$port"; then
		timeout 60 "${cli[@]}" >"$clog" 2>&1 || crc=$?
		sed 's/^/client: /' "$clog"
	else
		echo "no $kind listener on port $port after 10 s"
		kill "$spid" 2>/dev/null || true
		crc=1
	fi
	wait "$spid" || src=$?
	sed 's/^/server: /' "$log"
	crc=$(exit_race "$crc" "$clog" client)
	src=$(exit_race "$src" "$log" server)
	rm -f "$log" "$clog"
	((crc == 0 && src == 0))
}

# exit_race STATUS LOG WHO prints the status to judge a program by: 0 for
# rdma-core 44's rping that lost its own exit race (its CM thread read the
# event channel main had destroyed, printed this line last and exited 255;
# fixed upstream in rdma-core f3ae6534a), STATUS otherwise.
exit_race() {
	if (($1 == 255)) && [[ $(tail -n 1 "$2") == "rdma_get_cm_event: Bad file descriptor" ]]; then
		echo "$3: rping's exit race (rdma-core f3ae6534a), taken as success" >&2
		echo 0
		return
	fi
	echo "$1"
}

step "ibv_devices"
ibv_devices || fail "ibv_devices"

step "ibv_devinfo -v -d $dev"
if out=$(ibv_devinfo -v -d "$dev" 2>&1); then
	echo "$out"
	grep -q 'state:.*PORT_ACTIVE' <<<"$out" || fail "$dev port is not PORT_ACTIVE"
else
	echo "$out"
	fail "ibv_devinfo -d $dev"
fi

step "rdma link show"
rdma link show || fail "rdma link show"

step "rdma res show"
rdma res show || fail "rdma res show"

step "ibv_rc_pingpong on $dev (loopback, GID index 1)"
pair tcp 18515 -- ibv_rc_pingpong -d "$dev" -g 1 -n 200 -- \
	ibv_rc_pingpong -d "$dev" -g 1 -n 200 "$addr" || fail "ibv_rc_pingpong"

step "rping on $addr (RDMA CM)"
pair cm 7174 -- rping -s -a "$addr" -p 7174 -C 10 -- \
	rping -c -a "$addr" -p 7174 -C 10 -v || fail "rping"

echo
if ((failed)); then
	echo "SMOKE: FAILED"
	exit 1
fi
echo "SMOKE: OK"
