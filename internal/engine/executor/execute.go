package executor

// This file: an attempt from Submit to its result — starting it in the
// pool, performing the action, and giving runs back or requeueing them.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"strings"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/coord/index"
	"github.com/chimehq/chime/internal/engine/action"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// Submit runs a claimed run's action in the pool: now, or as soon as a
// worker is free, before the runs queued with a lower priority
// (store.ClaimOrder). It does not block.
func (e *Executor) Submit(cr store.ClaimedRun) { e.SubmitAll([]store.ClaimedRun{cr}) }

// SubmitAll submits the claimed runs of crs as Submit does, under one
// acquisition of the executor's lock: the trigger hands a herd (the runs
// of one instant) over in one call, and its goroutine, which competes for
// the cores with the actions it starts, does not queue for the lock once
// per run behind them.
//
// Runs wait for a worker in the executor's queue, higher timer priority
// first, then earlier due, then in the order submitted: when the pool is
// full, a priority-9 run submitted after a hundred priority-0 ones starts
// first. At most PoolSize workers run; each takes the next queued run when
// its action ends. The runs of a Laner's actions (HTTP callbacks) also
// wait for their lane (lanes.go): a few of one receiver's runs are in
// flight at once, more while it answers slowly, and in each lane the
// runs start in the same order.
func (e *Executor) SubmitAll(crs []store.ClaimedRun) {
	e.mu.Lock()
	closing := e.closing
	if !closing {
		e.tasks.Add(len(crs))
		e.waiting.Add(int64(len(crs)))
		now := e.cfg.Local.Now()
		for _, cr := range crs {
			if a := e.inflight[leaseOf(cr.Run)]; a != nil && a.state == claimed {
				a.submitted, a.since = true, now
			}
		}
	}
	e.mu.Unlock()
	if closing {
		for _, cr := range crs {
			// Shutting down: give the run back at once rather than let
			// its lease expire.
			e.GiveBack(cr)
		}
		return
	}
	// A run submitted before its instant (the trigger submits those due
	// within armNow at once) waits for it in its worker (execute): it gets
	// a worker of its own rather than hold one of its lane's.
	qs := make([]queued, len(crs))
	due := e.cfg.Clock.Now()
	for i, cr := range crs {
		var key string
		var conns int
		if !cr.Run.DueAt.After(due) {
			key, conns = e.laneOf(cr.Timer)
		}
		qs[i] = queued{cr: cr, prio: cr.Timer.EffectivePriority(), lane: key, conns: conns}
	}
	start := e.queue.push(qs, time.Now())
	for _, j := range start {
		e.startWorker(j)
	}
}

// startWorker runs a worker in the pool that performs j, then the queued
// runs, until none is left for it. When the pool refuses (it was released
// by shutdown), the run is given back, and so are the queued ones.
func (e *Executor) startWorker(j job) {
	for {
		err := e.pool.Submit(func() { e.work(j) })
		if err == nil {
			return
		}
		e.waiting.Add(-1)
		e.tasks.Done()
		e.cfg.Logger.Warn("submit run", runAttrs(j.cr.Run.TimerID, j.cr.Run.ID, j.cr.Run.Attempt, "err", err)...)
		e.GiveBack(j.cr)
		next, more, ok := e.queue.next(j, false)
		for _, m := range more {
			e.startWorker(m)
		}
		if !ok {
			return
		}
		j = next
	}
}

// work is one worker: it performs j, then the next runs next gives it.
func (e *Executor) work(j job) {
	for {
		e.waiting.Add(-1)
		e.execute(j.cr)
		e.tasks.Done()
		next, more, ok := e.queue.next(j, true)
		for _, m := range more {
			e.startWorker(m)
		}
		if !ok {
			return
		}
		j = next
	}
}

// GiveBack returns a claimed run that this node will not start (it is
// shutting down) to pending, due at its instant, for another node.
func (e *Executor) GiveBack(cr store.ClaimedRun) { e.release(cr.Run, cr.Run.DueAt) }

