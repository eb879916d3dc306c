#!/usr/bin/env bash
# bench-ceilings.sh runs `chime bench --scenario steady --spread` at the
# rates given, on the backends given, one 20 s window each, and prints one
# row per run: the rate achieved, the fire delay, the fires later than 1 s,
# the node's cores, and, when perf(1) can sample the whole machine, how the
# machine's two cores were shared between the node (with its in-process
# receiver), the database server, Redis and idle time in 15 s of the
# window (from 2 s after the bench created its CPU profile, which it does
# as the window starts). docs/performance.md ("What bounds the ceilings")
# has the figures and their reading: at its ceiling the node and its
# servers together use every core, so the ceiling is CPU per fire over all
# three processes.
#
#   scripts/bench-ceilings.sh [CONFIG...]
#
# A CONFIG is BACKEND:RATE[:ACTION[:COORD]] with BACKEND sqlite, mysql or
# postgres, ACTION http or handler [http], and COORD redis or db [redis]:
# where a server database's node keeps its slice locks, elections and
# index (--coordination; db runs without Redis). The default list is this
# machine's edges:
#
#   sqlite:5000 sqlite:6000 sqlite:7000:handler
#   postgres:4000 postgres:5000:handler postgres:7000:handler
#   mysql:4000 mysql:5000:handler
#
# Environment:
#   CEIL_BIN     the chime binary [built from this tree into $CEIL_OUT]
#   CEIL_OUT     where the JSON reports, perf data and CPU profiles go
#                [$TMPDIR/chime-ceilings]
#   CEIL_SECONDS the measured window of each run, in seconds; perf samples
#                it from 2 s in until 3 s before its end, when it lasts 10 s
#                or more [20]
#
# It exits non-zero when a run gave no report. scripts/test.sh runs a
# smoke of it (one short SQLite run).
#
# It starts MariaDB, PostgreSQL and Redis with scripts/services.sh when a
# config needs them and CHIME_TEST_POSTGRES_DSN / CHIME_TEST_MYSQL_DSN are
# not set, and stops what it started. Every run gets an empty database and
# an empty Redis.
set -euo pipefail
cd "$(dirname "$0")/.."

out=${CEIL_OUT:-${TMPDIR:-/tmp}/chime-ceilings}
mkdir -p "$out"
bin=${CEIL_BIN:-}
if [[ -z $bin ]]; then
	bin=$out/chime
	go build -o "$bin" ./cmd/chime
fi
configs=("$@")
if ((${#configs[@]} == 0)); then
	configs=(sqlite:5000 sqlite:6000 sqlite:7000:handler
		postgres:4000 postgres:5000:handler postgres:7000:handler
		mysql:4000 mysql:5000:handler)
fi

started=0
if [[ -z ${CHIME_TEST_POSTGRES_DSN:-} || -z ${CHIME_TEST_MYSQL_DSN:-} ]] &&
	printf '%s\n' "${configs[@]}" | grep -qE '^(mysql|postgres):'; then
	# shellcheck source=scripts/services.sh
	source scripts/services.sh
	services_start
	started=1
	trap 'services_stop' EXIT
fi

seconds=${CEIL_SECONDS:-20}
failed=0
have_perf=0
if command -v perf >/dev/null && perf record -a -o /dev/null -- true >/dev/null 2>&1; then
	have_perf=1
fi

# fresh_db prints the bench flags of an empty database (and flushes Redis)
# for backend $1.
fresh_db() {
	local name=c$(date +%s%N | tail -c 9)
	case $1 in
	sqlite) return ;;
	postgres)
		psql "$CHIME_TEST_POSTGRES_DSN" -qc "CREATE DATABASE $name" >/dev/null
		printf -- '--db %s --redis %s' "${CHIME_TEST_POSTGRES_DSN%/postgres*}/$name?sslmode=disable" "$CHIME_TEST_REDIS_URL"
		;;
	mysql)
		local hp=${CHIME_TEST_MYSQL_DSN#mysql://root@}
		hp=${hp%/}
		mysql -h"${hp%:*}" -P"${hp##*:}" -uroot -e "CREATE DATABASE $name"
		printf -- '--db %s --redis %s' "${CHIME_TEST_MYSQL_DSN%/}/$name" "$CHIME_TEST_REDIS_URL"
		;;
	esac
	redis-cli -u "$CHIME_TEST_REDIS_URL" flushall >/dev/null
}

for c in "${configs[@]}"; do
	IFS=: read -r backend rate action coord <<<"$c"
	action=${action:-http}
	coord=${coord:-redis}
	tag=$backend-$rate-$action
	# shellcheck disable=SC2046
	set -- $(fresh_db "$backend")
	if [[ $backend != sqlite && $coord == db ]]; then
		tag=$tag-db
		set -- "$1" "$2" --coordination db # no --redis
	fi
	rm -f "$out/$tag.cpu" "$out/$tag.perf" "$out/$tag.json"
	if ((have_perf && seconds >= 10)); then
		# The bench creates its CPU profile as the measured window starts.
		(for _ in $(seq 1200); do [[ -e $out/$tag.cpu ]] && break; sleep 0.1; done
			sleep 2 && perf record -a -F 499 -o "$out/$tag.perf" -- sleep $((seconds - 5)) >/dev/null 2>&1) &
	fi
	"$bin" bench --scenario steady --rate "$rate" --spread --duration "${seconds}s" --action "$action" "$@" \
		--cpuprofile "$out/$tag.cpu" --json >"$out/$tag.json" 2>"$out/$tag.log" || true
	wait
	split=""
	if [[ -e $out/$tag.perf ]]; then
		split=$(perf report -i "$out/$tag.perf" --sort comm --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' |
			head -4 | awk '{printf "%s %s, ", $2, $1}')
	fi
	python3 - "$out/$tag.json" "$tag" "$split" <<'EOF' || failed=1
import json, sys
try:
    s = json.load(open(sys.argv[1]))['steady']
except Exception as e:
    print(f"{sys.argv[2]:34s} FAILED ({e}); see the .log beside the .json")
    sys.exit(1)
d, r = s['delay'], s['resources']
print(f"{sys.argv[2]:34s} {s['achieved_fires_per_second']:>6.0f}/s  p50 {d['p50_ms']:8.1f}  p99 {d['p99_ms']:8.1f}  max {d['max_ms']:8.1f} ms"
      f"  late>1s {s['late_over_1s']:>6}  missed {s['missed']}  dup {s['duplicated']}  node {r['cpu_cores']:.2f} cores  | {sys.argv[3]}")
EOF
done
exit $failed
