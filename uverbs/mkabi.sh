#!/usr/bin/env bash
# Regenerates the kernel ABI of package uverbs from a pinned kernel's UAPI
# headers, the way golang.org/x/sys/unix does: cgo -godefs runs at generation
# time only; the library never uses cgo.
#
#   ztypes_linux.go   structs, from types_linux.go (the committed godefs input)
#   zconsts_linux.go  constants: every enumerator of the RDMA UAPI enums plus a
#                     few macros, extracted from the headers into a temporary
#                     godefs input (the mkerrors.sh approach)
#   abi.pin           what they were generated from: the headers package, a
#                     digest of its RDMA headers, and digests of the generator
#                     inputs and of the two generated files
#
# The headers come from uapi-headers.sh (Debian 12's linux-headers-6.12.*-common,
# newest build, fetched into .cache, never installed), never from the host's
# /usr/include, so every machine generates the same files.
#
# Usage: ./mkabi.sh            regenerate from the newest headers of the series
#        ./mkabi.sh -check     verify, in this order:
#          1. the generated files are what mkabi.sh wrote (digests in abi.pin):
#             a hand edit fails;
#          2. types_linux.go and mkabi.sh are the ones they were generated with:
#             an input changed without `make generate` fails;
#          3. the newest headers of the series: if their RDMA headers are the
#             pinned ones (the usual case, even across Debian rebuilds), the
#             files are regenerated and must match byte for byte; if Debian now
#             serves different RDMA headers, that is reported (with what would
#             change) and not failed: adopting them is a deliberate
#             `make generate` plus review.
# Env:   UAPI_INCLUDE  generate from this include directory instead (for
#                      experiments; -check ignores it)
set -euo pipefail
cd "$(dirname "$0")"

headers=(rdma_user_ioctl_cmds.h ib_user_ioctl_cmds.h ib_user_ioctl_verbs.h
	ib_user_verbs.h ib_user_sa.h rdma_user_cm.h rdma_user_rxe.h rdma_netlink.h
	siw-abi.h vmw_pvrdma-abi.h mlx5_user_ioctl_verbs.h mlx5-abi.h)
generated=(ztypes_linux.go zconsts_linux.go)
inputs=(types_linux.go mkabi.sh)

check=0
[[ ${1:-} == -check ]] && check=1

digest() { cat "$@" | sha256sum | cut -d' ' -f1; }
pinned() { awk -v k="$1" '$1 == k { print $2 }' abi.pin 2>/dev/null; }

if ((check)); then
	[[ -r abi.pin ]] || { echo "mkabi: abi.pin missing: run make generate" >&2; exit 1; }
	if [[ $(digest "${generated[@]}") != $(pinned generated) ]]; then
		echo "mkabi: ${generated[*]} differ from what mkabi.sh generated (abi.pin): generated files are not edited by hand; run make generate" >&2
		exit 1
	fi
	if [[ $(digest "${inputs[@]}") != $(pinned inputs) ]]; then
		echo "mkabi: ${inputs[*]} changed since the last generation: run make generate" >&2
		exit 1
	fi
	unset UAPI_INCLUDE
fi

if [[ -n ${UAPI_INCLUDE:-} ]]; then
	inc=$UAPI_INCLUDE
	pkg="$UAPI_INCLUDE (not pinned)"
else
	inc=$(./uapi-headers.sh) || { echo "mkabi: cannot fetch the UAPI headers (uapi-headers.sh)" >&2; exit 1; }
	pkg=$(<"$inc/../package")
fi
for h in "${headers[@]}"; do
	[[ -r $inc/rdma/$h ]] || { echo "mkabi: $inc/rdma/$h missing" >&2; exit 1; }
done
command -v gcc >/dev/null || { echo "mkabi: gcc is needed at generation time (cgo -godefs)" >&2; exit 1; }
hdigest=$( (cd "$inc/rdma" && digest "${headers[@]}"))
# The generated files name the headers package they came from. A Debian
# rebuild of the series (6.12.117 to 6.12.118, say) serves the same RDMA
# headers under a new name: -check then names the pinned package, so that
# only a change of the headers themselves changes the files.
label=${pkg%% *}
if ((check)) && [[ $hdigest == $(pinned headers) ]]; then
	label=$(pinned package)
