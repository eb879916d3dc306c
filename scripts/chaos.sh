#!/usr/bin/env bash
# chaos.sh runs `chime chaos` (docs/chaos.md) against the three backends:
# three nodes sharing one SQLite file with file locks, then three nodes on
# MariaDB + Redis, then three on PostgreSQL + Redis, then three on each
# server database alone (--coordination db), with restarts of Redis and of
# the database, stalls of the database and partitions of a node from the
# database or Redis among the faults.
#
#   scripts/chaos.sh [short|long|ci] [extra chime chaos flags...]
#
# short (default): about 60 s of faults per backend.
# long: 10 minutes of faults per backend (CHIME_CHAOS_DURATION overrides).
# ci: one MariaDB + Redis run of 50 s of faults that begins with a kill, a
#     stall and a database restart (--faults-first kill,stall,db), with
#     long actions, then one PostgreSQL run coordinated in the database
#     alone of 20 s that begins with a kill and a partition from the
#     database; about 2.5 minutes in all. scripts/test.sh runs it.
# CHIME_CHAOS_BACKENDS picks the runs of short and long, by name:
#   sqlite, mysql, postgres   the three backends (the default, with the next two)
#   mysql-db, postgres-db     MariaDB or PostgreSQL with --coordination db
#   ha-sentinel, ha-cluster   PostgreSQL primary + synchronous standby and a
#                             Sentinel group or a Redis Cluster, all
#                             chaos's own (--db-ha --redis-ha): the
#                             db-failover and redis-failover faults first
#   ha-db                     the PostgreSQL pair alone, --coordination db:
#                             db-failover first
#
# Servers: when the shell that runs this has started them already
# (source scripts/services.sh && services_start, which exports
# CHIME_TEST_SERVICES_DIR), they are reused and left running; otherwise
# throwaway ones are started and stopped at the end. The faults restart and
# freeze them: never point this at servers that others use.
#
# The tables go to stdout and, with the JSON reports and the logs, to
# $CHIME_CHAOS_OUT (default $TMPDIR/chime-chaos-out). The exit status is
# non-zero when a backend broke a guarantee or a fault could not be
# injected.
set -uo pipefail

mode=${1:-short}
shift || true
backends=${CHIME_CHAOS_BACKENDS:-sqlite mysql postgres mysql-db postgres-db}
ci=()
case $mode in
short) duration=${CHIME_CHAOS_DURATION:-60s} ;;
long) duration=${CHIME_CHAOS_DURATION:-10m} ;;
ci)
	duration=${CHIME_CHAOS_DURATION:-50s}
	backends="mysql postgres-db-ci"
	ci=(--faults-first kill,stall,db --max-settle 40s)
	;;
*)
	echo "usage: $0 [short|long|ci] [chime chaos flags...]" >&2
	exit 2
	;;
esac

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 1
out=${CHIME_CHAOS_OUT:-${TMPDIR:-/tmp}/chime-chaos-out}
mkdir -p "$out" || exit 1

bin=$(mktemp -d "${TMPDIR:-/tmp}/chime-chaos-bin.XXXXXX") || exit 1
echo "chaos: building chime" >&2
go build -o "$bin/chime" ./cmd/chime || exit 1

# shellcheck source=services.sh
source "$root/scripts/services.sh"
own_services=1
if [[ -n ${CHIME_TEST_SERVICES_DIR:-} && -d $CHIME_TEST_SERVICES_DIR && -n ${CHIME_TEST_MYSQL_DSN:-} &&
	-n ${CHIME_TEST_POSTGRES_DSN:-} && -n ${CHIME_TEST_REDIS_URL:-} ]]; then
	echo "chaos: reusing the servers of $CHIME_TEST_SERVICES_DIR" >&2
	_chime_svc_dir=$CHIME_TEST_SERVICES_DIR
	own_services=0
else
	services_start || exit 1
