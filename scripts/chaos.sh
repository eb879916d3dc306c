#!/usr/bin/env bash
# chaos.sh runs `chime chaos` against both backends: three nodes sharing one
# SQLite file with file locks, then three nodes on MariaDB + Redis with
# restarts of Redis and MariaDB among the faults. It starts throwaway
# servers with scripts/services.sh and stops them at the end.
#
#   scripts/chaos.sh [short|long] [extra chime chaos flags...]
#
# short (default, for CI): about 60 s of faults per backend.
# long: 10 minutes of faults per backend (CHIME_CHAOS_DURATION overrides).
#
# The tables go to stdout and, with the JSON reports and the logs, to
# $CHIME_CHAOS_OUT (default $TMPDIR/chime-chaos-out). The exit status is
# non-zero when a backend missed a fire or executed one twice.
set -uo pipefail

mode=${1:-short}
shift || true
case $mode in
short) duration=${CHIME_CHAOS_DURATION:-60s} ;;
long) duration=${CHIME_CHAOS_DURATION:-10m} ;;
*)
	echo "usage: $0 [short|long] [chime chaos flags...]" >&2
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
services_start || exit 1
cleanup() {
	services_stop
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

# Restart commands run under sh -c in a new process: they run bash, which
# sources services.sh and is given the services dir; the CHIME_TEST_*
# variables are inherited.
restart() {
	printf "bash -c 'source \"\$1\" && services_restart_%s \"\$2\"' chaos '%s' '%s'" \
		"$1" "$root/scripts/services.sh" "$_chime_svc_dir"
}
run sqlite --backend sqlite "$@"
run mysql --backend mysql --db "$CHIME_TEST_MYSQL_DSN" --redis "${CHIME_TEST_REDIS_URL%/*}/3" --redis-flush \
	--redis-restart-cmd "$(restart redis)" --db-restart-cmd "$(restart mariadb)" "$@"
exit $rc
