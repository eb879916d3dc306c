// Package engine assembles chime's pipeline — planner, scheduler, trigger,
// executor and sweeper, and the retention of old runs — over a store, a slice index and a locker, and runs
// it as one node. `chime serve` and the Go library both run an Engine; the
// REST API drives it through the methods that package api needs.
//
// Where to start reading: engine.go (Config, and New, which wires the
// parts to each other and to one clock), then lifecycle.go (the order in
// which Start and Stop start and stop them), membership.go (the clock
// measured against the store's, the heartbeat, the fair-share view of the
// other nodes) and runs.go (what the REST API asks of the engine: replan,
// trigger, backfill). Each part is a startstop.Service of its own package:
// trigger, scheduler, executor, planner.Loop, sweeper.Loop,
// retention.Loop.
//
// Every part tells time by the engine's clock: Config.Clock corrected by
// the offset that membership measures against the store's clock at every
// heartbeat (package clock), and the parts' timers and tickers come from
// it too. Caveat: a clock.Fake in Config.Clock drives those timers, but the
// store's clock keeps real time, so the node stands by (claims nothing) as
// soon as the fake is further than MaxClockSkew from it. The engine's tests
// therefore run on the machine's clock; the parts' own tests use fakes.
package engine
