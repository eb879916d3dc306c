package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/chimehq/chime/internal/coord/index"
	"github.com/chimehq/chime/internal/engine/planner"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// PlanSave adds to w what replanning its timer writes with it (see
// timers.Engine): the runs of an enabled timer's next fires from now, with
// its PlannedUntil and the pending runs they replace, or the end of a
// disabled timer's pending runs (store.TimerWrite.CancelPending). It writes
// nothing.
func (e *Engine) PlanSave(ctx context.Context, w *store.TimerWrite, replan bool) {
	if !replan {
		return
	}
	t := w.Timer
	w.ReplaceFrom = e.clock.Now() // the fires to come are replaced (deleted when disabled)
	if !t.Enabled {
		w.CancelPending = !w.Create
		t.PlannedUntil, t.NextFireAt = time.Time{}, time.Time{}
		return
	}
	t.PlannedUntil = time.Time{} // plan from now, not from the old plan
	var plan store.Plan
	w.Runs, plan = e.plan.TimerRuns(ctx, t)
	t.PlannedUntil, t.NextFireAt = plan.Until, plan.NextFire
}

// Saved indexes the runs a save inserted (see PlanSave).
func (e *Engine) Saved(ctx context.Context, t *model.Timer, replan bool, inserted []*model.Run) {
	// Before its runs reach the trigger: they queue at the timer's
	// priority.
	if t != nil {
		e.trig.SetPriority(t.ID, t.EffectivePriority())
	}
	e.plan.Planned(ctx, inserted)
}

// TimerSaved replans t, a timer that its caller wrote to the store
// itself (not through timers.Service), after it was created, updated,
// enabled or disabled. When scheduleChanged, its future pending runs are
// replaced (enabled) or ended (disabled), as the save path does: PlanSave,
// one SaveTimer that writes t again with its new PlannedUntil, Saved.
func (e *Engine) TimerSaved(ctx context.Context, t *model.Timer, scheduleChanged bool) error {
	if !scheduleChanged {
		return nil
	}
	t2 := *t
	w := store.TimerWrite{Timer: &t2}
	e.PlanSave(ctx, &w, true)
	inserted, err := e.cfg.Store.SaveTimer(ctx, w)
	if err != nil {
		return fmt.Errorf("replan timer %s: %w", t.ID, err)
	}
	e.Saved(ctx, &t2, true, inserted)
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
	run, err := e.startNow(ctx, r)
	if err != nil {
		return nil, fmt.Errorf("trigger timer %s: %w", t.ID, err)
	}
	return run, nil
}

// Rerun makes a new manual run of t, orig's timer, that runs orig again:
// due now, with t's action, its callbacks carry orig's scheduled instant
// (the first run's, when orig is a rerun itself) and orig's id (see
// model.Run.RerunOf). Like Trigger it starts the run on this node when it
// can, and returns it.
func (e *Engine) Rerun(ctx context.Context, t *model.Timer, orig *model.Run) (*model.Run, error) {
	r := model.Rerun(t.ID, orig, e.clock.Now())
	if err := e.cfg.Store.InsertRerun(ctx, r); err != nil {
		return nil, fmt.Errorf("rerun run %s: %w", orig.ID, err)
	}
	run, err := e.startNow(ctx, r)
	if err != nil {
		return nil, fmt.Errorf("rerun run %s: %w", orig.ID, err)
	}
	return run, nil
}

// startNow claims r, inserted due now, and starts it on this node; when
// another node claimed it first, it returns the run as stored.
func (e *Engine) startNow(ctx context.Context, r *model.Run) (*model.Run, error) {
	won, err := e.exec.Claim(ctx, []index.Entry{{RunID: r.ID, TimerID: r.TimerID, DueAt: r.DueAt}})
	if err != nil {
		return nil, err
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
		entries[i] = index.EntryOf(r)
	}
	if len(entries) > 0 {
		if err := e.cfg.Index.Add(ctx, entries...); err != nil {
			e.cfg.Logger.Warn("backfill: index add", "err", err)
		}
		e.notify(entries)
	}
	return inserted, nil
}

func (e *Engine) notify(entries []index.Entry) {
	if e.trig != nil {
		e.trig.Notify(entries)
	}
}
