#!/usr/bin/env bash
# Checks the `go test -v` log of a run on the test bed (make integration):
#
#   hack/vm/check-integration-log.sh LOGFILE
#
# Device tests must not skip in the VM unless the device lacks a capability:
# such skips go through testutil.SkipUnlessCap, whose message begins with
# "goverbs-skip: device lacks capability:". Opt-in measurements skipped
# through testutil.SkipUnlessOptIn ("goverbs-skip: opt-in measurement:")
# are counted apart. Any other `--- SKIP` fails the check, and is listed
# with the message it logged.
#
# Prints: device tests (tests that logged "goverbs-integration: using RDMA
# device"), passed, skipped with a missing capability, skipped opt-in
# measurements, failed (counts of --- PASS/SKIP/FAIL lines, subtests
# included). Exit status: 0; 1 if a skip names no capability or no device
# test ran; 2 on bad usage.
set -euo pipefail

if (($# != 1)) || [[ ! -r $1 ]]; then
	echo "usage: check-integration-log.sh LOGFILE (a readable go test -v log)" >&2
	exit 2
fi

awk '
function reset() { delete logs; delete device; cur = "" }
function flush(pkg) {
	# PKG stands for the package, known only from its result line.
	while ((i = index(pending, PKG)) > 0)
		pending = substr(pending, 1, i - 1) pkg substr(pending, i + length(PKG))
	badlist = badlist pending
	pending = ""
}
BEGIN {
	PKG = "\001"
	capm = "goverbs-skip: device lacks capability:"
	optm = "goverbs-skip: opt-in measurement:"
	reset()
}
# A new test binary: test names may repeat between packages.
/^(ok  |FAIL|\?   )\t/ {
	# The result line of a package names the package of the skips above it.
	flush($2)
	reset()
	next
}
/^=== (RUN|CONT|NAME|PAUSE)  *[^ ]/ {
	cur = $3
	next
}
/^ *--- (PASS|FAIL|SKIP): / {
	line = $0
	sub(/^ *--- /, "", line)
	res = line; sub(/:.*/, "", res)
	name = line; sub(/^[A-Z]+: /, "", name); sub(/ \([0-9.]+s\)$/, "", name)
	if (res == "PASS") passed++
	if (res == "FAIL") failed++
	if (res == "SKIP") {
		msg = logs[name]
		if (index(msg, capm)) capskip++
		else if (index(msg, optm)) optskip++
		else {
			bad++
			pending = pending "  " PKG " " name ":" (msg == "" ? " (no message)" : msg) "\n"
		}
	}
	if (device[name]) devtests++
	next
}
{
	if (cur != "") {
		logs[cur] = logs[cur] "\n      " $0
		if (index($0, "goverbs-integration: using RDMA device")) device[cur] = 1
	}
}
END {
	flush("(package unknown)")
	printf "integration log: %d device tests; %d passed, %d skipped for a capability the device lacks, %d opt-in measurements skipped, %d failed\n", devtests, passed, capskip, optskip, failed
	status = 0
	if (bad > 0) {
		printf "integration log: %d skips name no device capability (only testutil.SkipUnlessCap may skip on the test bed):\n%s", bad, badlist
		status = 1
	}
	if (devtests == 0) {
		print "integration log: no test used an RDMA device"
		status = 1
	}
	exit status
}
' "$1"