// release gives back a claim that was not started, undoing its attempt,
// due at due, and forgets it.
func (e *Executor) release(r *model.Run, due time.Time) {
	defer e.keep.forget(leaseOf(r))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.cfg.Store.Release(ctx, r, due); err != nil {
		e.cfg.Logger.Warn("give back run", runAttrs(r.TimerID, r.ID, r.Attempt, "err", err)...)
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
	defer e.keep.forget(leaseOf(r))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	held := *r
	held.LeaseUntil = nil // this node's own decision: fenced on node and attempt
	now := e.cfg.Clock.Now()
	if err := e.cfg.Store.Requeue(ctx, &held, now, now); err != nil {
		e.cfg.Logger.Warn("give back stopped run", runAttrs(r.TimerID, r.ID, r.Attempt, "err", err)...)
		return
	}
	e.addToIndex(ctx, []index.Entry{{RunID: r.ID, TimerID: r.TimerID, DueAt: now}})
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
	e.cfg.Logger.Warn("attempt stopped: its result is not recorded", runAttrs(r.TimerID, r.ID, r.Attempt, "why", why)...)
	e.keep.forget(leaseOf(r))
	return false
}

func (e *Executor) execute(cr store.ClaimedRun) {
	run, t := cr.Run, cr.Timer
	// An overlap policy other than allow reads and writes the store: it
	// must not act for a claim that went stale. The other policies decide
	// from the run alone, and begin checks the claim under the same lock
	// that starts the attempt: one lock less per run, which a herd of
	// callbacks takes a thousand times at one instant.
	storePolicy := !run.Manual && t.Policy.Overlap != "" && t.Policy.Overlap != model.OverlapAllow
	if storePolicy && !e.keep.startable(run) {
		// This node was paused (or starved) past its claim's lease, or lost
		// it: another node may have taken the run over. Give it back (the
		// release is fenced on this attempt) rather than start it.
		e.cfg.Logger.Warn("claim's lease ran out before the action started: giving the run back",
			runAttrs(run.TimerID, run.ID, run.Attempt)...)
		e.release(run, later(run.DueAt, e.cfg.Clock.Now()))
		return
	}
	if e.route.placeElsewhere(run, t) {
		return // handed to a node that has the handler, or failed: none has
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
	switch verdict, reason, why := e.policy(run, t, start); verdict {
	case skip:
		if !storePolicy && !e.keep.startable(run) {
			e.release(run, later(run.DueAt, e.cfg.Clock.Now()))
			return
		}
		e.keep.markFinished(run)
		e.rec.add(model.Result{RunID: run.ID, Node: e.cfg.NodeID, Attempt: run.Attempt,
			Status: model.RunSkipped, StartedAt: start, FinishedAt: start, Error: why, Reason: reason}, t)
		return
	case hold:
		e.hold(run)
		return
	}
	if t.Policy.Splits() && run.Shard == nil {
		e.route.split(run, t, start)
		return
	}
	timeout := t.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel, ok := e.keep.start(run, timeout)
	if !ok {
		e.cfg.Logger.Warn("claim's lease ran out before the action started: giving the run back", runAttrs(run.TimerID, run.ID, run.Attempt)...)
		e.release(run, later(run.DueAt, e.cfg.Clock.Now()))
		return
	}
	defer cancel()
	m := e.cfg.Metrics
	if m != nil {
		m.FireDelay.Observe(start.Sub(run.DueAt).Seconds())
		m.Series.Delay(start, run.TimerID, start.Sub(run.DueAt))
		m.PoolRunning.Inc() // actions performing now: exact, not sampled at starts
	}
	var notes action.Notes
	var sent *model.SentRequest
	var out []byte
	rt, used, err := action.ResolveAppSecrets(ctx, e.cfg.Store, t)
	if err == nil {
		actx := action.WithNotes(ctx, &notes)
		if len(used) > 0 {
			actx = action.WithAppSecrets(actx)
		}
		out, err = e.perform(actx, timeout, run, rt)
		sent = notes.Sent
		if sent == nil && (t.Action.Type == model.ActionHandler || t.Action.Type == model.ActionShell) {
			// The request of these is the action itself, as claimed
			// (its app secret references unresolved).
			sent = model.SentOf(t.Action)
		}
		out, err = action.ScrubAppSecrets(used, out, err, sent)
	}
	if m != nil {
		m.PoolRunning.Dec()
	}
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
		Output: cleanText(out, action.MaxOutput), Request: sent,
		ScheduledAt: run.ScheduledAt, DueAt: action.DueAt(run),
		HTTPStatus: notes.Status, ResponseHeader: notes.Header,
	}
	if err != nil {
		res.Status = model.RunFailed
		res.Error = cleanText([]byte(err.Error()), action.MaxOutput)
		// Only attempts that ran and failed count against max_attempts:
		// this is failure number run.Failures+1 (lease recoveries, fences
		// and hand-offs raised run.Attempt, not run.Failures).
		if max, n := t.Retry.MaxAttempts, run.Failures+1; n < max {
			res.RetryAt = end.Add(jitter(t.Retry.Delay(n)))
		} else if errors.Is(err, action.ErrNoHandler) {
			// Its last attempt found no handler: the action never ran.
			res.Status, res.Reason = model.RunSkipped, model.SkipHandlerMissing
		}
	}
	e.rec.add(res, t)
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
			e.keep.stopLocked(l, a, why, "taken_over")
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
