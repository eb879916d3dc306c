// Package engine assembles chime's pipeline — planner, scheduler, trigger,
// executor and sweeper — over a store, a slice index and a locker, and runs
// it as one node. `chime serve` and the Go library both run an Engine; the
// REST API drives it through the methods that package api needs.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chimehq/chime/clock"
	"github.com/chimehq/chime/executor"
	"github.com/chimehq/chime/index"
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

	Lookahead     time.Duration // planner window (default planner.DefaultLookahead)
	PlanInterval  time.Duration // periodic planning pass (default 15s)
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
	// MaxClockSkew is how far this node's clock may be off the store's
	// before the node stops claiming (default DefaultMaxClockSkew). Within it, the node
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

	clock *clock.Corrected
	// skew holds why the node must not claim (its clock is too far off the
	// store's), or nil.
	skew atomic.Pointer[string]

	started   atomic.Bool
	closed    atomic.Bool // shut down: cannot start again
	liveNodes atomic.Int64
	peers     atomic.Pointer[[]model.Node] // other live nodes, from the last heartbeat
	startedAt time.Time

	stop chan struct{}
	wg   sync.WaitGroup
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
		cfg.MaxClockSkew = DefaultMaxClockSkew
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
	e := &Engine{cfg: cfg, stop: make(chan struct{}), clock: clock.NewCorrected(cfg.Clock)}
	e.liveNodes.Store(1)
	log := cfg.Logger
	now := e.clock.Now

	var err error
	e.exec, err = executor.New(executor.Config{
		Store: cfg.Store, Index: cfg.Index, NodeID: cfg.NodeID, Runners: runners,
		PoolSize: cfg.PoolSize, Lease: cfg.Lease, ClaimLease: cfg.ClaimLease, MisfireGrace: cfg.MisfireGrace, OnRetry: e.notify,
		MayClaim: e.mayClaim, Now: now, Grace: sweeper.DefaultMinGap,
		Logger: log.With("part", "executor"), Metrics: cfg.Metrics,
	})
	if err != nil {
		return nil, err
	}
	e.plan = planner.New(planner.Config{
		Store: cfg.Store, Index: cfg.Index, Lookahead: cfg.Lookahead, OnPlanned: e.notify, Now: now,
		Logger: log.With("part", "planner"), Metrics: cfg.Metrics,
	})
	e.trig = trigger.New(trigger.Config{
		Store: cfg.Store, Index: cfg.Index, Executor: e.exec, ClaimAhead: cfg.ClaimAhead,
		Poll: cfg.Poll, OnDone: func(s index.Slice) { e.sched.Done(s) }, Now: now,
		Logger: log.With("part", "trigger"),
	})
	e.sched = scheduler.New(scheduler.Config{
		Locker: cfg.Locker, Trigger: e.trig, Token: cfg.NodeID, Buckets: cfg.Index.Buckets(),
		Tick: cfg.Tick, LockTTL: cfg.LockTTL,
		LiveNodes:     func() int { return int(e.liveNodes.Load()) },
		PeerNeedsWork: e.peerNeedsWork,
		Standby:       func() bool { return e.skew.Load() != nil },
		Now:           now,
		Logger:        log.With("part", "scheduler"), Metrics: cfg.Metrics,
	})
	e.sweep = sweeper.New(sweeper.Config{
		Store: cfg.Store, Index: cfg.Index, Notify: e.notify, Now: now,
		Logger: log.With("part", "sweeper"), Metrics: cfg.Metrics,
	})
	return e, nil
}

