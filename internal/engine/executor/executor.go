// Package executor claims runs and performs their actions. The claim, a
// conditional update in the store (pending → running with this node's id and
// a lease), is the exactly-once guard: whatever the locks and the index say,
// only one node's claim of a run succeeds. Actions run in a bounded goroutine
// pool (ants), each by the Runner of its type (package action); results are
// recorded in batches, fenced on the node and the attempt, so that a node
// whose lease was taken over cannot overwrite the result of the node that
// took it.
//
// Where to start reading: executor.go (the Executor, its Config, the
// Store it needs, the attempts in flight and the lifecycle); then each job
// in its own file and type:
//
//   - claim.go: Claim, the exactly-once guard, and the claim's lease sized
//     from the observed lag.
//   - execute.go: an attempt from Submit to its result: the workers,
//     starting, performing, giving runs back or requeueing them.
//   - queue.go: the work queue, which holds the submitted runs until a
//     worker takes them, by priority (runQueue) and by lane.
//   - lanes.go: the lane, the runs of one receiver sent by a few workers
//     at a time (Laner).
//   - keeper.go: the keeper, which keeps the leases of the attempts in
//     flight: it confirms a claim's full lease before its action starts,
//     extends the leases of running attempts, stops those whose lease it
//     could not confirm in time (docs/guarantees.md), and moves the
//     attempts through their states as their leases allow.
//   - fleet.go: the router, which places runs on the fleet's nodes: hands
//     a handler run to a node that has its handler, splits the fires of
//     broadcast and sharded timers into shards, and claims the runs placed
//     on this node (docs/fleet.md).
//   - recorder.go: the recorder, which writes results in batches.
//   - policy.go: the pause, misfire and overlap policies at a claim
//     (verdict).
//   - defaults.go: the defaults of Config.
//
// The runners that perform the actions are package action's.
package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/ants/v2"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/base/startstop"
	"github.com/chimehq/chime/internal/coord/index"
	"github.com/chimehq/chime/internal/engine/action"
	"github.com/chimehq/chime/internal/engine/planner"
	"github.com/chimehq/chime/internal/metrics"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// Store is what an Executor needs of the store: the claims, leases and
// results of its attempts, the runs it places on other nodes (store.Fleet)
// and the apps' secrets its runners read (store.Store implements it).
type Store interface {
	// FireLimits: a timer whose last fire ended is disabled
	// (planner.DisableIfExhausted).
	planner.FireLimits
	leaseStore // the keeper's
	fleetStore // the router's
	action.AppSecretStore
	ClaimRuns(ctx context.Context, claims []store.Claim) ([]store.ClaimedRun, error)
	FinishRuns(ctx context.Context, rs []model.Result) (ok []bool, made []*model.Run, err error)
	Release(ctx context.Context, r *model.Run, dueAt time.Time) error
	Requeue(ctx context.Context, r *model.Run, dueAt time.Time, now time.Time) error
	SetRunStatus(ctx context.Context, runID string, from model.RunStatus, to model.RunStatus, reason string) (made []*model.Run, err error)
	ListRuns(ctx context.Context, f store.RunFilter) (runs []*model.Run, next string, err error)
}

