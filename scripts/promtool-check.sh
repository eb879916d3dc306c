#!/usr/bin/env bash
# promtool-check.sh checks the Prometheus alerting rules of deploy/prometheus:
# the syntax and the expressions (promtool check rules) and the unit tests
# of alerts_test.yml (promtool test rules). scripts/test.sh runs it.
#
#   scripts/promtool-check.sh
#
# promtool comes with the Debian package prometheus (apt-get install -y
# prometheus; its service does not need to run). Without promtool the
# script says so and exits 0: the Go test metrics.TestAlertsAndDashboard
# still checks that every metric the rules name exists.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v promtool >/dev/null; then
	echo "promtool-check: promtool not installed (Debian package prometheus): rules not checked" >&2
	exit 0
fi
promtool check rules deploy/prometheus/alerts.yml
promtool test rules deploy/prometheus/alerts_test.yml