fi

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# Macros worth having as Go constants (the rest are enumerators).
macros=(RDMA_VERBS_IOCTL RDMA_IOCTL_MAGIC UVERBS_ID_NS_MASK UVERBS_ID_NS_SHIFT
	IB_USER_VERBS_ABI_VERSION IB_USER_VERBS_CMD_COMMAND_MASK
	IB_USER_VERBS_CMD_FLAG_EXTENDED IB_DEVICE_NAME_MAX
	IB_UVERBS_ACCESS_OPTIONAL_FIRST IB_UVERBS_ACCESS_OPTIONAL_LAST
	RDMA_USER_CM_ABI_VERSION RDMA_MAX_PRIVATE_DATA RDMA_NLA_F_MANDATORY
	RDMA_NL_LS_F_ERR PVRDMA_UAR_HANDLE_MASK PVRDMA_UAR_QP_OFFSET
	PVRDMA_UAR_QP_SEND PVRDMA_UAR_QP_RECV PVRDMA_UAR_CQ_OFFSET PVRDMA_UAR_CQ_ARM_SOL
	PVRDMA_UAR_CQ_ARM PVRDMA_UAR_CQ_POLL PVRDMA_UAR_SRQ_OFFSET PVRDMA_UAR_SRQ_RECV)
# A macro that newer headers no longer define is left out, and said so (6.12
# dropped UVERBS_UDATA_DRIVER_DATA_NS/_FLAG, which goverbs never used).
present=()
for m in "${macros[@]}"; do
	if grep -Eq "^#[[:space:]]*define[[:space:]]+$m([[:space:](]|$)" "${headers[@]/#/$inc/rdma/}"; then
		present+=("$m")
	else
		echo "mkabi: $m is not defined by these headers; left out" >&2
	fi
done
macros=("${present[@]}")

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
	# siw_cqe's last member is a union of the kernel's QP pointer and the
	# 64-bit QP id user space reads; cgo picks the pointer, user space wants the id.
	sed -e 's/_Ctype_struct___[0-9]*$/struct {\n\t\t\tRc_odp_caps uint32\n\t\t\tUc_odp_caps uint32\n\t\t\tUd_odp_caps uint32\n\t\t}/' \
		-e 's/^\([[:space:]]*\)Base_qp[[:space:]]*\*_Ctype_struct_ib_qp$/\1Qp_id uint64/' \
		-e "s#^// cgo -godefs .*#// mkabi.sh: cgo -godefs $(basename "$1"), UAPI headers of $label#" \
		"$2.raw" | gofmt > "$2"
	rm -f "$2.raw"
	if grep -n '_Ctype_' "$2"; then echo "mkabi: unresolved C types in $2" >&2; exit 1; fi
}
cp types_linux.go "$out/types_linux.go"
gen "$out/types_linux.go" "$out/ztypes_linux.go"
gen "$out/consts_linux.go" "$out/zconsts_linux.go"

if ((check)); then
	if [[ $hdigest != $(pinned headers) ]]; then
		echo "mkabi: notice: Debian now serves $pkg, whose RDMA headers differ from the pinned $(pinned package);" >&2
		echo "mkabi: notice: the committed ABI still matches its pin. Adopting the new headers is a deliberate" >&2
		echo "mkabi: notice: 'make generate' and a review; it would change:" >&2
		for f in "${generated[@]}"; do diff -u "$f" "$out/$f" | sed 's/^/mkabi:   /' >&2 || true; done
		exit 0
	fi
	rc=0
	for f in "${generated[@]}"; do
		if ! diff -u "$f" "$out/$f"; then
			echo "mkabi: $f differs from what the pinned headers ($pkg) generate: run make generate" >&2
			rc=1
		fi
	done
	exit $rc
fi
cp "$out/ztypes_linux.go" "$out/zconsts_linux.go" .
{
	echo "# Written by mkabi.sh; checked by mkabi.sh -check (make test). Do not edit."
	echo "package ${pkg%% *}"
	echo "headers $hdigest"
	echo "inputs $(digest "${inputs[@]}")"
	echo "generated $(digest "${generated[@]}")"
} >abi.pin
