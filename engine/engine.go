// Package engine assembles chime's pipeline — planner, scheduler, trigger,
// executor and sweeper — over a store, a slice index and a locker, and runs
// it as one node. `chime serve` and the Go library both run an Engine; the
// REST API drives it through the methods that package api needs.
package engine

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/chimehq/chime/clock"
	"github.com/chimehq/chime/executor"
	"github.com/chimehq/chime/index"
	"github.com/chimehq/chime/internal/startstop"
	"github.com/chimehq/chime/lock"
	"github.com/chimehq/chime/metrics"
	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/planner"
	"github.com/chimehq/chime/scheduler"
	"github.com/chimehq/chime/store"
	"github.com/chimehq/chime/sweeper"
	"github.com/chimehq/chime/trigger"
)

// Config configures an Engine. Store, Index, Locker and Elector are
// required; zero durations take the defaults of each part.
type Config struct {
	Store   store.Store
	Index   index.Index
	Locker  lock.Locker
	Elector lock.Elector

	// NodeID identifies this node in runs, locks and the node list.
	NodeID string
	// Addr is the node's API address, shown in the node list.
	Addr string
	// Runners perform actions by type; an HTTP runner is added when none
	// is given for "http".
	Runners map[string]executor.Runner

	Lookahead     time.Duration // planner window (default 10m)
	PlanInterval  time.Duration // periodic planning pass (default 15s)
	SweepInterval time.Duration // sweeper pass for overdue runs (default 2s)
	LeaseSweep    time.Duration // sweeper pass for expired leases (default 250ms)
	Tick          time.Duration // scheduler lock attempts (default 250ms)
	LockTTL       time.Duration // slice lock lease (default 1.5s)
	Lease         time.Duration // lease of a running attempt (default 10s)
	ClaimLease    time.Duration // lease of a claim until its action starts, from its instant (default 1s)
	ClaimAhead    time.Duration // claim this long before the instant (default 500ms)
	Poll          time.Duration // index poll of held slices (default 200ms)
	PoolSize      int           // actions running at once (default 10000)
	Heartbeat     time.Duration // node heartbeat (default 2s)
	MisfireGrace  time.Duration // lateness before the misfire policy applies (default model.MisfireGrace)
	// MaxClockSkew is how far this node's clock may be off the store's
	// before the node stops claiming (default 1s). Within it, the node
	// corrects its clock by the offset it measures at every heartbeat.
	MaxClockSkew time.Duration
	// Clock is this machine's clock (default clock.System(0)); the engine
	// corrects it by the offset it measures against the store.
	Clock clock.Clock

	Metrics *metrics.Metrics
	Logger  *slog.Logger
}

// Engine is one running chime node.
type Engine struct {
	cfg   Config
	plan  *planner.Planner
	exec  *executor.Executor
	trig  *trigger.Trigger
	sched *scheduler.Scheduler
	sweep *sweeper.Sweeper

	// The parts with a lifecycle, in start order (see Start and Stop).
	members   *membership
	planLoop  *planner.Loop
	sweepLoop *sweeper.Loop

	clock *clock.Corrected
	life  startstop.Base
}