func (e *Engine) notify(entries []index.Entry) {
	if e.trig != nil {
		e.trig.Notify(entries)
	}
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

// Start starts every part. The first planning and sweeping passes run
// before it returns, so that runs missed while the node was down are
// recovered at once.
func (e *Engine) Start(ctx context.Context) error {
	if e.started.Load() || e.closed.Load() {
		return errors.New("engine: Start called twice")
	}
	// The clock first: nothing is claimed before the node knows its
	// offset from the store's clock.
	if err := e.measureClock(ctx); err != nil {
		return fmt.Errorf("engine start: %w", err)
	}
	e.startedAt = e.clock.Now()
	e.heartbeat(ctx)
	// Runs that this node id held when its previous process died are
	// nobody's now: give them back before claiming anything.
	if _, err := e.sweep.Recover(ctx, e.cfg.NodeID); err != nil {
		e.cfg.Logger.Warn("recover the runs of this node's previous process", "err", err)
	}
	e.exec.Start()
	e.trig.Start()
	e.sched.Start()
	e.leaderPass(ctx, "planner", func(ctx context.Context) error { _, err := e.plan.PlanDue(ctx); return err })
	e.sweepPass(ctx)
	e.loop(e.cfg.PlanInterval, func(ctx context.Context) {
		e.leaderPass(ctx, "planner", func(ctx context.Context) error { _, err := e.plan.PlanDue(ctx); return err })
	})
	e.loop(e.cfg.SweepInterval, e.sweepPass)
	e.loop(e.cfg.LeaseSweep, e.leaseSweepPass)
	e.loop(e.cfg.Heartbeat, e.heartbeat)
	e.started.Store(true)
	e.cfg.Logger.Info("engine started", "node", e.cfg.NodeID, "buckets", e.cfg.Index.Buckets())
	return nil
}

// loop runs f every interval until Shutdown.
func (e *Engine) loop(interval time.Duration, f func(ctx context.Context)) {
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-e.stop:
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*interval+10*time.Second)
			f(ctx)
			cancel()
		}
	}()
}

// sweepPass runs the sweeper. Every node sweeps: its updates are all
// conditional, so nodes racing on one run are harmless, and recovery does
// not wait for a leader that may be the very node that paused.
func (e *Engine) sweepPass(ctx context.Context) {
	if e.skew.Load() != nil {
		return
	}
	if _, err := e.sweep.SweepOverdue(ctx); err != nil {
		e.cfg.Logger.Warn("sweeper pass", "err", err)
	}
}

// leaseSweepPass recovers the runs whose lease expired: often, since it
// bounds how long a dead node's claims wait (claim lease + two passes).
func (e *Engine) leaseSweepPass(ctx context.Context) {
	if e.skew.Load() != nil {
		return
	}
	if _, err := e.sweep.SweepLeases(ctx); err != nil {
		e.cfg.Logger.Warn("sweeper pass", "err", err)
	}
}

// ErrClockSkew is returned by claims of a node whose clock is further off
// the store's than MaxClockSkew.
var ErrClockSkew = errors.New("clock skew")

func (e *Engine) mayClaim() error {
	if why := e.skew.Load(); why != nil {
		return fmt.Errorf("%w: %s", ErrClockSkew, *why)
	}
	return nil
}

// measureClock measures this node's offset from the store's clock and
// corrects the engine's clock by it. A node further off than MaxClockSkew
// stands by: it claims nothing and hands its slices over until a later
// measurement finds it within bounds again.
func (e *Engine) measureClock(ctx context.Context) error {
	offset, rtt, err := clock.Estimate(e.clock.Base(), 3, func() (time.Time, error) { return e.cfg.Store.Now(ctx) })
	if err != nil {
		return fmt.Errorf("measure the clock against the store: %w", err)
	}
	if rtt > e.cfg.MaxClockSkew/2 {
		// Too slow an answer to tell the offset within the bound; keep the
		// last one.
		e.cfg.Logger.Warn("clock measurement discarded: the store answered too slowly", "rtt", rtt)
		return nil
	}
	e.clock.SetOffset(offset)
	skew := -offset // this node's clock minus the store's
	if m := e.cfg.Metrics; m != nil {
		m.ClockSkew.Set(skew.Seconds())
	}
	if skew.Abs() > e.cfg.MaxClockSkew {
		why := fmt.Sprintf("clock skew: this node's clock is %s off the store's, more than --max-clock-skew %s; not claiming runs",
			skew.Round(time.Millisecond), e.cfg.MaxClockSkew)
		if old := e.skew.Swap(&why); old == nil {
			e.cfg.Logger.Error(why, "skew", skew)
		}
		return nil
	}
	if old := e.skew.Swap(nil); old != nil {
		e.cfg.Logger.Info("clock skew back within bounds; claiming again", "skew", skew)
	}
	return nil
}

