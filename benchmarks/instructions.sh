#!/usr/bin/env bash
# instructions.sh: what one uncontended Lock+Unlock cycle costs the Redis
# server, in instructions, by callgrind: the figures of docs/design.md's
# Cost table. A loaded machine does not move them (the same measurement
# twice differs by 1.5% at most), unlike relockbench's times.
#
#   benchmarks/instructions.sh                        # every kind and floor
#   benchmarks/instructions.sh relock/mutex floor/set-nx+cad
#
# A kind is one of relockbench's (relock/mutex, ...), a floor
# (floor/set-nx+del, floor/set-nx+cad), or relock/rwlock:read for the
# read side. For each, a redis-server of its own runs under callgrind
# twice, for 1,000 and for 3,000 cycles of `relockbench -cycles`; a
# figure per cycle is the difference over 2,000, so that starting,
# connecting and loading scripts cancel out. Needs valgrind,
# redis-server and redis-cli on the PATH (Debian: apt-get install
# valgrind redis-server); takes about ten seconds per kind. Run it from the
# repository root. PORT (default 16401) is the port the servers use.
set -euo pipefail

port=${PORT:-16401}
kinds=("$@")
if [ ${#kinds[@]} -eq 0 ]; then
	kinds=(floor/set-nx+del floor/set-nx+cad relock/mutex relock/reentrant relock/fair relock/rwlock relock/rwlock:read relock/semaphore relock/election)
fi
for tool in valgrind callgrind_annotate redis-server redis-cli; do
	command -v "$tool" >/dev/null || { echo "instructions.sh: $tool is not on the PATH" >&2; exit 1; }
done

dir=$(mktemp -d)
trap 'redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
go build -o "$dir/relockbench" ./benchmarks/cmd/relockbench

# run KIND N: the server's instructions, in all and inside scripts
# (FCALL, EVALSHA), for N cycles of KIND.
run() {
	local kind=${1%:read} n=$2 read=()
	local out=$dir/callgrind.$n
	[ "$1" != "$kind" ] && read=(-cycles-read)
	valgrind --tool=callgrind --callgrind-out-file="$out" \
		redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no >"$dir/server.log" 2>&1 &
	local pid=$!
	for _ in $(seq 300); do
		redis-cli -p "$port" ping >/dev/null 2>&1 && break
		sleep 0.1
	done
	"$dir/relockbench" -redis "redis://127.0.0.1:$port" -kinds "$kind" "${read[@]}" -cycles "$n" >/dev/null
	redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
	wait "$pid" || true
	local all scripts
	all=$(callgrind_annotate "$out" | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')
	scripts=$(callgrind_annotate --inclusive=yes "$out" |
		awk '/[?]:(fcallCommand|evalShaCommand) / { gsub(",", "", $1); s += $1 } END { print s + 0 }')
	echo "$all $scripts"
}

printf '%-22s %14s %14s\n' "per cycle" "instructions" "in scripts"
for kind in "${kinds[@]}"; do
	read -r a1 s1 < <(run "$kind" 1000)
	read -r a3 s3 < <(run "$kind" 3000)
	awk -v k="$kind" -v a="$((a3 - a1))" -v s="$((s3 - s1))" \
		'BEGIN { printf "%-22s %13.1fk %13.1fk\n", k, a / 2000 / 1000, s / 2000 / 1000 }'
done