fi
cleanup() {
	if ((own_services)); then
		services_stop
	else
		# Whatever happened, leave the servers running, not frozen.
		services_resume_mariadb "$_chime_svc_dir" 2>/dev/null
		services_resume_postgres "$_chime_svc_dir" 2>/dev/null
	fi
	rm -rf "$bin"
}
trap cleanup EXIT

rc=0
run() {
	local name=$1
	shift
	echo "chaos: $name, $duration of faults (log $out/$name.log)" >&2
	"$bin/chime" chaos --duration "$duration" --verbose --json-file "$out/$name.json" "$@" \
		2>"$out/$name.log" | tee "$out/$name.txt"
	local r=${PIPESTATUS[0]}
	if ((r != 0)); then
		echo "chaos: $name failed (exit $r); last lines of $out/$name.log:" >&2
		tail -n 20 "$out/$name.log" >&2
		rc=1
	fi
}

# svc NAME prints a command that runs services_NAME of services.sh. Chaos
# runs it under sh -c in a new process: bash sources services.sh and is
# given the services dir; the CHIME_TEST_* variables are inherited.
svc() {
	printf "bash -c 'source \"\$1\" && services_%s \"\$2\"' chaos '%s' '%s'" \
		"$1" "$root/scripts/services.sh" "$_chime_svc_dir"
}
redis_base=${CHIME_TEST_REDIS_URL%/*}
for b in $backends; do
	case $b in
	sqlite) run sqlite --backend sqlite "${ci[@]}" "$@" ;;
	mysql)
		run mysql --backend mysql --db "$CHIME_TEST_MYSQL_DSN" --redis "$redis_base/3" --redis-flush \
			--redis-restart-cmd "$(svc restart_redis)" --db-restart-cmd "$(svc restart_mariadb)" \
			--db-stall-cmd "$(svc stall_mariadb)" --db-resume-cmd "$(svc resume_mariadb)" "${ci[@]}" "$@"
		;;
	mysql-db)
		run mysql-db --backend mysql --coordination db --db "$CHIME_TEST_MYSQL_DSN" \
			--db-restart-cmd "$(svc restart_mariadb)" \
			--db-stall-cmd "$(svc stall_mariadb)" --db-resume-cmd "$(svc resume_mariadb)" "${ci[@]}" "$@"
		;;
	postgres-db)
		run postgres-db --backend postgres --coordination db --db "$CHIME_TEST_POSTGRES_DSN" \
			--db-restart-cmd "$(svc restart_postgres)" \
			--db-stall-cmd "$(svc stall_postgres)" --db-resume-cmd "$(svc resume_postgres)" "${ci[@]}" "$@"
		;;
	postgres-db-ci)
		# The database alone, short: a kill and a partition from the
		# database, then kills; 150 timers.
		duration=${CHIME_CHAOS_DB_DURATION:-20s} run postgres-db --backend postgres --coordination db \
			--db "$CHIME_TEST_POSTGRES_DSN" --timers 150 --faults kill --faults-first kill,partition \
			--max-settle 30s "$@"
		;;
	ha-sentinel | ha-cluster)
		run "$b" --backend postgres --db-ha --redis-ha "${b#ha-}" --faults-first db-failover,redis-failover "${ci[@]}" "$@"
		;;
	ha-db)
		run ha-db --backend postgres --db-ha --coordination db --faults-first db-failover "${ci[@]}" "$@"
		;;
	postgres)
		run postgres --backend postgres --db "$CHIME_TEST_POSTGRES_DSN" --redis "$redis_base/4" --redis-flush \
			--redis-restart-cmd "$(svc restart_redis)" --db-restart-cmd "$(svc restart_postgres)" \
			--db-stall-cmd "$(svc stall_postgres)" --db-resume-cmd "$(svc resume_postgres)" "${ci[@]}" "$@"
		;;
	*)
		echo "chaos: unknown backend $b" >&2
		rc=1
		;;
	esac
done
exit $rc
