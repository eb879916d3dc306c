// Package bench measures a chime node: it runs a node in process, assembled
// by chime.New exactly as `chime serve` and the Go library assemble theirs,
// over an embedded (SQLite + in-process index and locks, or flock files with
// FileLocks) or cluster (MySQL/MariaDB or PostgreSQL + Redis) backend, fires
// HTTP callbacks at a receiver (in process on loopback, or in a separate
// process: see Receive), and reports how close to their instants the fires
// landed, how many per second the node sustained, and what it cost in CPU
// and memory.
//
// Three scenarios:
//
//   - steady: timers whose schedules add up to a target fire rate, measured
//     for a duration after a warm-up;
//   - burst: N one-shot timers all due at the same instant;
//   - scale: a large number of enabled timers written through the store,
//     one planning pass over the look-ahead window timed, and the REST API's
//     latency measured while the node carries them.
//
// `chime bench` is the command line over Run.
//
// # Where to start reading
//
//   - run.go: Run, from a Config (config.go) to a Report (report.go);
//   - node.go: the node under measurement and the timers given to it; the
//     node is chime.New's, seen through its hooks: the store wrapped by
//     storestats.go, the HTTP runner by the timedRunner of receiver.go;
//   - steady.go, burst.go, scale.go: one scenario each;
//   - receiver.go: where the callbacks land and how they are read back;
//   - table.go: the report as text;
//   - stats.go, resources.go (with rusage_*.go and anon_*.go), profile.go,
//     machine.go, wait.go: the measuring tools.
package bench
