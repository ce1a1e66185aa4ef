#!/usr/bin/env bash
# Runs goverbs' device tests and its interop with rdma-core's programs on
# this host's own RDMA device: no VM, no rxe. For a host with real hardware
# (a ConnectX with mlx5, or any device goverbs has a provider for).
#
# Usage: hack/test-hw.sh            (make test-hw)
#
# The device is $GOVERBS_TEST_DEVICE, or the host's only RDMA device. Its
# network device is $GOVERBS_TEST_NETDEV, or the one the kernel reports for
# port 1 (ports/1/gid_attrs/ndevs/0 on RoCE and iWARP, the IPoIB interface
# on InfiniBand); its address is $GOVERBS_TEST_ADDR, or that network
# device's first IPv4 address. The tests run with GOVERBS_REQUIRE_DEVICE=1,
# as on the test bed, so a test that cannot find what it needs fails rather
# than skips, and the log is checked as the bed's is
# (hack/vm/check-integration-log.sh: only a capability the device reports
# missing may skip).
#
# Left out, because they change the host rather than use the device:
# HW_SKIP's tests (creating rxe devices and veth pairs) and the fault tests
# (make faults: links taken down, hosts powered off), which need the
# two-VM bed. librpma's example matrix (examples/rpma) stays out as on the
# other non-default beds: it checks a user-space protocol rpma's own tests
# already cover on the device.
#
# Environment: GO (default go), HW_PKGS (the packages; make test-hw gives
# every package with device tests, as the rxe stages run them), HW_RUN / HW_SKIP (go test -run / -skip patterns),
# HW_TIMEOUT (per package, default 60m), HW_LOG (default
# .cache/test-hw/test.log).
#
# Exit status: 0 if every test passed; 1 if a test failed or the host
# lacks something the run needs (said in one line on stderr).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
cd "$repo"
go=${GO:-go}
sys=${GOVERBS_HW_SYSFS:-/sys}

die() { echo "test-hw: $*" >&2; exit 1; }

# The device.
dev=${GOVERBS_TEST_DEVICE:-}
if [[ -z $dev ]]; then
	devs=()
	if [[ -d $sys/class/infiniband ]]; then
		for d in "$sys"/class/infiniband/*; do [[ -e $d ]] && devs+=("${d##*/}"); done
	fi
	case ${#devs[@]} in
	0) die "no RDMA device on this host ($sys/class/infiniband is empty or missing): make test-hw runs on a host with an RDMA device (a ConnectX: mlx5_0); the test bed without one is make test" ;;
	1) dev=${devs[0]} ;;
	*) die "this host has several RDMA devices (${devs[*]}): name one, e.g. GOVERBS_TEST_DEVICE=${devs[0]} make test-hw" ;;
	esac
fi
[[ -d $sys/class/infiniband/$dev ]] || die "no RDMA device $dev on this host (see $sys/class/infiniband)"

# Its network device and address.
netdev=${GOVERBS_TEST_NETDEV:-}
if [[ -z $netdev && -r $sys/class/infiniband/$dev/ports/1/gid_attrs/ndevs/0 ]]; then
	netdev=$(cat "$sys/class/infiniband/$dev/ports/1/gid_attrs/ndevs/0" 2>/dev/null || true)
fi
if [[ -z $netdev ]]; then
	# InfiniBand: the IPoIB interface on the same PCI function.
	want=$(readlink -f "$sys/class/infiniband/$dev/device" 2>/dev/null || true)
	for n in "$sys"/class/net/*; do
		[[ -n $want && $(readlink -f "$n/device" 2>/dev/null) == "$want" ]] && { netdev=${n##*/}; break; }
	done
fi
[[ -n $netdev ]] || die "cannot tell $dev's network device: set GOVERBS_TEST_NETDEV"
addr=${GOVERBS_TEST_ADDR:-}
if [[ -z $addr ]]; then
	command -v ip >/dev/null || die "ip (iproute2) is not installed: it reads $netdev's address; or set GOVERBS_TEST_ADDR"
	addr=$(ip -4 -o addr show dev "$netdev" 2>/dev/null | awk '{ sub("/.*", "", $4); print $4; exit }')
fi
[[ -n $addr ]] || die "$netdev ($dev's network device) has no IPv4 address: give it one, or set GOVERBS_TEST_ADDR"

# What the tests need on the host.
((EUID == 0)) || die "run as root, as on the test bed: the tests lock memory, read the device's resource counts over netlink and pin threads"
missing=()
for tool in ibv_devinfo ibv_rc_pingpong rping rstream ucmatose ib_send_bw rdma gcc; do
	command -v "$tool" >/dev/null || missing+=("$tool")
done
((${#missing[@]} == 0)) || die "missing ${missing[*]}: apt-get install ibverbs-utils rdmacm-utils perftest iproute2 gcc libibverbs-dev librdmacm-dev"

[[ -n ${HW_PKGS:-} ]] || die "HW_PKGS is empty: run it as make test-hw, which lists the packages with device tests"
read -r -a pkgs <<<"$HW_PKGS"
skip='^(TestSimTransfer|TestSimTransferMsgSend|TestRXEAddDel)$'
[[ -n ${HW_SKIP:-} ]] && skip="$skip|$HW_SKIP"
run=()
[[ -n ${HW_RUN:-} ]] && run=(-run "$HW_RUN")
log=${HW_LOG:-$repo/.cache/test-hw/test.log}
mkdir -p "$(dirname "$log")"

echo "test-hw: device $dev, network device $netdev, address $addr; ${#pkgs[@]} packages; log $log"
start=$SECONDS
set +e
GOVERBS_REQUIRE_DEVICE=1 GOVERBS_TEST_DEVICE=$dev GOVERBS_TEST_NETDEV=$netdev GOVERBS_TEST_ADDR=$addr \
	GOVERBS_LEAK_CYCLES=short \
	"$go" test -count=1 -v -p 1 -timeout "${HW_TIMEOUT:-60m}" "${run[@]}" -skip "$skip" "${pkgs[@]}" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
echo "test-hw: $((SECONDS - start)) s"
grep -E '^(ok|FAIL)[[:space:]]' "$log" | sed 's/^/test-hw: /' || true
"$repo/hack/vm/check-integration-log.sh" "$log" | sed 's/^/test-hw: /'
check=${PIPESTATUS[0]}
((rc == 0 && check == 0))
