package engine

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/base/startstop"
	"github.com/chimehq/chime/internal/coord/index"
	"github.com/chimehq/chime/internal/coord/lock"
	"github.com/chimehq/chime/internal/engine/action"
	"github.com/chimehq/chime/internal/engine/executor"
	"github.com/chimehq/chime/internal/engine/notify"
	"github.com/chimehq/chime/internal/engine/planner"
	"github.com/chimehq/chime/internal/engine/retention"
	"github.com/chimehq/chime/internal/engine/scheduler"
	"github.com/chimehq/chime/internal/engine/sweeper"
	"github.com/chimehq/chime/internal/engine/trigger"
	"github.com/chimehq/chime/internal/metrics"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
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
	Runners map[string]action.Runner
	// Handlers returns the names of the Go handlers registered on this
	// node: the node advertises them with its heartbeat, and runs of a
	// handler it lacks go to a node that has it (docs/fleet.md). Nil: none.
	Handlers func() []string
	// HasHandler, when set, tells whether a handler is registered on this
	// node faster than a search of Handlers.
	HasHandler func(name string) bool

	Lookahead    time.Duration // planner window (default planner.DefaultLookahead)
	PlanInterval time.Duration // periodic planning pass (default DefaultPlanInterval)
	// PlanFires and PlanAhead bound each timer's plan by count: its next
	// PlanFires fires or PlanAhead, whichever is later, up to Lookahead
	// (planner.Config.FiresAhead and MinAhead; defaults
	// planner.DefaultFiresAhead and 6 × PlanInterval, so that a plan
	// outlasts a planner leader's failover).
	PlanFires     int
	PlanAhead     time.Duration
	SweepInterval time.Duration // sweeper pass for overdue runs (default 2s)
	LeaseSweep    time.Duration // sweeper pass for expired leases (default 250ms)
	Tick          time.Duration // scheduler lock attempts (default 250ms)
	LockTTL       time.Duration // slice lock lease (default scheduler.DefaultLockTTL)
	Lease         time.Duration // lease of a running attempt (default executor.DefaultLease)
	ClaimLease    time.Duration // lease of a claim until its action starts, from its instant (default executor.DefaultClaimLease)
	ClaimAhead    time.Duration // claim this long before the instant (default trigger.DefaultClaimAhead)
	Poll          time.Duration // index poll of held slices (default 200ms)
	PoolSize      int           // actions running at once (default executor.DefaultPoolSize)
	Heartbeat     time.Duration // node heartbeat (default 2s)
	MisfireGrace  time.Duration // lateness before the misfire policy applies (default model.MisfireGrace)
	// Coordination is where Locker, Elector and Index keep their state
	// (model.CoordinationRedis, CoordinationDB, CoordinationLocal), as the
	// node publishes it with its heartbeat. Start fails with
	// ErrCoordinationMismatch while a live node of the store publishes
	// another.
	Coordination string
	// HistoryKeep and HistoryMaxAge are the defaults of a timer's
	// history.keep and history.max_age, and HistoryMaxAge the age of the
	// audit entries deleted (retention.Config.Keep and MaxAge: zero means
	// retention.DefaultKeep and DefaultMaxAge, negative no limit).
	HistoryKeep   int
	HistoryMaxAge time.Duration
	// RetentionInterval is the time between the retention leader's passes
	// (default retention.DefaultInterval).
	RetentionInterval time.Duration
	// MaxClockSkew is how far this node's clock may be off the store's
	// before the node stops claiming (default DefaultMaxClockSkew). Within it, the node
	// corrects its clock by the offset it measures at every heartbeat.
	MaxClockSkew time.Duration
	// Clock is this machine's clock (default clock.System(0)); the engine
	// corrects it by the offset it measures against the store, and every
	// part tells time, and makes its timers and tickers, by the corrected
	// clock. See the package doc for the caveat of a clock.Fake.
	Clock clock.Clock

	// Notify configures the failure notifications' deliveries (package
	// notify); its Store, Clock and Logger are the engine's. Nil: the
	// defaults, webhooks unsigned through a client without an egress
	// policy, no email.
	Notify *notify.Config

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
	members    *membership
	planLoop   *planner.Loop
	sweepLoop  *sweeper.Loop
	retainLoop *retention.Loop
	stats      *statsWriter    // the dashboard's minutes (dashboard.go)
	statsLoop  *startstop.Loop // runs stats
	notifier   *notify.Notifier

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
		cfg.PlanInterval = DefaultPlanInterval
	}
	if cfg.PlanAhead <= 0 {
		cfg.PlanAhead = planAheadPasses * cfg.PlanInterval
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
		cfg.MaxClockSkew = DefaultMaxClockSkew
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System(0)
	}
	runners := map[string]action.Runner{}
	for k, v := range cfg.Runners {
		runners[k] = v
	}
	if runners[model.ActionHTTP] == nil {
		runners[model.ActionHTTP] = action.NewHTTPRunner()
	}
	e := &Engine{cfg: cfg, clock: clock.NewCorrected(cfg.Clock)}
	log := cfg.Logger
	// Every part reads the corrected clock: the cluster's time as this
	// node tells it. The executor's and the sweeper's own deadlines run on
	// the machine's clock (their Local default).
	clk := e.clock

	lockTTL := cfg.LockTTL
	if lockTTL <= 0 {
		lockTTL = scheduler.DefaultLockTTL
	}
	var members *membership
	e.sweep = sweeper.New(sweeper.Config{
		Store: cfg.Store, Index: cfg.Index, Notify: e.notify, Clock: clk,
		LiveNodes: func() ([]string, bool) { return members.liveIDs() },
		Logger:    log.With("part", "sweeper"), Metrics: cfg.Metrics,
	})
	members = newMembership(&membership{
		store: cfg.Store, nodeID: cfg.NodeID, addr: cfg.Addr, interval: cfg.Heartbeat, maxSkew: cfg.MaxClockSkew,
		clock: e.clock, sweep: e.sweep, slices: e.Slices, pool: e.PoolStats, handlers: cfg.Handlers, lockTTL: lockTTL,
		coordination: cfg.Coordination, log: log, metrics: cfg.Metrics,
	})
	defaults := notify.NewAppDefaults(cfg.Store, clk)
	e.members = members
	hasHandler := cfg.HasHandler
	if hasHandler == nil {
		hasHandler = func(name string) bool { return cfg.Handlers != nil && slices.Contains(cfg.Handlers(), name) }
	}
	var err error
	e.exec, err = executor.New(executor.Config{
		Notifies: defaults.Notifies,
		Store:    cfg.Store, Index: cfg.Index, NodeID: cfg.NodeID, Runners: runners,
		PoolSize: cfg.PoolSize, Lease: cfg.Lease, ClaimLease: cfg.ClaimLease, MisfireGrace: cfg.MisfireGrace, OnRetry: e.notify,
		MayClaim: e.members.mayClaim, Clock: clk, Grace: sweeper.DefaultMinGap,
		HasHandler: hasHandler, Nodes: e.members.nodes,
		Logger: log.With("part", "executor"), Metrics: cfg.Metrics,
	})
	if err != nil {
		return nil, err
	}
	e.plan = planner.New(planner.Config{
		Store: cfg.Store, Index: cfg.Index, Lookahead: cfg.Lookahead, OnPlanned: e.notify, Clock: clk,
		FiresAhead: cfg.PlanFires, MinAhead: cfg.PlanAhead, PassBudget: 2 * cfg.PlanInterval, MisfireGrace: cfg.MisfireGrace,
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
		PeerJoining:   e.members.peerJoining,
		Standby:       e.members.standby,
		Clock:         clk,
		Logger:        log.With("part", "scheduler"), Metrics: cfg.Metrics,
	})
	e.planLoop = planner.NewLoop(e.plan, planner.LoopConfig{Elector: cfg.Elector, NodeID: cfg.NodeID,
		Interval: cfg.PlanInterval, Clock: clk, Logger: log.With("part", "planner")})
	e.sweepLoop = sweeper.NewLoop(e.sweep, sweeper.LoopConfig{Overdue: cfg.SweepInterval, Leases: cfg.LeaseSweep,
		Standby: e.members.standby, Clock: clk, Logger: log.With("part", "sweeper")})
	e.retainLoop = retention.NewLoop(retention.New(retention.Config{
		Store: cfg.Store, Keep: cfg.HistoryKeep, MaxAge: cfg.HistoryMaxAge, Clock: clk,
		Metrics: cfg.Metrics, Logger: log.With("part", "retention"),
	}), retention.LoopConfig{Elector: cfg.Elector, NodeID: cfg.NodeID, Interval: cfg.RetentionInterval,
		Standby: e.members.standby, Clock: clk, Logger: log.With("part", "retention")})
	e.stats = newStatsWriter(e)
	e.statsLoop = &startstop.Loop{Name: "stats loop", Interval: StatsInterval, Clock: clk, Pass: e.stats.pass}
	var nc notify.Config
	if cfg.Notify != nil {
		nc = *cfg.Notify
	}
	nc.Store, nc.Clock, nc.Logger = cfg.Store, clk, log.With("part", "notifier")
	if nc.AppDefaults == nil {
		nc.AppDefaults = defaults.Rules
	}
	e.notifier = notify.New(nc)
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

// Clock is the cluster's clock as this node tells it (see Now), for the
// parts built around the engine that judge shared instants (file locks).
func (e *Engine) Clock() clock.Clock { return e.clock }

// NodeID is this node's id.
func (e *Engine) NodeID() string { return e.cfg.NodeID }

// PoolStats reports the executor pool.
func (e *Engine) PoolStats() (running, capacity int) { return e.exec.PoolStats() }

// Nodes lists the live nodes and their slices.
func (e *Engine) Nodes(ctx context.Context) ([]model.Node, error) {
	return e.cfg.Store.ListNodes(ctx, e.clock.Now().Add(-liveFor*e.cfg.Heartbeat))
}
