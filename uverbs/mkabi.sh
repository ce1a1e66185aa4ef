#!/usr/bin/env bash
# Regenerates the kernel ABI of package uverbs from the UAPI headers in
# /usr/include/rdma (Debian package linux-libc-dev), the way golang.org/x/sys/unix
# does: cgo -godefs runs at generation time only; the library never uses cgo.
#
#   ztypes_linux.go   structs, from types_linux.go (the committed godefs input)
#   zconsts_linux.go  constants: every enumerator of the RDMA UAPI enums plus a
#                     few macros, extracted from the headers into a temporary
#                     godefs input (the mkerrors.sh approach)
#
# Usage: ./mkabi.sh            rewrite the generated files
#        ./mkabi.sh -check     fail if regenerating would change them
set -euo pipefail
cd "$(dirname "$0")"

inc=${UAPI_INCLUDE:-/usr/include}
headers=(rdma_user_ioctl_cmds.h ib_user_ioctl_cmds.h ib_user_ioctl_verbs.h
	ib_user_verbs.h ib_user_sa.h rdma_user_cm.h rdma_user_rxe.h rdma_netlink.h)
for h in "${headers[@]}"; do
	[[ -r $inc/rdma/$h ]] || { echo "mkabi: $inc/rdma/$h missing: apt-get install linux-libc-dev" >&2; exit 1; }
done
command -v gcc >/dev/null || { echo "mkabi: gcc is needed at generation time (cgo -godefs)" >&2; exit 1; }

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# Macros worth having as Go constants (the rest are enumerators).
macros=(RDMA_VERBS_IOCTL RDMA_IOCTL_MAGIC UVERBS_ID_NS_MASK UVERBS_ID_NS_SHIFT
	UVERBS_UDATA_DRIVER_DATA_NS UVERBS_UDATA_DRIVER_DATA_FLAG
	IB_USER_VERBS_ABI_VERSION IB_USER_VERBS_CMD_COMMAND_MASK
	IB_USER_VERBS_CMD_FLAG_EXTENDED IB_DEVICE_NAME_MAX
	IB_UVERBS_ACCESS_OPTIONAL_FIRST IB_UVERBS_ACCESS_OPTIONAL_LAST
	RDMA_USER_CM_ABI_VERSION RDMA_MAX_PRIVATE_DATA RDMA_NLA_F_MANDATORY
	RDMA_NL_LS_F_ERR)

# Enumerators: identifiers at the start of a line inside an enum body. Enums
# that only exist for the kernel's internal use are not in UAPI headers.
enums=$(for h in "${headers[@]}"; do
	awk '/^enum[^;]*\{/ {in_enum=1; next}
	     in_enum && /^\};/ {in_enum=0; next}
	     in_enum && match($0, /^[ \t]*[A-Z][A-Z0-9_]*[ \t]*(=|,|$)/) {
		s = substr($0, RSTART, RLENGTH); gsub(/[ \t=,]/, "", s); print s }' "$inc/rdma/$h"
done | sort -u)

{
	echo '//go:build ignore'
	echo
	echo 'package uverbs'
	echo
	echo '/*'
	echo '#include <linux/netlink.h>'
	for h in "${headers[@]}"; do echo "#include <rdma/$h>"; done
	echo '*/'
	echo 'import "C"'
	echo
	echo 'const ('
	for n in "${macros[@]}" $enums; do echo "	$n = C.$n"; done
	echo ')'
} > "$out/consts_linux.go"

gen() { # input output
	(cd "$(dirname "$1")" && go tool cgo -godefs -- -I"$inc" "$(basename "$1")") > "$2.raw"
	# The anonymous per-transport struct of ib_uverbs_odp_caps has no C name.
	sed -e 's/_Ctype_struct___[0-9]*$/struct {\n\t\t\tRc_odp_caps uint32\n\t\t\tUc_odp_caps uint32\n\t\t\tUd_odp_caps uint32\n\t\t}/' \
		-e "s#^// cgo -godefs .*#// mkabi.sh: cgo -godefs $(basename "$1") on /usr/include/rdma#" \
		"$2.raw" | gofmt > "$2"
	rm -f "$2.raw"
	if grep -n '_Ctype_' "$2"; then echo "mkabi: unresolved C types in $2" >&2; exit 1; fi
}
cp types_linux.go "$out/types_linux.go"
gen "$out/types_linux.go" "$out/ztypes_linux.go"
gen "$out/consts_linux.go" "$out/zconsts_linux.go"

if [[ ${1:-} == -check ]]; then
	rc=0
	for f in ztypes_linux.go zconsts_linux.go; do
		if ! diff -u "$f" "$out/$f"; then
			echo "mkabi: $f is stale: run make generate" >&2
			rc=1
		fi
	done
	exit $rc
fi
cp "$out/ztypes_linux.go" "$out/zconsts_linux.go" .
