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
	"sync/atomic"
	"time"

	"github.com/panjf2000/ants/v2"

	"github.com/chimehq/chime/clock"
	"github.com/chimehq/chime/index"
	"github.com/chimehq/chime/internal/startstop"
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
	// PoolSize bounds the actions running at once. Default DefaultPoolSize.
	PoolSize int
	// Lease is how long a running attempt's lease lasts; the executor
	// extends it about every Lease/10 while the action runs and while its
	// result waits to be recorded. It is also how long a store outage may
	// last before running actions are stopped. Default DefaultLease.
	Lease time.Duration
	// ClaimLease is how long after its instant a claimed run that has not
	// started stays this node's: a node that dies holding claims made
	// ahead of their instants strands them only this long. An action that
	// runs longer than PromoteAfter gets the full Lease. Default
	// DefaultClaimLease; the
	// executor lengthens it, up to Lease, while the store answers slowly
	// or the pool is full, so that the claim still covers the start of
	// the action and the extension that follows.
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
	Local   clock.Clock
	Logger  *slog.Logger
	Metrics *metrics.Metrics
}

// ErrShutdown refuses claims once Stop began.
var ErrShutdown = errors.New("executor shut down")

// PromoteAfter is how long an action runs on its claim's lease before the
// executor extends it to the full lease: actions shorter than that (most
// callbacks) cost no lease write at all.
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
	cfg        Config
	pool       *ants.Pool
	rec        *recorder
	renewEvery time.Duration

	mu       sync.Mutex
	inflight map[store.Lease]*attempt
	// tasks counts the runs submitted to the pool and not returned; it is
	// only added to under mu while !closing, so Stop may wait on it.
	tasks   sync.WaitGroup
	closing bool
	// waiting counts the runs submitted whose action has not begun (the
	// pool is full): past a tenth of the pool, the node claims no more.
	waiting int
	// extending is set while a lease extension is in flight.
	extending atomic.Bool
	// lag is a decaying peak, in ns, of how long the store takes to answer
	// a claim or an extension and of how late claimed actions start (the
	// pool was full): a claim's lease must cover both (see claimLease).
	lag atomic.Int64

	life startstop.Base
	stop chan struct{}
	done chan struct{}
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
		renewEvery: max(cfg.Lease/10, cfg.Tick), stop: make(chan struct{}), done: make(chan struct{})}
	e.rec = newRecorder(e)
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
		go e.keepLeases()
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
		n := e.stopAll("node shutting down", true)
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
	n, waiting := len(e.inflight), e.waiting
	e.mu.Unlock()
	return n > 2*e.cfg.PoolSize || waiting > max(e.cfg.PoolSize/10, 100) || e.rec.backlog() > cap(e.rec.ch)/2
}

// PoolStats reports the actions running and the pool's capacity.
func (e *Executor) PoolStats() (running, capacity int) {
	return e.pool.Running(), e.pool.Cap()
}

// Claim claims the runs of entries for this node and returns those it won,
// with their timers. Runs that another node claimed, or that were cancelled
// or deleted, are left out: that is not an error. The claim's lease ends
// ClaimLease after the batch's latest instant (or after now, for late runs).
func (e *Executor) Claim(ctx context.Context, entries []index.Entry) ([]store.ClaimedRun, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	if e.cfg.MayClaim != nil {
		if err := e.cfg.MayClaim(); err != nil {
			return nil, fmt.Errorf("claim %d runs: %w", len(entries), err)
		}
	}
	e.mu.Lock()
	closing := e.closing
	e.mu.Unlock()
	if closing {
		return nil, fmt.Errorf("claim %d runs: %w", len(entries), ErrShutdown)
	}
	sent, now := e.cfg.Local.Now(), e.cfg.Clock.Now()
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
	lease := e.claimLease()
	leaseUntil := now.Add(lease)
	if dueBy.After(now) {
		leaseUntil = dueBy.Add(lease)
	}
	claims := make([]store.Claim, len(entries))
	for i, en := range entries {
		claims[i] = store.Claim{RunID: en.RunID, Node: e.cfg.NodeID, LeaseUntil: leaseUntil, Now: now, DueBy: dueBy}
	}
	won, err := e.cfg.Store.ClaimRuns(ctx, claims)
	e.observe(e.cfg.Local.Now().Sub(sent))
	if err != nil {
		return nil, fmt.Errorf("claim %d runs: %w", len(entries), err)
	}
	if m := e.cfg.Metrics; m != nil {
		m.Claims.WithLabelValues("won").Add(float64(len(won)))
		m.Claims.WithLabelValues("lost").Add(float64(len(entries) - len(won)))
	}
	// The lease runs from when the claim was sent, by this node's clock.
	deadline := sent.Add(e.stopWithin(leaseUntil.Sub(now)))
	e.mu.Lock()
	for _, cr := range won {
		e.inflight[leaseOf(cr.Run)] = &attempt{run: cr.Run, deadline: deadline}
	}
	e.mu.Unlock()
	return won, nil
}