// Config configures an Executor.
type Config struct {
	Store   Store
	Index   index.Index
	NodeID  string
	Runners map[string]action.Runner // by action type
	// PoolSize bounds the actions running at once. Default DefaultPoolSize.
	PoolSize int
	// Lease is how long a running attempt's lease lasts; the executor
	// extends it about every Lease/10 while the action runs and while its
	// result waits to be recorded. It is also how long a store outage may
	// last before running actions are stopped. Default DefaultLease.
	Lease time.Duration
	// ClaimLease is how long after its instant a claimed run that has not
	// started stays this node's: a node that dies holding claims made
	// ahead of their instants strands them only this long. No action
	// starts on it: its lease is extended to the full Lease first
	// (keeper.start), unless the claim carried the full Lease. Default
	// DefaultClaimLease; the executor lengthens it, up to Lease, while
	// the store answers slowly or the pool is full, so that the claim
	// still covers the wait for a worker and the confirmation.
	ClaimLease time.Duration
	// Margin is how long before its lease would end, by this node's own
	// reckoning, the executor stops an attempt whose lease it could not
	// confirm. Default 250ms.
	Margin time.Duration
	// Grace is how long after a lease ended, by the store's clock, other
	// nodes wait before they take the run over: the sweeper's MinGap
	// between its two sightings of the expired lease. The executor counts
	// it in: it stops an unconfirmed attempt Margin before lease + Grace.
	// Default 500ms (sweeper.DefaultMinGap); it must not exceed MinGap.
	Grace time.Duration
	// Tick is how often leases are checked. Default 100ms.
	Tick time.Duration
	// MisfireGrace is how late a first attempt may start and still count as
	// on time; later, the timer's misfire policy applies. Default
	// model.MisfireGrace.
	MisfireGrace time.Duration
	// OnRetry is told about runs sent back to pending for a retry, after
	// they were added to the index.
	OnRetry func(entries []index.Entry)
	// MayClaim, when set, is asked before every claim; an error refuses
	// the claim (the node's clock is too far off the store's).
	MayClaim func() error
	// Clock is the cluster's clock (the store's, or this node's corrected
	// by its measured offset): leases and due times written to the store,
	// and compared with them, are read from it. Default clock.System(0).
	Clock clock.Clock
	// Local is this process's clock for its own deadlines (when a lease
	// it confirmed runs out); the lease keeper ticks on it. Default
	// clock.System(0), whose monotonic reading no clock step moves. Tests
	// set both to one fake clock. The result recorder's batching waits
	// run on the machine's clock whatever the clocks: they are latency,
	// not decisions.
	Local clock.Clock
	// Notifies reports whether the final results of t's runs go to the
	// store's notification outbox (store.Notifications): t has notify
	// rules, or its app has default ones. Default: t has rules.
	Notifies func(t *model.Timer) bool
	// HasHandler reports whether a Go handler is registered on this node
	// under name; nil means none is. Nodes returns the live nodes, this
	// one included, as of the last heartbeat (nil: this node alone). With
	// them the executor hands a handler run it cannot perform to a node
	// that can, skips at once (handler_missing) a run whose handler no live
	// node has, and
	// splits the fires of broadcast and sharded timers over the nodes
	// (fleet.go, docs/fleet.md).
	HasHandler func(name string) bool
	Nodes      func() []model.Node
	// DirectedPoll is how often the executor looks for the runs placed
	// on this node (shards, hand-offs). Default DefaultDirectedPoll.
	DirectedPoll time.Duration
	Logger       *slog.Logger
	Metrics      *metrics.Metrics
}

// ErrShutdown refuses claims once Stop began.
var ErrShutdown = errors.New("executor shut down")

// PromoteAfter is how long a claimed run waits for a pool worker, and how
// long an action or a result waiting to be recorded goes on, before the
// lease keeper extends its lease when it needs it.
const PromoteAfter = 250 * time.Millisecond

// Attempt states.
type state int

const (
	claimed  state = iota // claimed, action not started
	running               // action running
	finished              // action ended, result waiting to be recorded
	stopped               // lease lost or node shutting down: the result is not recorded
)

// attempt is one attempt of a run this node holds. Everything in flight is
// keyed by (run, attempt): a later attempt of the same run, on this node or
// another, is a different attempt.
type attempt struct {
	run *model.Run
	// deadline, by the Local clock, is when the attempt must have stopped
	// unless its lease is confirmed again: the confirmed end of the lease
	// less the margin.
	deadline time.Time
	state    state
	since    time.Time // Local, when the attempt entered its state (running or finished)
	cancel   context.CancelFunc
	// why says why a stopped attempt was stopped.
	why string
	// requeue: the attempt was stopped by shutdown; give the run back.
	requeue bool
	// submitted: the claim was handed to the pool (its instant came).
	submitted bool
}

// Executor claims and runs runs.
type Executor struct {
	cfg  Config
	pool *ants.Pool
	rec  *recorder

	// mu guards inflight (the attempts this node holds) and closing; the
	// lease keeper holds both mu and inflight, and guards its start
	// batches with mu.
	mu       sync.Mutex
	inflight map[store.Lease]*attempt
	// tasks counts the runs submitted to the pool and not returned; it is
	// only added to under mu while !closing, so Stop may wait on it.
	tasks   sync.WaitGroup
	closing bool
	// waiting counts the runs submitted whose action has not begun (the
	// pool is full): past a tenth of the pool, the node claims no more.
	waiting atomic.Int64
	// queue holds the submitted runs until a worker takes them (queue.go).
	queue workQueue
	// lag is a decaying peak, in ns, of how long the store takes to answer
	// a claim or an extension and of how late claimed actions start (the
	// pool was full): a claim's lease must cover both (see claimLease).
	lag atomic.Int64

	life startstop.Base
	stop chan struct{}
	done chan struct{}
	// keep keeps the leases of the attempts in flight (keeper.go); it
	// shares mu and inflight.
	keep *keeper
	// route places runs on the fleet's nodes (fleet.go).
	route *router
}

