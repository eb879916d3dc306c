#!/usr/bin/env bash
# test.sh runs chime's whole test suite against real servers: it starts
# Redis, MariaDB and PostgreSQL (scripts/services.sh), runs the Go tests with
# the race detector and a short chaos run (scripts/chaos.sh ci), and stops
# the servers whatever happens.
#
#   scripts/test.sh                 # all packages
#   scripts/test.sh ./internal/store/...     # some packages, extra go test flags allowed
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/services.sh
source scripts/services.sh
# The web UI's browser tests (api: TestUIBrowser) need Chromium: the Debian
# package is installed when missing (CI runs as root on a clean machine),
# and CHIME_TEST_REQUIRE_BROWSER makes the tests fail, not skip, without it.
if [[ ! -x /usr/bin/chromium ]] && [[ $(id -u) == 0 ]]; then
	echo "test.sh: installing chromium for the browser tests" >&2
	DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
export CHIME_TEST_REQUIRE_BROWSER=1
trap services_stop EXIT
services_start
if (($# == 0)); then
	# Static checks first: vet and staticcheck (pinned in go.mod as a tool).
	go vet ./...
	go tool staticcheck ./...
	# The Prometheus alerting rules, when promtool is installed.
	scripts/promtool-check.sh
	# The container image and the compose files, offline (podman build and
	# inspect, docker-compose config; installed when missing).
	scripts/deploy-check.sh
	# The suites that run whole clusters of processes, or measure time
	# (e2e, the chaos and bench smoke runs), go one package at a time after
	# the others, so that they do not starve each other on a small machine.
	heavy='/e2e$|/internal/app/chaos$|/internal/app/bench$'
	go test -race $(go list ./... | grep -Ev "$heavy")
	go test -race -p 1 $(go list ./... | grep -E "$heavy")
	# The bench smoke once more without the race detector, where it also
	# checks the fire delay (p99 under 200 ms at 500 fires/s).
	go test -count 1 -run '^TestSmoke$' ./internal/app/bench/
	# The ceilings command (docs/performance.md), as a smoke: one short
	# SQLite run at 500 fires/s (about 15 s); it fails when a run gives no
	# report.
	CEIL_SECONDS=3 CEIL_OUT="${TMPDIR:-/tmp}/chime-ceilings-smoke" scripts/bench-ceilings.sh sqlite:500
	# Short fuzz smoke runs of the parsers (about 10 s); longer ones:
	# -fuzztime=10m. A count, not a duration: a duration that runs out while
	# a worker is mid-input fails the run with "context deadline exceeded"
	# (seen once in CI), a count does not.
	go test -run '^$' -fuzz '^FuzzParse$' -fuzztime 400000x ./schedule/
	# A short chaos run on MariaDB + Redis with long actions, on the
	# servers started above (nothing else uses them any more): a kill, a
	# stall and a database restart first, then random faults, 50 s in all
	# (about 1.5 minutes of wall time); then 20 s on PostgreSQL
	# coordinated in the database alone (about 1 minute). Tables and logs
	# in $CHIME_CHAOS_OUT (default $TMPDIR/chime-chaos-out).
	scripts/chaos.sh ci
else
	go test -race "$@"
fi
