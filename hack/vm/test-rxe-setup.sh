#!/usr/bin/env bash
# Exercises hack/rxe-setup.sh inside the VM test bed (it needs a kernel with
# rdma_rxe, which the host may not have):
#
#   hack/vm/run.sh -- hack/vm/test-rxe-setup.sh
#
# Uses its own veth2/veth3 pair (no addresses) so the rxe0/rxe1 devices the
# tests rely on stay untouched.
set -euo pipefail

[[ ${GOVERBS_IN_VM:-} == 1 ]] || {
	echo "test-rxe-setup: run me inside the VM: hack/vm/run.sh -- $0" >&2
	exit 2
}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
rxe=$(cd "$here/.." && pwd)/rxe-setup.sh
failed=0

# expect WANT_STATUS PATTERN CMD...: runs CMD, checks its exit status and that
# its combined output matches the extended regexp PATTERN.
expect() {
	local want=$1 pat=$2 out rc=0
	shift 2
	out=$("$@" 2>&1) || rc=$?
	if [[ $rc != "$want" ]] || ! grep -Eq -- "$pat" <<<"$out"; then
		printf 'FAIL: %s\n  want status %s and /%s/, got status %s:\n%s\n' \
			"$*" "$want" "$pat" "$rc" "    ${out//$'\n'/$'\n'    }"
		failed=1
	else
		printf 'ok:   %s  ->  %s\n' "$*" "$(head -n1 <<<"$out")"
	fi
}

ip link add veth2 type veth peer name veth3
ip link set veth2 up
ip link set veth3 up

expect 0 'rxe0 +veth0 +ACTIVE' "$rxe" status
expect 0 'rxe1 +veth1 +ACTIVE' "$rxe" status
expect 0 'rxe_veth2 +veth2' "$rxe" add veth2
expect 0 'rxe_veth2 +veth2' "$rxe" add veth2
expect 0 'rxe_veth2 +veth2' "$rxe" add veth2 rxe_veth2
expect 0 'rxe_veth2 +veth2 +ACTIVE' "$rxe" status
expect 1 'already exists on netdev veth2' "$rxe" add veth3 rxe_veth2
expect 1 'already has rxe device .rxe_veth2' "$rxe" add veth2 other
expect 1 "no network device 'nosuchdev'" "$rxe" add nosuchdev
expect 1 'bad device name' "$rxe" add veth3 'a/b'
expect 0 'my_rxe3 +veth3' "$rxe" add veth3 my_rxe3
expect 0 'deleted my_rxe3' "$rxe" del my_rxe3
expect 0 'deleted rxe_veth2' "$rxe" del rxe_veth2
expect 0 'nothing to delete' "$rxe" del rxe_veth2
expect 0 '^rdma_rxe module: loaded' "$rxe" status
expect 1 'needs root' setpriv --reuid=65534 --regid=65534 --clear-groups "$rxe" add veth2
expect 2 'Usage' "$rxe" frobnicate

# Without the rdma tool on PATH (but with what the script needs besides).
fake=$(mktemp -d)
trap 'rm -rf "$fake"' EXIT
for t in cat dirname; do ln -s "$(command -v "$t")" "$fake/$t"; done
expect 1 'apt-get install iproute2' env PATH="$fake" "$BASH" "$rxe" add veth2

# The tests' own devices must have survived all of the above.
expect 0 'rxe0 +veth0 +ACTIVE' "$rxe" status
ip link del veth2

if ((failed)); then
	echo "test-rxe-setup: FAILED"
	exit 1
fi
echo "test-rxe-setup: OK"
