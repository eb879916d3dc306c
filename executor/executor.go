// Package executor claims runs and performs their actions. The claim, a
// conditional update in the store (pending → running with this node's id and
// a lease), is the exactly-once guard: whatever the locks and the index say,
// only one node's claim of a run succeeds. Actions run in a bounded goroutine
// pool (ants); results are recorded in batches, fenced on the node and the
// attempt, so that a node whose lease was taken over cannot overwrite the
// result of the node that took it.
package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/panjf2000/ants/v2"

	"github.com/chimehq/chime/index"
	"github.com/chimehq/chime/metrics"
	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/store"
)

// Config configures an Executor.
type Config struct {
	Store   store.Store
	Index   index.Index
	NodeID  string
	Runners map[string]Runner // by action type
	// PoolSize bounds the actions running at once. Default 10000.
	PoolSize int
	// Lease is how long a claim lasts before the sweeper may hand the run
	// to another node; the executor extends it while the action runs.
	// Default 15s.
	Lease time.Duration
	// MisfireGrace is how late a first attempt may start and still count as
	// on time; later, the timer's misfire policy applies. Default
	// model.MisfireGrace.
	MisfireGrace time.Duration
	// OnRetry is told about runs sent back to pending for a retry, after
	// they were added to the index.
	OnRetry func(entries []index.Entry)
	Now     func() time.Time
	Logger  *slog.Logger
	Metrics *metrics.Metrics
}

// Executor claims and runs runs.
type Executor struct {
	cfg  Config
	pool *ants.Pool
	rec  *recorder

	mu sync.Mutex
	// inflight holds the runs this node claimed and has not recorded yet,
	// with the cancel func of their action once it started.
	inflight map[string]context.CancelFunc
	stop     chan struct{}
	done     chan struct{}
}

// New returns an Executor; Start must be called before use.
func New(cfg Config) (*Executor, error) {
	if cfg.PoolSize <= 0 {
		cfg.PoolSize = 10000
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 10 * time.Second
	}
	if cfg.MisfireGrace <= 0 {
		cfg.MisfireGrace = model.MisfireGrace
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	pool, err := ants.NewPool(cfg.PoolSize, ants.WithExpiryDuration(30*time.Second))
	if err != nil {
		return nil, fmt.Errorf("executor pool: %w", err)
	}
	e := &Executor{cfg: cfg, pool: pool, inflight: map[string]context.CancelFunc{},
		stop: make(chan struct{}), done: make(chan struct{})}
	e.rec = newRecorder(e)
	if cfg.Metrics != nil {
		cfg.Metrics.PoolCapacity.Set(float64(cfg.PoolSize))
	}
	return e, nil
}

// Start starts the result recorder and the lease keeper.
func (e *Executor) Start() {
	go e.rec.loop()
	go e.keepLeases()
}

// Shutdown waits until in-flight actions end (or ctx is done), then flushes
// the recorded results. Claim and Submit must not be called after it.
func (e *Executor) Shutdown(ctx context.Context) error {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(30 * time.Second)
	}
	err := e.pool.ReleaseTimeout(time.Until(deadline))
	close(e.stop)
	<-e.done
	e.rec.close(ctx)
	if err != nil {
		return fmt.Errorf("executor shutdown: %w", err)
	}
	return nil
}

// Saturated reports whether the node holds so many claimed runs that are
// not finished yet (twice the pool), or so many unrecorded results, that it
// should claim no more for now: claiming what it cannot run in time would
// only let leases expire and hand the runs to another node twice.
func (e *Executor) Saturated() bool {
	e.mu.Lock()
	n := len(e.inflight)
	e.mu.Unlock()
	return n > 2*e.cfg.PoolSize || len(e.rec.ch) > cap(e.rec.ch)/2
}

// PoolStats reports the actions running and the pool's capacity.
func (e *Executor) PoolStats() (running, capacity int) {
	return e.pool.Running(), e.pool.Cap()
}

