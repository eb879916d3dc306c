package executor

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/chimehq/chime/internal/engine/planner"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

type verdict int

const (
	run  verdict = iota // start the action
	skip                // record the run skipped, with the reason
	hold                // give the run back, due again shortly (buffer_one)
)

// holdRetry is how often a held run (overlap buffer_one) looks again.
const holdRetry = time.Second

// policy applies the timer's pause, end bound, misfire and overlap
// policies to a run that was just claimed, and returns the verdict with,
// for a skip, its reason code (a model.Skip* code) and its explanation.
// Runs made by upstream runs' ends are exempt from the misfire policy.
// Lateness is measured from the run's jittered instant
// (model.Policy.DueAt), which a catch-up or a held run's DueAt no longer
// shows, whatever the run's attempt number. Retries (runs with a failure
// recorded) and manual runs (trigger, backfill) are exempt from the
// misfire policy; manual runs from the pause, the end bound and the
// overlap policy too; shards from all of them (their fire passed them).
func (e *Executor) policy(r *model.Run, t *model.Timer, now time.Time) (v verdict, reason, why string) {
	if r.Manual || r.Shard != nil {
		// A shard is part of a fire that the policies already let run.
		return run, "", ""
	}
	p := t.Policy
	// A paused timer's fires are skipped here, when their instant comes;
	// a replan drops the fires past an end bound, and the check catches a
	// run planned before the change that made it so.
	if t.Paused {
		return skip, model.SkipPaused, "the timer is paused"
	}
	if !p.EndAt.IsZero() && r.ScheduledAt.After(p.EndAt) {
		return skip, model.SkipEndAt, fmt.Sprintf("scheduled after the timer's end_at %s", p.EndAt.Format(time.RFC3339))
	}
	// Lateness counts from the fire's jittered instant: a jitter is a
	// delay asked for, not a delay suffered.
	// A run made by its upstreams' end (r.UpstreamRunID) has no fire to
	// miss: it is exempt from the misfire policy too.
	// A retry (an attempt after one that ran and failed) is exempt; an
	// attempt after a lease recovery, a fence or a hand-off is not: the
	// fire has not run yet, whatever its attempt number.
	if late := now.Sub(p.DueAt(t.ID, r.ScheduledAt)); r.Failures == 0 && r.UpstreamRunID == "" && late > e.cfg.MisfireGrace {
		if p.CatchupWindow > 0 && late > p.CatchupWindow {
			return skip, model.SkipCatchupWindow, fmt.Sprintf("missed: %s late, beyond the catchup window of %s", late.Round(time.Millisecond), p.CatchupWindow)
		}
		switch p.Misfire {
		case model.MisfireSkip:
			return skip, model.SkipMisfire, fmt.Sprintf("missed: %s late (misfire policy skip)", late.Round(time.Millisecond))
		case model.MisfireLatest:
			if s, err := planner.ScheduleOf(t); err == nil {
				if next := s.Next(r.ScheduledAt); !next.IsZero() && !p.DueAt(t.ID, next).After(now) {
					return skip, model.SkipMisfire, fmt.Sprintf("missed: superseded by the fire at %s (misfire policy latest)", next.Format(time.RFC3339Nano))
				}
			}
		}
	}
	if p.Overlap == "" || p.Overlap == model.OverlapAllow {
		return run, "", ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	running, _, err := e.cfg.Store.ListRuns(ctx, store.RunFilter{TimerID: t.ID, Status: model.RunRunning, Limit: 10})
	if err != nil {
		e.cfg.Logger.Warn("overlap policy: list running runs; running anyway", runAttrs(t.ID, r.ID, r.Attempt, "err", err)...)
		return run, "", ""
	}
	var other *model.Run
	for _, o := range running {
		if o.ID != r.ID {
			other = o
			break
		}
	}
	if other == nil {
		return run, "", ""
	}
	switch p.Overlap {
	case model.OverlapSkip:
		return skip, model.SkipOverlap, fmt.Sprintf("overlap: run %s still running (overlap policy skip)", other.ID)
	case model.OverlapBufferOne:
		// A run is already waiting when another one besides the running
		// one is claimed (a held run looking again) or pending before this.
		if others := idsOf(running, r.ID); len(others) > 1 {
			return skip, model.SkipOverlap, fmt.Sprintf("overlap: runs %s still running or waiting (overlap policy buffer_one)", strings.Join(others, ", "))
		}
		waiting, _, err := e.cfg.Store.ListRuns(ctx, store.RunFilter{TimerID: t.ID, Status: model.RunPending,
			ScheduledBefore: r.ScheduledAt, Limit: 1})
		if err == nil && len(waiting) > 0 {
			return skip, model.SkipOverlap, fmt.Sprintf("overlap: run %s still running and run %s already waiting (overlap policy buffer_one)", other.ID, waiting[0].ID)
		}
		return hold, "", ""
	case model.OverlapCancelRunning:
		for _, o := range running {
			if o.ID == r.ID {
				continue
			}
			reason := fmt.Sprintf("cancelled by overlap policy: run %s started", r.ID)
			if _, err := e.cfg.Store.SetRunStatus(ctx, o.ID, model.RunRunning, model.RunCancelled, reason); err != nil {
				e.cfg.Logger.Warn("overlap policy: cancel running run", runAttrs(o.TimerID, o.ID, o.Attempt, "by_run_id", r.ID, "err", err)...)
			}
		}
		// The local action stops at once; another node's at its next lease
		// extension.
		e.cancelRuns(idsOf(running, r.ID), "cancelled by overlap policy cancel_running")
	}
	return run, "", ""
}

func idsOf(runs []*model.Run, except string) []string {
	var ids []string
	for _, r := range runs {
		if r.ID != except {
			ids = append(ids, r.ID)
		}
	}
	return ids
}

// hold gives a claimed run back to pending, due again after holdRetry.
func (e *Executor) hold(r *model.Run) {
	e.release(r, e.cfg.Clock.Now().Add(holdRetry))
}
