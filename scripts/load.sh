#!/usr/bin/env bash
# load.sh measures the load that a 3-node chime cluster puts on its store
# (MariaDB or PostgreSQL) and on Redis: at rest (no timers), at about 1,000
# fires/s, and at 1,000 fires/s plus a few long actions (whose leases are
# extended while they run). It starts its own throwaway servers with
# scripts/services.sh, stops them at the end, and prints one table per
# backend (per second: Redis commands by kind, store statements by kind,
# rows written and read). docs/load.md has the figures and their reading.
#
#   scripts/load.sh [mysql|postgres|all] [extra chime serve flags...]
#
# Environment (defaults in brackets):
#   LOAD_WINDOW   seconds of each measured window [30]
#   LOAD_TIMERS   '@every 1s' timers of the busy phases [1000]
#   LOAD_LONG     long timers ('@every 1s', callback held) added last [20]
#   LOAD_HOLD     seconds the long callback is held [5]
#   LOAD_SETTLE   seconds between the end of a phase's set-up and its window [20]
#   LOAD_LOOKAHEAD  the nodes' --lookahead, in seconds [600, chime's default]
#   LOAD_PLAN     1: also measure the planning pass that extends every
#                 timer's plan, LOOKAHEAD/2 after the timers were created
#                 (the windows above see none); it adds about LOOKAHEAD/2
#                 seconds to the run. 0: skip it [1]
#   LOAD_SAMPLE   seconds of statement log sampled after each window, to
#                 count the statements by what chime does with them (MariaDB
#                 general log, PostgreSQL log_statement=all); 0: none [10]
#   LOAD_COORD    the nodes' coordination: redis (--redis, the slice index
#                 and locks in Redis) or db (no Redis: lease rows in the
#                 database, the index read from it) [redis]
#   LOAD_OUT      where the raw snapshots, tables and node logs go
#                 [$TMPDIR/chime-load-out]
#
# Extra arguments go to every `chime serve` (e.g. --lock-ttl 3s --lease 20s)
# to see what a knob changes. A run takes about 8 minutes per backend with the
# defaults (4 with LOAD_PLAN=0); it uses the loopback interface only.
set -uo pipefail

target=${1:-all}
shift || true
case $target in
mysql) backends=(mysql) ;;
postgres) backends=(postgres) ;;
all) backends=(mysql postgres) ;;
*)
	echo "usage: $0 [mysql|postgres|all] [chime serve flags...]" >&2
	exit 2
	;;
esac
extra=("$@")
window=${LOAD_WINDOW:-30}
ntimers=${LOAD_TIMERS:-1000}
nlong=${LOAD_LONG:-20}
hold=${LOAD_HOLD:-5}
settle=${LOAD_SETTLE:-20}
lookahead=${LOAD_LOOKAHEAD:-600}
plan=${LOAD_PLAN:-1}
coord=${LOAD_COORD:-redis}
[[ $coord == redis || $coord == db ]] || { echo "LOAD_COORD must be redis or db, not $coord" >&2; exit 2; }
sample=${LOAD_SAMPLE:-10}

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 1
out=${LOAD_OUT:-${TMPDIR:-/tmp}/chime-load-out}
mkdir -p "$out" || exit 1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/chime-load.XXXXXX") || exit 1

log() { printf 'load: %s\n' "$*" >&2; }

log "building chime"
go build -o "$tmp/chime" ./cmd/chime || exit 1

# shellcheck source=services.sh
source "$root/scripts/services.sh"

