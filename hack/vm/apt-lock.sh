# shellcheck shell=bash
# Sourced by the test bed's scripts that ask apt anything (fetch-kernel.sh,
# rootfs.sh, build-siw.sh, install-deps.sh, uverbs/uapi-headers.sh).
#
# apt's package lists are one per machine, and the bed's scripts run side by
# side: go test -exec starts two VMs at once, each run.sh asks for its kernel
# and, on arm64, its userland. On a fresh machine one of them adds the arm64
# architecture and runs apt-get update while another resolves packages from
# the lists being rewritten under it: that is how CI once built an arm64 tree
# from 28 packages instead of 95 (apt-cache depends answered nothing). So
# everything that reads or writes the lists runs under one lock for the whole
# machine, held from the first apt call to the last download.
#
#   goverbs_apt_lock            take the lock (exclusive; nested calls from a
#                               child process that holds it are no-ops)
#   goverbs_apt_update          apt-get update, under the lock
#   goverbs_apt_ensure_arch A   add foreign architecture A to dpkg and update
#                               the lists, unless dpkg has it already

goverbs_apt_lock() {
	[[ -z ${GOVERBS_APT_LOCKED:-} ]] || return 0
	local dir=/run/lock
	[[ -d $dir && -w $dir ]] || dir=${TMPDIR:-/tmp}
	# A high descriptor: the scripts use 8 and 9 for their own locks.
	exec 7>>"$dir/goverbs-apt.lock"
	flock 7
	# Children (install-deps.sh from fetch-kernel.sh) inherit descriptor 7
	# and so the lock itself; a second flock on a new descriptor would wait
	# for ourselves.
	export GOVERBS_APT_LOCKED=$$
}

goverbs_apt_update() {
	goverbs_apt_lock
	apt-get update -qq >&2
}

goverbs_apt_ensure_arch() {
	local arch=$1
	goverbs_apt_lock
	# Checked under the lock: a script that saw the architecture missing
	# before another one added it must not skip the update it still needs,
	# and one that sees it present knows the update that followed is done.
	if ! dpkg --print-foreign-architectures | grep -qx "$arch"; then
		printf '%s\n' "apt: adding the $arch architecture to dpkg (for apt-get download only)" >&2
		dpkg --add-architecture "$arch" || return 1
		# If this update fails, the next script must try again: take the
		# architecture out again until the lists have it.
		if ! apt-get update -qq >&2; then
			dpkg --remove-architecture "$arch" 2>/dev/null || true
			return 1
		fi
	fi
}