// leaderPass runs f if this node is the leader of service.
func (e *Engine) leaderPass(ctx context.Context, service string, f func(context.Context) error) {
	hold := 3 * e.cfg.PlanInterval
	leader, err := e.cfg.Elector.Select(ctx, service, e.cfg.NodeID, hold)
	if err != nil {
		e.cfg.Logger.Warn("leader election", "service", service, "err", err)
		return
	}
	if leader != e.cfg.NodeID {
		return
	}
	if err := f(ctx); err != nil {
		e.cfg.Logger.Warn(service+" pass", "err", err)
	}
}

func (e *Engine) heartbeat(ctx context.Context) {
	if err := e.measureClock(ctx); err != nil {
		e.cfg.Logger.Warn("heartbeat", "err", err)
	}
	now := e.clock.Now()
	n := model.Node{ID: e.cfg.NodeID, Addr: e.cfg.Addr, StartedAt: e.startedAt, SeenAt: now, Slices: e.Slices()}
	if err := e.cfg.Store.Heartbeat(ctx, n); err != nil {
		e.cfg.Logger.Warn("heartbeat", "err", err)
		return
	}
	nodes, err := e.cfg.Store.ListNodes(ctx, now.Add(-liveFor*e.cfg.Heartbeat))
	if err == nil && len(nodes) > 0 {
		e.liveNodes.Store(int64(len(nodes)))
		peers := make([]model.Node, 0, len(nodes))
		for _, nd := range nodes {
			if nd.ID != e.cfg.NodeID {
				peers = append(peers, nd)
			}
		}
		e.peers.Store(&peers)
	}
}

// liveFor is how many heartbeat intervals a node stays in the node list
// after its last heartbeat.
const liveFor = 3

// peerNeedsWork reports whether another live node held fewer than share
// slices of minute m at its last heartbeat.
func (e *Engine) peerNeedsWork(m int64, share int) bool {
	p := e.peers.Load()
	if p == nil {
		return false
	}
	prefix := fmt.Sprintf("%d:", m)
	for _, nd := range *p {
		n := 0
		for _, s := range nd.Slices {
			if strings.HasPrefix(s, prefix) {
				n++
			}
		}
		if n < share {
			return true
		}
	}
	return false
}

// Shutdown stops dispatching, releases this node's slices so that other
// nodes take them at once, lets in-flight actions finish until ctx is done,
// and records their results. It does not close the store.
func (e *Engine) Shutdown(ctx context.Context) error {
	if !e.started.Swap(false) {
		return nil
	}
	e.closed.Store(true)
	close(e.stop)
	e.wg.Wait()
	e.trig.Stop()
	e.sched.Stop(ctx)
	err := e.exec.Shutdown(ctx)
	dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if derr := e.cfg.Store.DeleteNode(dctx, e.cfg.NodeID); derr != nil {
		e.cfg.Logger.Warn("remove node", "err", derr)
	}
	e.cfg.Logger.Info("engine stopped", "node", e.cfg.NodeID)
	return err
}

// TimerSaved replans a timer after it was created, updated, enabled or
// disabled. When scheduleChanged, its future pending runs are replaced
// (enabled) or cancelled (disabled).
func (e *Engine) TimerSaved(ctx context.Context, t *model.Timer, scheduleChanged bool) error {
	if !scheduleChanged {
		return nil
	}
	now := e.clock.Now()
	if !t.Enabled {
		if _, err := e.cfg.Store.CancelPendingRuns(ctx, t.ID, time.Time{}); err != nil {
			return fmt.Errorf("cancel runs of timer %s: %w", t.ID, err)
		}
		return nil
	}
	if _, err := e.cfg.Store.DeletePendingRuns(ctx, t.ID, now); err != nil {
		return fmt.Errorf("replace runs of timer %s: %w", t.ID, err)
	}
	t2 := *t
	t2.PlannedUntil = time.Time{}
	if err := e.plan.PlanTimer(ctx, &t2); err != nil {
		return fmt.Errorf("plan timer %s: %w", t.ID, err)
	}
	return nil
}