node_pids=()
aux_pids=()
stop_nodes() {
	local p
	for p in "${node_pids[@]}"; do
		kill -TERM "$p" 2>/dev/null
	done
	for p in "${node_pids[@]}"; do
		wait "$p" 2>/dev/null
	done
	node_pids=()
}
cleanup() {
	stop_nodes
	local p
	for p in "${aux_pids[@]}"; do
		kill -TERM "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	services_stop
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

services_start || exit 1

redis_port=${CHIME_TEST_REDIS_URL#redis://127.0.0.1:}
redis_port=${redis_port%%/*}
mysql_port=${CHIME_TEST_MYSQL_DSN#mysql://root@127.0.0.1:}
mysql_port=${mysql_port%%/*}
pg_port=${CHIME_TEST_POSTGRES_DSN#postgres://postgres@127.0.0.1:}
pg_port=${pg_port%%/*}
rcli() { redis-cli -h 127.0.0.1 -p "$redis_port" "$@"; }
mcli() { mysql --no-defaults -uroot -h127.0.0.1 -P"$mysql_port" --protocol=tcp -N -B "$@"; }
pcli() { psql -X -q -A -t -F ' ' -h 127.0.0.1 -p "$pg_port" -U postgres "$@"; }

# The receivers: chime's bench receiver answers 200 at once; the slow one,
# for the long actions, answers after $hold seconds.
recv_port=$(_svc_free_port) || exit 1
"$tmp/chime" bench receive --listen "127.0.0.1:$recv_port" >"$out/receiver.log" 2>&1 &
aux_pids+=($!)
slow_port=$(_svc_free_port) || exit 1
python3 - "$slow_port" "$hold" >"$out/slow-receiver.log" 2>&1 <<'EOF' &
import sys, time
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
hold = float(sys.argv[2])
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
        time.sleep(hold)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *a):
        pass
ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer.request_queue_size = 1024
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
EOF
aux_pids+=($!)
for ((i = 0; i < 100; i++)); do
	curl -fs "http://127.0.0.1:$recv_port/fires?limit=0" >/dev/null && break
	sleep 0.1
done
received() { curl -fs "http://127.0.0.1:$recv_port/fires?limit=0" | jq .total; }

# snapshot BACKEND DB FILE writes the counters as "name value" lines.
snapshot() {
	local backend=$1 db=$2 f=$3
	{
		date +%s.%N | sed 's/^/time /'
		rcli INFO commandstats | tr -d '\r' | sed -n 's/^cmdstat_\([^:]*\):calls=\([0-9]*\),.*/redis.\1 \2/p'
		rcli INFO all | tr -d '\r' | sed -n \
			-e 's/^rdb_changes_since_last_save:\([0-9]*\)/redis_dirty \1/p' \
			-e 's/^expired_keys:\([0-9]*\)/redis_expired \1/p' \
			-e 's/^total_net_input_bytes:\([0-9]*\)/redis_net_in \1/p'
		if [[ $backend == mysql ]]; then
			mcli -e 'SHOW GLOBAL STATUS' | awk '$1 ~ /^(Com_(select|insert|insert_select|update|update_multi|delete|delete_multi|replace|begin|commit|rollback)|Questions|Innodb_os_log_written|Handler_(read_next|read_key|read_rnd_next|write|update|delete))$/ {print "db." $1, $2}'
			mcli -e "SELECT TABLE_NAME, ROWS_READ, ROWS_CHANGED FROM information_schema.TABLE_STATISTICS WHERE TABLE_SCHEMA='$db'" |
				awk '{print "tbl." $1 ".read", $2; print "tbl." $1 ".changed", $3}'
			mcli -e "SELECT CONCAT(TABLE_NAME, ':', INDEX_NAME), ROWS_READ FROM information_schema.INDEX_STATISTICS WHERE TABLE_SCHEMA='$db'" |
				awk '{print "idx." $1 ".read", $2}'
		else
			pcli -d "$db" -c "SELECT 'db.xact_commit', xact_commit, 'db.xact_rollback', xact_rollback,
					'db.tup_returned', tup_returned, 'db.tup_fetched', tup_fetched,
					'db.tup_inserted', tup_inserted, 'db.tup_updated', tup_updated, 'db.tup_deleted', tup_deleted,
					'db.blks_hit', blks_hit, 'db.blks_read', blks_read
				FROM pg_stat_database WHERE datname = current_database()" | xargs -n2
			pcli -d "$db" -c "SELECT 'db.wal_records', wal_records, 'db.wal_bytes', wal_bytes, 'db.wal_sync', wal_sync FROM pg_stat_wal" | xargs -n2
			pcli -d "$db" -c "SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del, coalesce(seq_scan,0), coalesce(idx_scan,0),
					coalesce(seq_tup_read,0) + coalesce(idx_tup_fetch,0) FROM pg_stat_user_tables" |
				awk '{t="tbl." $1; print t ".ins", $2; print t ".upd", $3; print t ".hot_upd", $4; print t ".del", $5;
					print t ".scans", $6 + $7; print t ".read", $8}'
			pcli -d "$db" -c "SELECT relname || ':' || indexrelname, idx_scan, idx_tup_read FROM pg_stat_user_indexes" |
				awk '{print "idx." $1 ".scans", $2; print "idx." $1 ".read", $3}'
		fi
		local i=0 u
		for u in "${node_urls[@]}"; do
			i=$((i + 1))
			curl -fs "$u/metrics" | awk -v n="n$i" '
				/^chime_fires_total/ {s += $NF}
				/^chime_claims_total\{result="won"/ {w += $NF}
				/^chime_slices_held / {h = $NF}
				/^chime_pool_running / {r = $NF}
				/^chime_runs_planned_total/ {p += $NF}
				/^chime_runs_recovered_total/ {rc += $NF}
				/^chime_leases_lost_total/ {ll += $NF}
				END {print "fires." n, s+0; print "claims." n, w+0; print "held." n, h+0; print "running." n, r+0; print "planned." n, p+0
					print "recovered." n, rc+0; print "leaseslost." n, ll+0}'
		done
		echo "received $(received)"
	} >"$f"
}

# report PHASE BEFORE AFTER [--extra ...] prints the table of a window (see
# load-report.py) and appends its rows to $out/BACKEND.tsv.
report() {
	python3 "$root/scripts/load-report.py" "$backend" "$@" 2>&1
}

# measure PHASE: one window of $window seconds.
measure() {
	local phase=$1
	log "$backend: measuring '$phase' for ${window}s"
	snapshot "$backend" "$db" "$out/$backend-$phase.before"
	sleep "$window"
	snapshot "$backend" "$db" "$out/$backend-$phase.after"
	report "$phase" "$out/$backend-$phase.before" "$out/$backend-$phase.after" "$out/$backend.tsv" | tee -a "$out/$backend.txt"
	sample_statements "$phase"
}

# sample_statements PHASE logs every statement for $sample seconds and
# counts them by kind (load-statements.py).
sample_statements() {
	local phase=$1 f=$out/$backend-$1.statements.log
	((sample > 0)) || return 0
	log "$backend: sampling the statements of '$phase' for ${sample}s"
	if [[ $backend == mysql ]]; then
		rm -f "$f"
		mcli -e "SET GLOBAL general_log_file = '$f'; SET GLOBAL log_output = 'FILE'; SET GLOBAL general_log = 1" || return 0
		sleep "$sample"
		mcli -e "SET GLOBAL general_log = 0"
	else
		local plog=$_chime_svc_dir/postgres.log off
		off=$(stat -c %s "$plog") || return 0
		pcli -c "ALTER SYSTEM SET log_statement = 'all'" -c "SELECT pg_reload_conf()" >/dev/null || return 0
		sleep "$sample"
		pcli -c "ALTER SYSTEM RESET log_statement" -c "SELECT pg_reload_conf()" >/dev/null
		tail -c +$((off + 1)) "$plog" >"$f"
	fi
	{
		echo "== $backend, $phase: statements by kind"
		python3 "$root/scripts/load-statements.py" "$backend" "$f" "$sample"
	} | tee -a "$out/$backend.txt"
}

# create_timers PREFIX COUNT URL: POST the timers, 8 at a time, spread over
# the nodes.
create_timers() {
	local prefix=$1 count=$2 url=$3 i
	for ((i = 0; i < count; i++)); do
		printf '%s %s-%05d\n' "${node_urls[i % ${#node_urls[@]}]}" "$prefix" "$i"
	done | xargs -r -P8 -n2 sh -c '
		curl -fsS -o /dev/null -X POST "$1/api/v1/timers" -H "Content-Type: application/json" \
			-d "{\"app\":\"load\",\"name\":\"$2\",\"schedule\":\"@every 1s\",\"action\":{\"type\":\"http\",\"http\":{\"url\":\"'"$url"'\"}},\"timeout\":\"30s\"}" ||
			echo "create $2 failed" >&2' sh
}

rc=0
for backend in "${backends[@]}"; do
	db=load_$(date +%s)
	rcli FLUSHALL >/dev/null
	if [[ $backend == mysql ]]; then
		mcli -e "CREATE DATABASE $db; SET GLOBAL userstat = 1" || exit 1
		dsn="mysql://root@127.0.0.1:$mysql_port/$db"
	else
		pcli -c "CREATE DATABASE $db" || exit 1
		dsn="postgres://postgres@127.0.0.1:$pg_port/$db?sslmode=disable"
	fi
	: >"$out/$backend.txt"
	: >"$out/$backend.tsv"
	node_urls=()
	coord_flags=(--coordination db)
	[[ $coord == redis ]] && coord_flags=(--redis "redis://127.0.0.1:$redis_port/0")
	for n in 1 2 3; do
		port=$(_svc_free_port) || exit 1
		mkdir -p "$tmp/$backend-n$n"
		"$tmp/chime" serve --listen "127.0.0.1:$port" --db "$dsn" "${coord_flags[@]}" \
			--data-dir "$tmp/$backend-n$n" --node-id "n$n" --lookahead "${lookahead}s" "${extra[@]}" >"$out/$backend-n$n.log" 2>&1 &
		node_pids+=($!)
		node_urls+=("http://127.0.0.1:$port")
	done
	for u in "${node_urls[@]}"; do
		for ((i = 0; i < 300; i++)); do
			curl -fs "$u/readyz" >/dev/null && break
			sleep 0.1
		done
		curl -fs "$u/readyz" >/dev/null || { log "$u not ready; see $out/$backend-n*.log"; exit 1; }
	done
	log "$backend: 3 nodes ready on ${node_urls[*]}; settling ${settle}s"
	sleep "$settle"
	measure rest

	t_first=$(date +%s)
	t_last=$t_first
	if ((ntimers > 0)); then
		log "$backend: creating $ntimers '@every 1s' timers"
		create_timers fast "$ntimers" "http://127.0.0.1:$recv_port/fire"
		t_last=$(date +%s)
		log "$backend: created in $((t_last - t_first))s; settling ${settle}s"
		sleep "$settle"
		measure "fires"
	fi

	if ((nlong > 0)); then
		log "$backend: adding $nlong '@every 1s' timers whose callback takes ${hold}s"
		create_timers long "$nlong" "http://127.0.0.1:$slow_port/fire"
		t_last=$(date +%s)
		sleep "$settle"
		measure "fires+long"
		base=fires+long
	else
		base=fires
	fi
	if ((plan)); then
		# Every timer was planned up to its creation + LOOKAHEAD; the
		# planner's pass (every 15 s, on the elected node) extends the plans
		# that end within LOOKAHEAD/2, so the timers' next runs all come in
		# one pass LOOKAHEAD/2 after their creation, and again every
		# LOOKAHEAD/2. The window spans that pass; what it adds over the
		# base window is the planning load.
		half=$((lookahead / 2))
		wait_for=$((t_first + half - 10 - $(date +%s)))
		log "$backend: waiting ${wait_for}s for the planning pass"
		((wait_for > 0)) && sleep "$wait_for"
		snapshot "$backend" "$db" "$out/$backend-plan.before"
		planned() { cat "$@" | awk '/^planned\./ {s += $2} END {print s+0}'; }
		prev=-1
		while :; do
			snapshot "$backend" "$db" "$out/$backend-plan.after"
			cur=$(planned "$out/$backend-plan.after")
			(($(date +%s) >= t_last + half + 15)) && [[ $cur == "$prev" ]] && break
			(($(date +%s) >= t_last + half + 300)) && { log "$backend: planning pass still going; window cut"; break; }
			prev=$cur
			sleep 10
		done
		nplanned=$(($(planned "$out/$backend-plan.after") - $(planned "$out/$backend-plan.before")))
		report plan "$out/$backend-plan.before" "$out/$backend-plan.after" "$out/$backend.tsv" \
			--extra "$out/$backend-$base.before" "$out/$backend-$base.after" "$half" "$nplanned" | tee -a "$out/$backend.txt"
	fi
	stop_nodes
	if grep -q 'level=ERROR' "$out/$backend"-n*.log; then
		log "$backend: errors in the node logs:"
		grep -h 'level=ERROR' "$out/$backend"-n*.log | head -n 5 >&2
	fi
done
log "tables in $out/*.txt, raw snapshots in $out"
exit $rc
