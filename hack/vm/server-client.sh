#!/usr/bin/env bash
# Runs a server and a client against it, in one machine (run.sh --server
# runs it in the VM): starts the server, waits until it listens, runs the
# client, then waits for the server to exit.
#
# Usage: hack/vm/server-client.sh [--port PORT] [--wait SECONDS]
#                                 [--server-exit SECONDS] --server 'CMD' -- CLIENT [ARGS...]
#
#   --server 'CMD'       the server, a bash command line (run with bash -c)
#   --port PORT          wait for a listener on this port; without it, for
#                        any listener the server adds
#   --wait SECONDS       how long the server may take to listen (default 60)
#   --server-exit SECONDS  how long the server may take to exit after the
#                        client did (default 60); then it is killed
#
# "Listens" means an rdma_cm ID in state LISTEN (rdma resource show
# cm_id) or a TCP socket in LISTEN (ss), one that was not there before the
# server started. Output: the server's lines with "server| " in front, the
# client's as they are. Exit status: the client's if it failed, else the
# server's (a server killed after --server-exit counts as 124); 125 if the
# server exited or did not listen in time before the client ran.
set -euo pipefail

usage() {
	sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
}
server= port= wait_s=60 exit_s=60
while (($# > 0)); do
	case $1 in
	--server) server=${2:?--server needs a command}; shift 2 ;;
	--server=*) server=${1#*=}; shift ;;
	--port) port=${2:?--port needs a value}; shift 2 ;;
	--port=*) port=${1#*=}; shift ;;
	--wait) wait_s=${2:?--wait needs a value}; shift 2 ;;
	--wait=*) wait_s=${1#*=}; shift ;;
	--server-exit) exit_s=${2:?--server-exit needs a value}; shift 2 ;;
	--server-exit=*) exit_s=${1#*=}; shift ;;
	-h | --help) usage; exit 0 ;;
	--) shift; break ;;
	*) echo "server-client: unknown option $1 (the client goes after --)" >&2; usage >&2; exit 2 ;;
	esac
done
if [[ -z $server || $# -eq 0 ]]; then
	echo "server-client: need --server 'CMD' and a client command after --" >&2
	usage >&2
	exit 2
fi
[[ -z $port || $port =~ ^[0-9]+$ ]] || { echo "server-client: --port wants a number, got '$port'" >&2; exit 2; }
[[ $wait_s =~ ^[0-9]+$ && $exit_s =~ ^[0-9]+$ ]] || { echo "server-client: --wait and --server-exit want seconds" >&2; exit 2; }

# listeners prints one line per listener: rdma_cm IDs in LISTEN and TCP
# sockets in LISTEN, each with its local address:port.
listeners() {
	{ rdma resource show cm_id 2>/dev/null || true; } |
		awk '/state LISTEN/ { for (i = 1; i < NF; i++) if ($i == "src-addr") print "rdma " $(i + 1) }'
	{ ss -Hltn 2>/dev/null || true; } | awk '{ print "tcp " $4 }'
}
# listening reports whether a listener not in $before (and on $port, if
# given) exists. (No process substitution: the VM's chroot has no
# /dev/fd.)
listening() {
	listeners | {
		while IFS= read -r l; do
			[[ -n $l ]] || continue
			[[ $'\n'$before$'\n' == *$'\n'"$l"$'\n'* ]] && continue
			[[ -z $port || $l == *:"$port" ]] && exit 0
		done
		exit 1
	}
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/server-client.XXXXXX")
before=$(listeners)
# The server runs in a subshell that records its pid and status; its
# output goes through sed, whose pid is the one to wait for.
(
	bash -c "$server" &
	echo $! >"$tmp/pid"
	st=0
	wait $! || st=$?
	echo "$st" >"$tmp/status"
) 2>&1 | sed -u 's/^/server| /' &
spid=$!
until [[ -s $tmp/pid ]]; do sleep 0.05; done
server_pid=$(<"$tmp/pid")
kill_server() { kill -TERM "$server_pid" 2>/dev/null || true; }
cleanup() {
	kill_server
	rm -rf "$tmp"
}
trap cleanup EXIT
# server_status prints the server's exit status once it has exited.
server_status() {
	wait "$spid" 2>/dev/null || true
	cat "$tmp/status" 2>/dev/null || echo 125
}

waited=0
until listening; do
	if ! kill -0 "$spid" 2>/dev/null; then
		src=$(server_status)
		echo "server-client: the server exited (status $src) before it listened" >&2
		exit 125
	fi
	if ((waited >= wait_s * 10)); then
		echo "server-client: the server did not listen${port:+ on port $port} within ${wait_s} s" >&2
		exit 125
	fi
	sleep 0.1
	waited=$((waited + 1))
done

crc=0
"$@" || crc=$?

# The server's exit, bounded.
src=0
for ((i = 0; i < exit_s * 10; i++)); do
	kill -0 "$spid" 2>/dev/null || break
	sleep 0.1
done
if kill -0 "$spid" 2>/dev/null; then
	echo "server-client: the server had not exited ${exit_s} s after the client; killed" >&2
	kill_server
	wait "$spid" 2>/dev/null || true
	src=124
else
	src=$(server_status)
fi
echo "server-client: client status $crc, server status $src" >&2
((crc != 0)) && exit "$crc"
exit "$src"
