#!/usr/bin/env bash
# instructions.sh: what one uncontended Lock+Unlock cycle costs the Redis
# server, in instructions, by callgrind: the figures of docs/design.md's
# Cost table. Unlike relockbench's times, a loaded machine hardly moves
# them (two runs on 2026-12-04 differed by 1.2% at most).
#
#   benchmarks/instructions.sh                        # every kind and floor
#   benchmarks/instructions.sh relock/mutex floor/set-nx+cad
#
# A kind is one of relockbench's, by its full name (relock/mutex,
# relock/reentrant, relock/fair, relock/rwlock, relock/semaphore,
# relock/election), relock/rwlock:read for the rwlock's read side, or a
# floor: floor/set-nx+del, floor/set-nx+cad. For each, a redis-server of
# its own runs under callgrind twice, for 1,000 and for 3,000 cycles of
# `relockbench -cycles`; a figure per cycle is the difference over 2,000,
# so that starting, connecting and loading scripts cancel out, and it
# leaves out serverCron (the server's timer, whose work follows the run's
# length, not its cycles). Needs go, valgrind, redis-server and redis-cli
# on the PATH (Debian: apt-get install valgrind redis-server); takes about
# ten seconds a kind. The servers listen on PORT (default 16401), which
# nothing else may use.
set -euo pipefail

cd "$(dirname "$0")/.."
port=${PORT:-16401}
kinds=("$@")
if [ ${#kinds[@]} -eq 0 ]; then
	kinds=(floor/set-nx+del floor/set-nx+cad relock/mutex relock/reentrant relock/fair relock/rwlock relock/rwlock:read relock/semaphore relock/election)
fi
for tool in go valgrind callgrind_annotate redis-server redis-cli; do
	command -v "$tool" >/dev/null || { echo "instructions.sh: $tool is not on the PATH" >&2; exit 1; }
done
if redis-cli -p "$port" ping >/dev/null 2>&1; then
	echo "instructions.sh: a server answers on port $port already; set PORT to a free port" >&2
	exit 1
fi

dir=$(mktemp -d)
pid=
# cleanup stops a server still running (a failed run), and waits for it to
# go, so that the port is free when this script has ended.
cleanup() {
	if [ -n "$pid" ]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$dir"
}
trap cleanup EXIT
go build -o "$dir/relockbench" ./benchmarks/cmd/relockbench

# run KIND N sets all and scripts to the server's instructions, less
# serverCron's, in all and inside scripts (FCALL, EVALSHA), for N cycles
# of KIND. (Not called in a subshell: the EXIT trap must see pid.)
run() {
	local kind=${1%:read} n=$2 side=()
	local out=$dir/callgrind.$n line
	if [ "$1" != "$kind" ]; then side=(-cycles-read); fi
	valgrind --tool=callgrind --callgrind-out-file="$out" \
		redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no >"$dir/server.log" 2>&1 &
	pid=$!
	for _ in $(seq 300); do
		redis-cli -p "$port" ping >/dev/null 2>&1 && break
		sleep 0.1
	done
	if [ "$(redis-cli -p "$port" info server | tr -d '\r' | awk -F: '$1 == "process_id" { print $2 }')" != "$pid" ]; then
		echo "instructions.sh: the server under callgrind did not start on port $port (see below)" >&2
		cat "$dir/server.log" >&2
		exit 1
	fi
	line=$("$dir/relockbench" -redis "redis://127.0.0.1:$port" -kinds "$kind" "${side[@]}" -cycles "$n")
	kill "$pid"
	wait "$pid" || true
	pid=
	# -kinds matches by prefix: exactly the one kind asked for must have run.
	local want="$kind: $n cycles in "
	if [ ${#side[@]} -gt 0 ]; then want="$kind read: $n cycles in "; fi
	if [ "$(printf '%s\n' "$line" | wc -l)" != 1 ] || [ "${line#"$want"}" = "$line" ]; then
		echo "instructions.sh: $1 is not one kind or floor; relockbench ran:" >&2
		printf '%s\n' "$line" >&2
		exit 1
	fi
	read -r all scripts < <(callgrind_annotate --inclusive=yes "$out" | awk '
		/PROGRAM TOTALS/ { gsub(",", "", $1); all = $1 }
		/:(fcallCommand|evalShaCommand) / { gsub(",", "", $1); scripts += $1 }
		/:serverCron / { gsub(",", "", $1); cron = $1 }
		END { print all - cron, scripts + 0 }')
}

header=1
for kind in "${kinds[@]}"; do
	run "$kind" 1000
	a1=$all s1=$scripts
	run "$kind" 3000
	a3=$all s3=$scripts
	if [ "$kind" != floor/set-nx+del ] && [ "$s3" -le "$s1" ]; then
		echo "instructions.sh: $kind: callgrind shows no script time (is fcallCommand or evalShaCommand named in its output?)" >&2
		exit 1
	fi
	if [ -n "$header" ]; then
		printf '%-22s %14s %14s\n' "per cycle" "instructions" "in scripts"
		header=
	fi
	awk -v k="$kind" -v a="$((a3 - a1))" -v s="$((s3 - s1))" \
		'BEGIN { printf "%-22s %13.1fk %13.1fk\n", k, a / 2000 / 1000, s / 2000 / 1000 }'
done
