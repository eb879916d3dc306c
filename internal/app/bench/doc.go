// Package bench measures a chime node: it runs a node in process, assembled
// by chime.New exactly as `chime serve` and the Go library assemble theirs,
// over an embedded (SQLite + in-process index and locks, or flock files with
// FileLocks) or cluster (MySQL/MariaDB or PostgreSQL + Redis) backend, fires
// HTTP callbacks at a receiver (in process on loopback, or in a separate
// process: see Receive), and reports how close to their instants the fires
// landed, how many per second the node sustained, and what it cost in CPU
// and memory.
//
// The scenarios:
//
//   - steady: timers whose schedules add up to a target fire rate, measured
//     for a duration after a warm-up;
//   - burst: N one-shot timers all due at the same instant;
//   - scale: a large number of enabled timers written through the store,
//     one planning pass over the look-ahead window timed, and the REST API's
//     latency measured while the node carries them;
//   - api: the REST API's latency of create, update, disable and enable
//     for every-second timers against hourly ones, then the time to enable
//     many every-second timers at once (api.go).
//
// With Config.Action ActionHandler, the timers of steady and burst run a Go
// handler registered on the node instead of an HTTP callback (handler.go).
//
// `chime bench` is the command line over Run.
//
// # Where to start reading
//
//   - run.go: Run, from a Config (config.go) to a Report (report.go);
//   - node.go: the node under measurement and the timers given to it; the
//     node is chime.New's, seen through its hooks: the store wrapped by
//     storestats.go, the action's runner by the timedRunner of receiver.go;
//   - steady.go, burst.go, scale.go, api.go: one scenario each;
//   - handler.go: the Go handler action (Config.Action) and its fire log;
//   - receiver.go: where the callbacks land and how they are read back;
//   - table.go: the report as text;
//   - stats.go, resources.go (with rusage_*.go and anon_*.go), profile.go,
//     machine.go, wait.go: the measuring tools.
package bench