func leaseOf(r *model.Run) store.Lease { return store.Lease{RunID: r.ID, Attempt: r.Attempt} }

// stopWithin is how long after sending a claim or an extension for lease
// the attempt may go on unless the lease is confirmed again: until Margin
// before other nodes may take the run over (lease + Grace).
func (e *Executor) stopWithin(lease time.Duration) time.Duration {
	return lease + e.cfg.Grace - e.cfg.Margin
}

// observe feeds a store answer time or an action's start lag into the
// decaying peak that lengthens claim leases.
func (e *Executor) observe(d time.Duration) {
	for {
		cur := e.lag.Load()
		next := cur - cur/16 + int64(d)/16
		if int64(d) > cur {
			next = int64(d)
		}
		if e.lag.CompareAndSwap(cur, next) {
			return
		}
	}
}

// claimLease is how long after its instant a claim lasts: ClaimLease, or
// more while the store is slow or the pool full, enough for the action to
// start and its lease to be extended (three times the recent peak lag,
// plus PromoteAfter), but never more than Lease. A node that holds many
// attempts (a tenth of its pool) claims with the full Lease: under such a
// load its extensions queue behind its own claims and results, and a short
// claim would stop actions that are only slow.
func (e *Executor) claimLease() time.Duration {
	e.mu.Lock()
	n := len(e.inflight)
	e.mu.Unlock()
	if n >= e.cfg.PoolSize/10 {
		return e.cfg.Lease
	}
	need := 3*time.Duration(e.lag.Load()) + PromoteAfter + e.cfg.Margin
	return min(max(e.cfg.ClaimLease, need), e.cfg.Lease)
}

// Submit runs a claimed run's action in the pool now. It blocks while the
// pool is full.
func (e *Executor) Submit(cr store.ClaimedRun) {
	e.mu.Lock()
	closing := e.closing
	if !closing {
		e.tasks.Add(1)
		e.waiting++
		if a := e.inflight[leaseOf(cr.Run)]; a != nil && a.state == claimed {
			a.submitted, a.since = true, e.cfg.Local.Now()
		}
	}
	e.mu.Unlock()
	if closing {
		// Shutting down: give the run back at once rather than let its
		// lease expire.
		e.GiveBack(cr)
		return
	}
	if err := e.pool.Submit(func() {
		defer e.tasks.Done()
		e.mu.Lock()
		e.waiting--
		e.mu.Unlock()
		e.execute(cr)
	}); err != nil {
		e.mu.Lock()
		e.waiting--
		e.mu.Unlock()
		e.tasks.Done()
		e.cfg.Logger.Warn("submit run", "run", cr.Run.ID, "err", err)
		e.GiveBack(cr)
	}
}

// GiveBack returns a claimed run that this node will not start (it is
// shutting down) to pending, due at its instant, for another node.
func (e *Executor) GiveBack(cr store.ClaimedRun) { e.release(cr.Run, cr.Run.DueAt) }

// release gives back a claim that was not started, undoing its attempt,
// due at due, and forgets it.
func (e *Executor) release(r *model.Run, due time.Time) {
	defer e.forget(leaseOf(r))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.cfg.Store.Release(ctx, r, due); err != nil {
		e.cfg.Logger.Warn("give back run", "run", r.ID, "attempt", r.Attempt, "err", err)
		return
	}
	e.addToIndex(ctx, []index.Entry{{RunID: r.ID, TimerID: r.TimerID, DueAt: due}})
}

// later returns the later of a and b: a run given back late is due now, in
// the current minute's slice, which a trigger is reading.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// requeue gives back a run whose started attempt was stopped by shutdown:
// pending again, due now, keeping the attempt count, so that the next
// attempt carries the next X-Chime-Attempt.
func (e *Executor) requeue(r *model.Run) {
	defer e.forget(leaseOf(r))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	held := *r
	held.LeaseUntil = nil // this node's own decision: fenced on node and attempt
	now := e.cfg.Clock.Now()
	if err := e.cfg.Store.Requeue(ctx, &held, now, now); err != nil {
		e.cfg.Logger.Warn("give back stopped run", "run", r.ID, "attempt", r.Attempt, "err", err)
		return
	}
	e.addToIndex(ctx, []index.Entry{{RunID: r.ID, TimerID: r.TimerID, DueAt: now}})
}