// Claim claims the runs of entries for this node and returns those it won,
// with their timers. Runs that another node claimed, or that were cancelled
// or deleted, are left out: that is not an error.
func (e *Executor) Claim(ctx context.Context, entries []index.Entry) ([]store.ClaimedRun, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	now := e.cfg.Now()
	// One DueBy for the batch (its latest instant), so that the store
	// claims the batch in one statement. A stale entry still cannot claim
	// a run rescheduled past the batch; one rescheduled within it starts at
	// its own instant, which the claim returns.
	var dueBy time.Time
	for _, en := range entries {
		if en.DueAt.After(dueBy) {
			dueBy = en.DueAt
		}
	}
	dueBy = dueBy.Add(time.Millisecond)
	claims := make([]store.Claim, len(entries))
	for i, en := range entries {
		claims[i] = store.Claim{RunID: en.RunID, Node: e.cfg.NodeID, LeaseUntil: now.Add(e.cfg.Lease), Now: now, DueBy: dueBy}
	}
	won, err := e.cfg.Store.ClaimRuns(ctx, claims)
	if err != nil {
		return nil, fmt.Errorf("claim %d runs: %w", len(entries), err)
	}
	if m := e.cfg.Metrics; m != nil {
		m.Claims.WithLabelValues("won").Add(float64(len(won)))
		m.Claims.WithLabelValues("lost").Add(float64(len(entries) - len(won)))
	}
	e.mu.Lock()
	for _, cr := range won {
		e.inflight[cr.Run.ID] = nil
	}
	e.mu.Unlock()
	return won, nil
}

// Submit runs a claimed run's action in the pool now. It blocks while the
// pool is full.
func (e *Executor) Submit(cr store.ClaimedRun) {
	if err := e.pool.Submit(func() { e.execute(cr) }); err != nil {
		// The pool is closed (shutting down): give the run back at once
		// rather than let its lease expire.
		e.cfg.Logger.Warn("submit run", "run", cr.Run.ID, "err", err)
		e.GiveBack(cr)
	}
}

// GiveBack returns a claimed run that this node will not start (it is
// shutting down) to pending, due at its instant, for another node.
func (e *Executor) GiveBack(cr store.ClaimedRun) {
	defer e.forget(cr.Run.ID)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.cfg.Store.Release(ctx, cr.Run, cr.Run.DueAt); err != nil {
		e.cfg.Logger.Warn("give back run", "run", cr.Run.ID, "err", err)
		return
	}
	if err := e.cfg.Index.Add(ctx, index.Entry{RunID: cr.Run.ID, TimerID: cr.Run.TimerID, DueAt: cr.Run.DueAt}); err != nil {
		e.cfg.Logger.Warn("give back run: index add", "run", cr.Run.ID, "err", err)
	}
}

func (e *Executor) forget(id string) {
	e.mu.Lock()
	delete(e.inflight, id)
	e.mu.Unlock()
}

func (e *Executor) execute(cr store.ClaimedRun) {
	run, t := cr.Run, cr.Timer
	start := e.cfg.Now()
	if run.LeaseUntil != nil && start.After(*run.LeaseUntil) {
		// This node was paused (or starved) past its claim's lease: another
		// node may have taken the run over. Starting it now could run it
		// twice; the sweeper recovers it instead.
		e.cfg.Logger.Warn("claim expired before the action started: leaving the run to the sweeper",
			"run", run.ID, "lease_until", *run.LeaseUntil)
		e.forget(run.ID)
		return
	}
	switch verdict, reason := e.policy(run, t, start); verdict {
	case skip:
		e.rec.add(model.Result{RunID: run.ID, Node: e.cfg.NodeID, Attempt: run.Attempt,
			Status: model.RunSkipped, StartedAt: start, FinishedAt: start, Error: reason}, t)
		return
	case hold:
		e.hold(run)
		return
	}
	m := e.cfg.Metrics
	if m != nil {
		m.PoolRunning.Set(float64(e.pool.Running()))
		m.FireDelay.Observe(start.Sub(run.DueAt).Seconds())
	}
	out, err := e.perform(run, t)
	end := e.cfg.Now()
	if m != nil {
		m.ActionDuration.WithLabelValues(t.Action.Type).Observe(end.Sub(start).Seconds())
	}
	res := model.Result{
		RunID: run.ID, Node: e.cfg.NodeID, Attempt: run.Attempt,
		Status: model.RunSucceeded, StartedAt: start, FinishedAt: end,
		Output: cleanText(out, MaxOutput),
	}
	if err != nil {
		res.Status = model.RunFailed
		res.Error = cleanText([]byte(err.Error()), MaxOutput)
		if max := t.Retry.MaxAttempts; run.Attempt < max {
			res.RetryAt = end.Add(jitter(t.Retry.Delay(run.Attempt)))
		}
	}
	e.rec.add(res, t)
}