// TimerDeleted is called after a timer was deleted; the store removed its
// runs, and index entries left behind are dropped when their claim fails.
func (e *Engine) TimerDeleted(ctx context.Context, id string) error { return nil }

// Trigger fires t now, outside its schedule, and returns the run.
func (e *Engine) Trigger(ctx context.Context, t *model.Timer) (*model.Run, error) {
	now := e.clock.Now()
	r := &model.Run{ID: model.RunID(t.ID, now), TimerID: t.ID, ScheduledAt: now, DueAt: now,
		Status: model.RunPending, Manual: true, CreatedAt: now}
	if _, err := e.cfg.Store.InsertRuns(ctx, []*model.Run{r}); err != nil {
		return nil, fmt.Errorf("trigger timer %s: %w", t.ID, err)
	}
	won, err := e.exec.Claim(ctx, []index.Entry{{RunID: r.ID, TimerID: t.ID, DueAt: now}})
	if err != nil {
		return nil, fmt.Errorf("trigger timer %s: %w", t.ID, err)
	}
	for _, cr := range won {
		run := *cr.Run
		e.exec.Submit(cr)
		return &run, nil
	}
	return e.cfg.Store.GetRun(ctx, r.ID)
}

// Backfill runs now, once each, t's fires in [from, to]: it plans them as
// manual runs (exempt from the misfire and overlap policies), due now. A
// fire that already has a run is not run again. It returns the runs that
// were planned.
func (e *Engine) Backfill(ctx context.Context, t *model.Timer, from, to time.Time, max int) ([]*model.Run, error) {
	s, err := planner.ScheduleOf(t)
	if err != nil {
		return nil, err
	}
	now := e.clock.Now()
	var runs []*model.Run
	for f := s.Next(from.Add(-time.Nanosecond)); !f.IsZero() && !f.After(to); f = s.Next(f) {
		if len(runs) == max {
			return nil, fmt.Errorf("backfill timer %s: more than %d fires in [%s, %s]: %w", t.ID, max,
				from.Format(time.RFC3339), to.Format(time.RFC3339), model.ErrTooManyFires)
		}
		runs = append(runs, &model.Run{ID: model.RunID(t.ID, f), TimerID: t.ID, ScheduledAt: f, DueAt: now,
			Status: model.RunPending, Manual: true, CreatedAt: now})
	}
	inserted, err := e.cfg.Store.InsertRuns(ctx, runs)
	if err != nil {
		return nil, fmt.Errorf("backfill timer %s: %w", t.ID, err)
	}
	entries := make([]index.Entry, len(inserted))
	for i, r := range inserted {
		entries[i] = index.Entry{RunID: r.ID, TimerID: r.TimerID, DueAt: r.DueAt}
	}
	if len(entries) > 0 {
		if err := e.cfg.Index.Add(ctx, entries...); err != nil {
			e.cfg.Logger.Warn("backfill: index add", "err", err)
		}
		e.notify(entries)
	}
	return inserted, nil
}

// PoolStats reports the executor pool.
func (e *Engine) PoolStats() (running, capacity int) { return e.exec.PoolStats() }

// Nodes lists the live nodes and their slices.
func (e *Engine) Nodes(ctx context.Context) ([]model.Node, error) {
	return e.cfg.Store.ListNodes(ctx, e.clock.Now().Add(-liveFor*e.cfg.Heartbeat))
}

// Ready reports whether the engine runs and its store answers.
func (e *Engine) Ready(ctx context.Context) error {
	if !e.started.Load() {
		return errors.New("engine not started")
	}
	if why := e.skew.Load(); why != nil {
		return errors.New(*why)
	}
	return e.cfg.Store.Ping(ctx)
}
