#!/usr/bin/env bash
# sim.sh hunts with the deterministic simulation (internal/app/sim): it runs N
# seeds, JOBS at a time (default: the number of CPUs), each in a test
# process of its own, and prints the seeds that broke an invariant, known
# holes included, by invariant. Each seed's output is kept in OUT.
#
#   scripts/sim.sh 1000                   # seeds 1..1000, one simulated hour each
#   FIRST=5001 HOURS=4 scripts/sim.sh 200 # seeds 5001..5200, four hours each
#   HOUR=10m scripts/sim.sh 50            # "hours" of 10 simulated minutes (faster)
#
# Replay a seed: go test ./internal/app/sim -run TestSimulation -seed N -v
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:?usage: scripts/sim.sh N}
first=${FIRST:-1}
hours=${HOURS:-1}
hour=${HOUR:-1h}
jobs=${JOBS:-$(nproc)}
out=${OUT:-$(mktemp -d -t chime-sim.XXXXXX)}
mkdir -p "$out"
go test -c -o "$out/sim.test" ./internal/app/sim
export out hours hour
seq "$first" $((first + n - 1)) | xargs -P "$jobs" -I{} sh -c \
	'"$out/sim.test" -test.run "^TestSimulation$" -test.v -seed {} -hours "$hours" -hour "$hour" -all >"$out/{}.log" 2>&1 || true'
echo "sim.sh: $n seeds from $first, $hours simulated hour(s) of $hour each; logs in $out"
grep -ho 'seed [0-9]*: [a-z-]* (hour' "$out"/*.log | awk '{print $3, $2}' | tr -d ':' | sort -u |
	awk '{s[$1] = s[$1] " " $2; c[$1]++} END {for (k in s) printf "%s (%d seeds):%s\n", k, c[k], s[k]}' | sort
if grep -L -- '--- PASS: TestSimulation ' "$out"/*.log | grep -q .; then
	echo "sim.sh: seeds with broken invariants:" $(grep -L -- '--- PASS: TestSimulation ' "$out"/*.log | xargs -n1 basename | sed 's/\.log$//' | sort -n)
	exit 1
fi