// New returns an Executor; Start must be called before use.
func New(cfg Config) (*Executor, error) {
	if cfg.PoolSize <= 0 {
		cfg.PoolSize = DefaultPoolSize
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.ClaimLease <= 0 {
		cfg.ClaimLease = DefaultClaimLease
	}
	if cfg.Margin <= 0 {
		cfg.Margin = 250 * time.Millisecond
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 500 * time.Millisecond
	}
	if cfg.Tick <= 0 {
		cfg.Tick = 100 * time.Millisecond
	}
	if cfg.MisfireGrace <= 0 {
		cfg.MisfireGrace = model.MisfireGrace
	}
	if cfg.DirectedPoll <= 0 {
		cfg.DirectedPoll = DefaultDirectedPoll
	}
	cfg.Clock = clock.Default(cfg.Clock)
	cfg.Local = clock.Default(cfg.Local)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	pool, err := ants.NewPool(cfg.PoolSize, ants.WithExpiryDuration(30*time.Second))
	if err != nil {
		return nil, fmt.Errorf("executor pool: %w", err)
	}
	e := &Executor{cfg: cfg, pool: pool, inflight: map[store.Lease]*attempt{},
		stop: make(chan struct{}), done: make(chan struct{})}
	e.queue.size, e.queue.start = cfg.PoolSize, e.startWorker
	e.rec = newRecorder(e)
	e.keep = newKeeper(e)
	e.route = newRouter(e)
	if cfg.Metrics != nil {
		cfg.Metrics.PoolCapacity.Set(float64(cfg.PoolSize))
	}
	return e, nil
}

// Start starts the result recorder and the lease keeper. It is safe to
// call twice; a stopped executor does not start again
// (startstop.ErrStopped: its pool is released).
func (e *Executor) Start(ctx context.Context) error {
	return e.life.Start(ctx, "executor", func(context.Context) error {
		go e.rec.loop()
		go e.keep.loop()
		go e.route.directedLoop()
		return nil
	})
}

// Stop lets the running actions finish until shortly before ctx's
// deadline (default 30s), then cancels the rest — an HTTP request is
// aborted, a shell action's process group killed — and gives their runs
// back as pending with the same run id and attempt count, so that another
// node attempts them again at once; it records the results that wait.
// Claim and Submit must not be called after it. It is safe to call twice,
// and without Start.
func (e *Executor) Stop(ctx context.Context) error {
	err := e.life.Stop(ctx, e.shutdown)
	// Stopped without Start (or a second time): refuse claims and release
	// the pool all the same.
	e.mu.Lock()
	e.closing = true
	e.mu.Unlock()
	e.pool.Release()
	return err
}

func (e *Executor) shutdown(ctx context.Context) error {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(30 * time.Second)
	}
	// Keep a reserve to cancel, give back and record within the deadline.
	reserve := min(2*time.Second, time.Until(deadline)/4)
	e.mu.Lock()
	e.closing = true
	e.mu.Unlock()
	var err error
	if !waitTimeout(&e.tasks, time.Until(deadline)-reserve) {
		n := e.keep.stopAll("node shutting down", true)
		e.cfg.Logger.Warn("shutdown: cancelling the actions still running; their runs go back to pending", "actions", n)
		if !waitTimeout(&e.tasks, time.Until(deadline)) {
			err = errors.New("executor shutdown: actions still running at the deadline")
		}
	}
	e.pool.Release()
	e.rec.close(ctx)
	close(e.stop)
	<-e.done
	return err
}

// waitTimeout waits for wg at most d and reports whether it is done.
func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	t := time.NewTimer(max(d, 0))
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// Saturated reports whether the node holds so many claimed runs that are
// not finished yet (twice the pool), or so many unrecorded results, that it
// should claim no more for now: claiming what it cannot run in time would
// only let leases expire and hand the runs to another node twice.
func (e *Executor) Saturated() bool {
	e.mu.Lock()
	n := len(e.inflight)
	e.mu.Unlock()
	waiting := int(e.waiting.Load())
	return n > 2*e.cfg.PoolSize || waiting > max(e.cfg.PoolSize/10, 100) || e.rec.backlog() > cap(e.rec.ch)/2
}

// notifies reports whether t's final results go to the notify outbox.
func (e *Executor) notifies(t *model.Timer) bool {
	if t == nil {
		return false
	}
	if e.cfg.Notifies != nil {
		return e.cfg.Notifies(t)
	}
	return len(t.Notify) > 0
}

// Room is how many more runs the node should claim now for the pool:
// twice the pool, less the runs it runs and those queued for a worker
// (runs claimed ahead of their instants do not count: they are bounded by
// time, not by the pool); none while Saturated. The trigger claims no
// more than that, so that the runs that wait for the pool wait unclaimed,
// where it claims them by priority.
func (e *Executor) Room() int {
	if e.Saturated() {
		return 0
	}
	n := e.queue.held()
	return max(2*e.cfg.PoolSize-n, 0)
}

// PoolStats reports the actions running and the pool's capacity.
func (e *Executor) PoolStats() (running, capacity int) {
	return e.pool.Running(), e.pool.Cap()
}

// runAttrs returns the log attributes that name an attempt of a run —
// timer_id, run_id, attempt — followed by more. Every log line about a run
// carries them (docs/observability.md, "Logs").
func runAttrs(timerID, runID string, attempt int, more ...any) []any {
	return append([]any{"timer_id", timerID, "run_id", runID, "attempt", attempt}, more...)
}