// perform runs the action with the timer's timeout, turning a panic into an
// error that carries the stack.
func (e *Executor) perform(run *model.Run, t *model.Timer) (out []byte, err error) {
	r, ok := e.cfg.Runners[t.Action.Type]
	if !ok {
		return nil, fmt.Errorf("no runner for action type %q on node %s", t.Action.Type, e.cfg.NodeID)
	}
	timeout := t.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	e.mu.Lock()
	if _, ok := e.inflight[run.ID]; ok {
		e.inflight[run.ID] = cancel
	}
	e.mu.Unlock()
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	out, err = r.Run(ctx, run, t)
	if err != nil {
		switch {
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			err = fmt.Errorf("timed out after %s: %w", timeout, err)
		case errors.Is(ctx.Err(), context.Canceled):
			err = fmt.Errorf("cancelled (by an overlap policy, or the run was taken over): %w", err)
		}
	}
	return out, err
}

// cancelLost cancels the actions of runs this node no longer holds.
func (e *Executor) cancelLost(ids []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, id := range ids {
		if cancel := e.inflight[id]; cancel != nil {
			e.cfg.Logger.Warn("run no longer held by this node: cancelling its action", "run", id)
			cancel()
		}
	}
}

// jitter spreads retries of many runs that failed together: ±20%.
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return d - d/5 + rand.N(2*d/5+1)
}

// cleanText makes an action's output storable in every SQL dialect: valid
// UTF-8, no NUL bytes, at most max bytes.
func cleanText(b []byte, max int) string {
	if len(b) > max {
		b = b[:max]
	}
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "")
}

func (e *Executor) addToIndex(ctx context.Context, entries []index.Entry) {
	if len(entries) == 0 {
		return
	}
	if err := e.cfg.Index.Add(ctx, entries...); err != nil {
		e.cfg.Logger.Warn("index add", "runs", len(entries), "err", err)
	}
	if e.cfg.OnRetry != nil {
		e.cfg.OnRetry(entries)
	}
}

// keepLeases extends the leases of in-flight runs every third of a lease.
func (e *Executor) keepLeases() {
	defer close(e.done)
	tick := time.NewTicker(e.cfg.Lease / 3)
	defer tick.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-tick.C:
		}
		e.mu.Lock()
		ids := make([]store.Lease, 0, len(e.inflight))
		for id := range e.inflight {
			ids = append(ids, store.Lease{RunID: id})
		}
		e.mu.Unlock()
		if len(ids) == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), e.cfg.Lease/2)
		lost, err := e.cfg.Store.ExtendLeases(ctx, e.cfg.NodeID, ids, e.cfg.Now().Add(e.cfg.Lease))
		cancel()
		if err != nil {
			e.cfg.Logger.Warn("extend leases", "runs", len(ids), "err", err)
			continue
		}
		lostIDs := make([]string, len(lost))
		for i, l := range lost {
			lostIDs[i] = l.RunID
		}
		e.cancelLost(lostIDs)
	}
}
