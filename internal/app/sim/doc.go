// Package sim is chime's deterministic simulation: several nodes of the
// real engine (planner, scheduler, trigger, executor, sweeper, retention,
// notifier: engine.New, as chime serve assembles it) in one process, in a
// testing/synctest bubble, on simulated time. They share one SQLite store
// in memory, one slice index (internal/coord/index/memindex) and one lock server
// (internal/coord/lock/memlock), the roles a database and Redis play in a cluster; each
// node reaches them through faults drawn from the seed (faults.go):
//
//   - store: outages (calls fail), stalls (calls wait), slow commits, and
//     replies lost after the write applied;
//   - index and locks: delays, and held locks evicted (as a Redis under
//     maxmemory or failing over loses them);
//   - processes: killed (no further call, actions end) and restarted,
//     stopped cleanly (SIGTERM) and restarted, paused (frozen: no call
//     makes progress, actions are not aborted) past their leases, and
//     clocks skewed, some past the node's maximum skew.
//
// The workload (createTimers) draws timers of every kind from the seed:
// every-second cron, @every, @at, retries, each misfire and overlap policy,
// after chains and joins, broadcast and shards, max_fires, jitter, and
// pauses of timers. Their action is a Go handler that runs for a duration
// and fails with a probability drawn from the seed and the attempt, and
// records every execution (run, attempt, node and process, start and end
// in simulated time, outcome). After every simulated hour, check.go reads
// the store and that log and checks the invariants (Invariants, each
// named).
//
// Determinism. The seed fixes the workload, the faults and their instants,
// the actions' durations and outcomes, and the ids of timers (ulid's own
// entropy is seeded from the wall clock, so the simulation makes them);
// crypto/rand is seeded with testing/cryptotest.SetGlobalRandom; the bubble
// runs on one P (GOMAXPROCS 1). A fault that strikes "some" calls is decided
// by a hash of the seed, the node, the call and its simulated instant, not
// by the order of calls. What Go does not let a test fix: the order of
// select cases and of goroutines woken at one instant, and math/rand/v2's
// global generator (the scheduler's bucket order, the executor's backoff
// jitter), so two runs of a seed may differ in detail; the invariants do
// not depend on map or select order, and a failing seed replays to the
// same failure in nearly every run (docs/guarantees.md, "Deterministic
// simulation").
//
// synctest needs nothing special of chime: the modernc SQLite driver is
// pure Go, its in-memory database does no I/O, and database/sql's pool
// waits on channels, which the bubble sees as durably blocked. The store,
// index and locks are created inside the bubble (their goroutines belong
// to it) and every goroutine the simulation starts ends with it: killed
// engines are stopped with every call refused.
//
// One limit of synctest: a goroutine waiting for a sync.Mutex is not
// durably blocked, so when the engine holds a mutex across a store call
// that a fault delays on simulated time and another goroutine waits for
// that mutex, the bubble's clock stops for good. A watchdog outside the
// bubble (TestSimulation) ends the process with every stack and the seed
// after three minutes of real time without a store call, rather than
// hanging.
//
// Replay a seed: go test ./internal/app/sim -run TestSimulation -seed N -v
// (-simlog prints the engines' logs). Hunt: scripts/sim.sh N.
package sim
