#!/usr/bin/env bash
# promtool-check.sh checks the Prometheus alerting rules of deploy/prometheus:
# the syntax and the expressions (promtool check rules) and the unit tests
# of alerts_test.yml (promtool test rules). scripts/test.sh runs it.
#
#   scripts/promtool-check.sh
#
# promtool comes with the Debian package prometheus (apt-get install -y
# prometheus; its service does not need to run), installed below when
# missing and running as root. Without promtool the script says so and
# exits 0: the Go test metrics.TestAlertsAndDashboard still checks that
# every metric the rules name exists.
set -euo pipefail
cd "$(dirname "$0")/.."
# As root with apt-get (CI), a missing promtool is installed. The
# package's service must not start: a policy-rc.d that refuses every start
# is put in place for the install unless one exists, and a server started
# anyway is stopped.
if ! command -v promtool >/dev/null && [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
	echo "promtool-check: installing prometheus (for promtool)" >&2
	policy=/usr/sbin/policy-rc.d
	own_policy=
	if [[ ! -e $policy ]]; then
		printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && own_policy=1
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -q --no-install-recommends prometheus >/dev/null 2>&1 ||
		{ apt-get update -q >/dev/null 2>&1 && apt-get install -y -q --no-install-recommends prometheus >/dev/null 2>&1; } ||
		echo "promtool-check: apt-get install prometheus failed" >&2
	[[ -n $own_policy ]] && rm -f "$policy"
	pkill -x prometheus 2>/dev/null || true
fi
if ! command -v promtool >/dev/null; then
	echo "promtool-check: promtool not installed (Debian package prometheus): rules not checked" >&2
	exit 0
fi
promtool check rules deploy/prometheus/alerts.yml
promtool test rules deploy/prometheus/alerts_test.yml