// New assembles an engine. It does not start anything.
func New(cfg Config) (*Engine, error) {
	if cfg.Store == nil || cfg.Index == nil || cfg.Locker == nil || cfg.Elector == nil {
		return nil, errors.New("engine: Store, Index, Locker and Elector are required")
	}
	if cfg.NodeID == "" {
		return nil, errors.New("engine: NodeID is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.PlanInterval <= 0 {
		cfg.PlanInterval = 15 * time.Second
	}
	if cfg.SweepInterval <= 0 {
		cfg.SweepInterval = 2 * time.Second
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 2 * time.Second
	}
	if cfg.LeaseSweep <= 0 {
		cfg.LeaseSweep = 250 * time.Millisecond
	}
	if cfg.MaxClockSkew <= 0 {
		cfg.MaxClockSkew = time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System(0)
	}
	runners := map[string]executor.Runner{}
	for k, v := range cfg.Runners {
		runners[k] = v
	}
	if runners[model.ActionHTTP] == nil {
		runners[model.ActionHTTP] = executor.NewHTTPRunner()
	}
	e := &Engine{cfg: cfg, clock: clock.NewCorrected(cfg.Clock)}
	log := cfg.Logger
	// Every part reads the corrected clock: the cluster's time as this
	// node tells it. The executor's and the sweeper's own deadlines run on
	// the machine's clock (their Local default).
	clk := e.clock

	e.sweep = sweeper.New(sweeper.Config{
		Store: cfg.Store, Index: cfg.Index, Notify: e.notify, Clock: clk,
		Logger: log.With("part", "sweeper"), Metrics: cfg.Metrics,
	})
	e.members = newMembership(&membership{
		store: cfg.Store, nodeID: cfg.NodeID, addr: cfg.Addr, interval: cfg.Heartbeat, maxSkew: cfg.MaxClockSkew,
		clock: e.clock, sweep: e.sweep, slices: e.Slices, log: log, metrics: cfg.Metrics,
	})
	var err error
	e.exec, err = executor.New(executor.Config{
		Store: cfg.Store, Index: cfg.Index, NodeID: cfg.NodeID, Runners: runners,
		PoolSize: cfg.PoolSize, Lease: cfg.Lease, ClaimLease: cfg.ClaimLease, MisfireGrace: cfg.MisfireGrace, OnRetry: e.notify,
		MayClaim: e.members.mayClaim, Clock: clk, Grace: sweeper.DefaultMinGap,
		Logger: log.With("part", "executor"), Metrics: cfg.Metrics,
	})
	if err != nil {
		return nil, err
	}
	e.plan = planner.New(planner.Config{
		Store: cfg.Store, Index: cfg.Index, Lookahead: cfg.Lookahead, OnPlanned: e.notify, Clock: clk,
		Logger: log.With("part", "planner"), Metrics: cfg.Metrics,
	})
	e.trig = trigger.New(trigger.Config{
		Store: cfg.Store, Index: cfg.Index, Executor: e.exec, ClaimAhead: cfg.ClaimAhead,
		Poll: cfg.Poll, OnDone: func(s index.Slice) { e.sched.Done(s) }, Clock: clk,
		Logger: log.With("part", "trigger"),
	})
	e.sched = scheduler.New(scheduler.Config{
		Locker: cfg.Locker, Trigger: e.trig, Token: cfg.NodeID, Buckets: cfg.Index.Buckets(),
		Tick: cfg.Tick, LockTTL: cfg.LockTTL,
		LiveNodes:     func() int { return int(e.members.liveNodes.Load()) },
		PeerNeedsWork: e.members.peerNeedsWork,
		Standby:       e.members.standby,
		Clock:         clk,
		Logger:        log.With("part", "scheduler"), Metrics: cfg.Metrics,
	})
	e.planLoop = planner.NewLoop(e.plan, planner.LoopConfig{Elector: cfg.Elector, NodeID: cfg.NodeID,
		Interval: cfg.PlanInterval, Clock: clk, Logger: log.With("part", "planner")})
	e.sweepLoop = sweeper.NewLoop(e.sweep, sweeper.LoopConfig{Overdue: cfg.SweepInterval, Leases: cfg.LeaseSweep,
		Standby: e.members.standby, Clock: clk, Logger: log.With("part", "sweeper")})
	return e, nil
}

// Slices returns the names of the slices this node holds now.
func (e *Engine) Slices() []string {
	held := e.sched.Held()
	out := make([]string, len(held))
	for i, s := range held {
		out[i] = s.String()
	}
	return out
}

// Now is the cluster's time as this node tells it: its clock corrected by
// the offset from the store's clock measured at the last heartbeat.
func (e *Engine) Now() time.Time { return e.clock.Now() }

// NodeID is this node's id.
func (e *Engine) NodeID() string { return e.cfg.NodeID }

// ErrStopped is returned by Start once the engine was stopped: a stopped
// engine has released its pool and its slices and cannot start again;
// build a new one with New.
var ErrStopped = startstop.ErrStopped

// Start starts the parts, in order: membership (the clock is measured
// against the store's, the first heartbeat written, and the runs of this
// node id's previous process given back), executor, trigger, scheduler,
// the planner loop and the sweeper loop. The first planning and sweeping
// passes run before it returns, so that runs missed while the node was
// down are recovered at once.
//
// An error of a part is returned (wrapped) and the parts already started
// are stopped again. If the first part failed (the store did not answer
// the clock measurement) the engine may be started again; otherwise, and
// after Stop, Start returns ErrStopped. Start on a running engine does
// nothing. Cancelling ctx after Start returned stops nothing: call Stop.
func (e *Engine) Start(ctx context.Context) error {
	err := e.life.Start(ctx, "engine", func(context.Context) error {
		// The parts get ctx itself: it bounds their start (the clock
		// measurement), and each keeps running until Stop.
		return startstop.StartAll(ctx, context.Background(), e.parts()...)
	})
	if err != nil {
		return err
	}
	e.cfg.Logger.Info("engine started", "node", e.cfg.NodeID, "buckets", e.cfg.Index.Buckets())
	return nil
}

// parts returns the parts in start order.
func (e *Engine) parts() []startstop.Service {
	return []startstop.Service{e.members, e.exec, e.trig, e.sched, e.planLoop, e.sweepLoop}
}

// Stop stops the node. The loops stop first (sweeper, planner,
// heartbeat), then the trigger, so that nothing is dispatched once its
// slice is released; then the scheduler releases this node's slices, so
// that other nodes take them at once; then the executor lets in-flight
// actions finish until ctx is done and records their results; last the
// node leaves the node list. It does not close the store. It is safe to
// call twice, and without Start; the executor's error is returned.
func (e *Engine) Stop(ctx context.Context) error {
	return e.life.Stop(ctx, func(ctx context.Context) error {
		err := startstop.StopAll(ctx, e.sweepLoop, e.planLoop, e.members, e.trig, e.sched, e.exec)
		e.members.leave()
		e.cfg.Logger.Info("engine stopped", "node", e.cfg.NodeID)
		return err
	})
}

// Shutdown is Stop, under the name the Go library and the CLI use.
func (e *Engine) Shutdown(ctx context.Context) error { return e.Stop(ctx) }

// PoolStats reports the executor pool.
func (e *Engine) PoolStats() (running, capacity int) { return e.exec.PoolStats() }

// Nodes lists the live nodes and their slices.
func (e *Engine) Nodes(ctx context.Context) ([]model.Node, error) {
	return e.cfg.Store.ListNodes(ctx, e.clock.Now().Add(-liveFor*e.cfg.Heartbeat))
}

// Ready reports whether the engine runs and its store answers.
func (e *Engine) Ready(ctx context.Context) error {
	if !e.life.Running() {
		return errors.New("engine not started")
	}
	if why := e.members.skew.Load(); why != nil {
		return errors.New(*why)
	}
	return e.cfg.Store.Ping(ctx)
}