func (e *Executor) forget(l store.Lease) {
	e.mu.Lock()
	delete(e.inflight, l)
	e.mu.Unlock()
}

// begin moves a claimed attempt to running, unless its lease ran out (the
// node paused, or the pool was full, past it) or it was stopped. It
// returns the action's context.
func (e *Executor) begin(r *model.Run, timeout time.Duration) (context.Context, context.CancelFunc, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	a := e.inflight[leaseOf(r)]
	if a == nil || a.state != claimed || !e.cfg.Local.Now().Before(a.deadline) {
		return nil, nil, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	a.state, a.since, a.cancel = running, e.cfg.Local.Now(), cancel
	return ctx, cancel, true
}

// end moves a running attempt to finished and reports whether its result
// is to be recorded; a stopped attempt's result is not (another node may
// hold the run now), and one stopped by shutdown gives its run back.
func (e *Executor) end(r *model.Run) bool {
	e.mu.Lock()
	a := e.inflight[leaseOf(r)]
	if a != nil && a.state == running {
		a.state, a.since = finished, e.cfg.Local.Now()
		e.mu.Unlock()
		return true
	}
	requeue := a != nil && a.requeue
	why := ""
	if a != nil {
		why = a.why
	}
	e.mu.Unlock()
	if requeue {
		e.requeue(r)
		return false
	}
	e.cfg.Logger.Warn("attempt stopped: its result is not recorded", "run", r.ID, "attempt", r.Attempt, "why", why)
	e.forget(leaseOf(r))
	return false
}

func (e *Executor) execute(cr store.ClaimedRun) {
	run, t := cr.Run, cr.Timer
	if !e.startable(run) {
		// This node was paused (or starved) past its claim's lease, or lost
		// it: another node may have taken the run over. Give it back (the
		// release is fenced on this attempt) rather than start it.
		e.cfg.Logger.Warn("claim's lease ran out before the action started: giving the run back",
			"run", run.ID, "attempt", run.Attempt)
		e.release(run, later(run.DueAt, e.cfg.Clock.Now()))
		return
	}
	// Never start before the instant by the cluster's clock (the trigger's
	// timer may have been armed before the clock's offset was corrected).
	if early := run.DueAt.Sub(e.cfg.Clock.Now()); early > 0 && early < time.Second {
		_ = clock.Sleep(context.Background(), e.cfg.Clock, early)
	}
	start := e.cfg.Clock.Now()
	if late := start.Sub(run.DueAt); late > 0 && run.Attempt == 1 {
		e.observe(late)
	}
	switch verdict, reason := e.policy(run, t, start); verdict {
	case skip:
		e.markFinished(run)
		e.rec.add(model.Result{RunID: run.ID, Node: e.cfg.NodeID, Attempt: run.Attempt,
			Status: model.RunSkipped, StartedAt: start, FinishedAt: start, Error: reason}, t)
		return
	case hold:
		e.hold(run)
		return
	}
	timeout := t.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel, ok := e.begin(run, timeout)
	if !ok {
		e.release(run, later(run.DueAt, e.cfg.Clock.Now()))
		return
	}
	defer cancel()
	m := e.cfg.Metrics
	if m != nil {
		m.PoolRunning.Set(float64(e.pool.Running()))
		m.FireDelay.Observe(start.Sub(run.DueAt).Seconds())
	}
	out, err := e.perform(ctx, timeout, run, t)
	end := e.cfg.Clock.Now()
	if !e.end(run) {
		return
	}
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

// startable reports whether a claimed attempt may still start.
func (e *Executor) startable(r *model.Run) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	a := e.inflight[leaseOf(r)]
	return a != nil && a.state == claimed && e.cfg.Local.Now().Before(a.deadline)
}

// markFinished moves a claimed attempt straight to finished (a skip).
func (e *Executor) markFinished(r *model.Run) {
	e.mu.Lock()
	if a := e.inflight[leaseOf(r)]; a != nil {
		a.state, a.since = finished, e.cfg.Local.Now()
	}
	e.mu.Unlock()
}

// perform runs the action with the timer's timeout, turning a panic into an
// error that carries the stack.
func (e *Executor) perform(ctx context.Context, timeout time.Duration, run *model.Run, t *model.Timer) (out []byte, err error) {
	r, ok := e.cfg.Runners[t.Action.Type]
	if !ok {
		return nil, fmt.Errorf("no runner for action type %q on node %s", t.Action.Type, e.cfg.NodeID)
	}
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
			err = fmt.Errorf("cancelled (by an overlap policy, a lost lease or shutdown): %w", err)
		}
	}
	return out, err
}

