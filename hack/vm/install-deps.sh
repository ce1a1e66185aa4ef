#!/usr/bin/env bash
# Installs the Debian packages the VM test bed and the interop tests need.
#
# Usage: hack/vm/install-deps.sh [PACKAGE...]
#   Without arguments the full default set is checked. Prints nothing and
#   touches nothing when every package is already installed, so run.sh can call
#   it on every run.
set -euo pipefail

default_pkgs=(
	qemu-system-x86 # qemu-system-x86_64 (TCG only: CI has no KVM)
	qemu-system-arm # qemu-system-aarch64: the arm64 test bed (GOVERBS_VM_ARCH=arm64)
	cpio            # initramfs archive
	kmod            # modprobe --show-depends / depmod on the unpacked kernel tree
	busybox-static  # the initramfs userland (must be static: no libs in the initramfs)
	rdma-core       # rdma-core providers, reference behaviour for interop tests
	ibverbs-utils   # ibv_devinfo, ibv_rc_pingpong (smoke test); make test-mlx5 compares goverbs devinfo with ibv_devinfo
	rdmacm-utils    # rping, ucmatose
	perftest        # ib_write_bw & co
	iproute2        # ip, rdma
	strace
	xz-utils        # decompress .ko.xz
	zstd            # decompress .ko.zst
	libibverbs-dev  # headers librpma.h includes; make test-mlx5's C side
	ibverbs-providers # libmlx5, which make test-mlx5 compares goverbs' mlx5 provider with
	gcc-aarch64-linux-gnu # make test-mlx5-arm64: builds its fake kernel and C driver for arm64
	libc6-dev-arm64-cross # (the arm64 libibverbs and libmlx5 come from hack/mlx5-arm64-root.sh)
	qemu-user-static      # qemu-aarch64-static: runs them, and the arm64 test binary, on the host
	librdmacm-dev
	librpma-dev     # the C librpma interop peers (rpma/testdata) link against it
	gcc             # builds those peers, and cgo -godefs at generation time
	libc6-dev
	linux-libc-dev  # kernel headers for the C peers (the ABI is generated from pinned headers: uverbs/uapi-headers.sh)
	util-linux      # taskset: pin ping-pong ends to different vCPUs
)
if (($# > 0)); then
	pkgs=("$@")
else
	pkgs=("${default_pkgs[@]}")
fi

missing=()
for p in "${pkgs[@]}"; do
	# dpkg-query rather than `command -v`: -dev and library packages ship no
	# command, and a package can be "deinstalled" with its config left behind.
	status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	[[ $status == installed ]] || missing+=("$p")
done
((${#missing[@]} == 0)) && exit 0

echo "install-deps: installing missing packages: ${missing[*]}" >&2
sudo=()
if ((EUID != 0)); then
	if command -v sudo >/dev/null; then
		sudo=(sudo)
	else
		echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2
		exit 1
	fi
fi
export DEBIAN_FRONTEND=noninteractive
# shellcheck source=apt-lock.sh
. "$(dirname "${BASH_SOURCE[0]}")/apt-lock.sh"
# Under the bed's apt lock (apt-lock.sh), and checked again there: two VMs
# starting at once on a fresh machine both find qemu missing.
if ((EUID == 0)); then
	goverbs_apt_lock
	still=()
	for p in "${missing[@]}"; do
		[[ $(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true) == installed ]] || still+=("$p")
	done
	((${#still[@]} > 0)) || exit 0
	missing=("${still[@]}")
fi
# A fresh machine may have empty or stale package lists; one update is enough.
"${sudo[@]}" apt-get update -qq >&2
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