// cancelRuns stops this node's attempts of the runs ids (an overlap policy
// cancelled them in the store).
func (e *Executor) cancelRuns(ids []string, why string) {
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for l, a := range e.inflight {
		if want[l.RunID] {
			e.stopLocked(l, a, why, "taken_over")
		}
	}
}

// stopLocked stops attempt a: its action is cancelled and its result will
// not be recorded. e.mu must be held.
func (e *Executor) stopLocked(l store.Lease, a *attempt, why, reason string) {
	switch a.state {
	case stopped:
		return
	case finished:
		// The action is over; only its result waits. Whether it may still
		// be recorded is the store's fence to say.
		return
	}
	if a.state == running {
		e.cfg.Logger.Warn("stopping attempt", "run", l.RunID, "attempt", l.Attempt, "why", why)
		a.cancel()
	}
	a.state, a.why = stopped, why
	if a.cancel == nil {
		// Not started: nothing will come back for it.
		delete(e.inflight, l)
	}
	if m := e.cfg.Metrics; m != nil && reason != "" {
		m.LeasesLost.WithLabelValues(reason).Inc()
	}
}

// stopAll stops every running attempt (shutdown) and returns how many; with
// requeue their runs are given back when their actions return.
func (e *Executor) stopAll(why string, requeue bool) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for l, a := range e.inflight {
		switch a.state {
		case running:
			a.requeue = requeue
			e.stopLocked(l, a, why, "")
			n++
		case claimed:
			// Not started: the pool gives it back when its turn comes.
			e.stopLocked(l, a, why, "")
		}
	}
	return n
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

// keepLeases checks the leases every Tick: it stops the attempts whose
// lease it could not confirm in time, and extends the leases that need it,
// one extension in flight at a time, so that a stalled store delays the
// extension but never the stopping.
func (e *Executor) keepLeases() {
	defer close(e.done)
	tick := e.cfg.Local.NewTicker(e.cfg.Tick)
	defer tick.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-tick.C():
		}
		e.enforce()
		if e.extending.CompareAndSwap(false, true) {
			go func() {
				defer e.extending.Store(false)
				e.extend()
			}()
		}
	}
}

// enforce stops the attempts whose deadline passed without a confirmed
// lease: before the lease ends (by Margin), the action is cancelled and its
// result will not be recorded, so that another node that takes the run
// over never runs beside it. A claim not started yet is dropped. A finished
// attempt keeps its result: the store's fence decides whether it counts.
func (e *Executor) enforce() {
	now := e.cfg.Local.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	for l, a := range e.inflight {
		if (a.state == claimed || a.state == running) && !now.Before(a.deadline) {
			e.stopLocked(l, a, "lease not confirmed in time (store unreachable, or the node paused)", "unconfirmed")
		}
	}
}

// extend extends the leases of the attempts that need it: those running,
// or finished with their result waiting, for PromoteAfter at least, whose
// lease was last confirmed more than renewEvery ago (or is still the
// claim's). Attempts that end sooner, nearly all of them, cost no write.
func (e *Executor) extend() {
	now := e.cfg.Local.Now()
	e.mu.Lock()
	var leases []store.Lease
	for l, a := range e.inflight {
		switch {
		case a.state == claimed:
			// Due but not started (waiting for a pool worker): extend it
			// too once it waited PromoteAfter, rather than let the claim
			// run out in the queue and hand the run round again.
			if !a.submitted || now.Sub(a.since) < PromoteAfter {
				continue
			}
		case a.state != running && a.state != finished, now.Sub(a.since) < PromoteAfter:
			continue
		}
		if a.deadline.Sub(now) < e.stopWithin(e.cfg.Lease)-e.renewEvery {
			leases = append(leases, l)
		}
	}
	e.mu.Unlock()
	if len(leases) == 0 {
		return
	}
	sent, until := e.cfg.Local.Now(), e.cfg.Clock.Now().Add(e.cfg.Lease)
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.Lease/2)
	lost, err := e.cfg.Store.ExtendLeases(ctx, e.cfg.NodeID, leases, until)
	cancel()
	e.observe(e.cfg.Local.Now().Sub(sent))
	if err != nil {
		e.cfg.Logger.Warn("extend leases", "attempts", len(leases), "err", err)
		return
	}
	gone := make(map[store.Lease]bool, len(lost))
	for _, l := range lost {
		gone[l] = true
	}
	deadline := sent.Add(e.stopWithin(e.cfg.Lease))
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, l := range leases {
		a := e.inflight[l]
		if a == nil {
			continue
		}
		if gone[l] {
			e.stopLocked(l, a, "the run is no longer this attempt's (taken over, cancelled or finished)", "taken_over")
			continue
		}
		if deadline.After(a.deadline) {
			a.deadline = deadline
		}
	}
}
