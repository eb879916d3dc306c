package planner_test

import (
	"context"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/coord/index/memindex"
	"github.com/chimehq/chime/internal/engine/planner"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/internal/store/storetest"
	"github.com/chimehq/chime/model"
)

// TestMaxFiresCountsScheduledFires: max_fires counts the timer's
// scheduled fires, those retention deleted included, and not its manual
// runs: a timer of max_fires 3 with one fire ended (then pruned) and two
// manual runs ended gets two more fires planned.
func TestMaxFiresCountsScheduledFires(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	st := everySecondTimers(t, now.Add(-time.Hour), 1)
	tm, err := st.GetTimer(ctx, "ta")
	if err != nil {
		t.Fatal(err)
	}
	tm.Policy.MaxFires = 3
	if err := st.UpdateTimer(ctx, tm); err != nil {
		t.Fatal(err)
	}
	// One scheduled fire and two manual runs, an hour ago, ended.
	var past []*model.Run
	for i := range 3 {
		at := now.Add(-time.Hour + time.Duration(i)*time.Second)
		past = append(past, &model.Run{ID: model.RunID(tm.ID, at), TimerID: tm.ID, ScheduledAt: at, DueAt: at,
			Status: model.RunPending, Manual: i > 0, CreatedAt: at})
	}
	if _, err := st.InsertRuns(ctx, past); err != nil {
		t.Fatal(err)
	}
	for _, r := range past {
		if _, err := st.ClaimRuns(ctx, []store.Claim{{RunID: r.ID, Node: "n1", LeaseUntil: now.Add(time.Minute), Now: now}}); err != nil {
			t.Fatal(err)
		}
		if err := storetest.Finish(ctx, st, model.Result{RunID: r.ID, Node: "n1", Attempt: 1, Status: model.RunSucceeded,
			StartedAt: now, FinishedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	// Retention deletes the scheduled fire (the oldest).
	if _, err := st.PruneRuns(ctx, store.RunPrune{TimerID: tm.ID, Keep: 2}); err != nil {
		t.Fatal(err)
	}
	p := planner.New(planner.Config{Store: st, Index: memindex.New(4), Lookahead: time.Minute, MinAhead: time.Minute,
		Clock: clock.Func(func() time.Time { return now })})
	tm, err = st.GetTimer(ctx, tm.ID)
	if err != nil {
		t.Fatal(err)
	}
	runs, _ := p.TimerRuns(ctx, tm)
	pending := 0
	for _, r := range runs {
		if r.Status == model.RunPending {
			pending++
		} else if r.Reason != model.SkipMaxFires {
			t.Errorf("run at %s skipped for %q", r.ScheduledAt, r.Reason)
		}
	}
	if pending != 2 {
		t.Errorf("%d fires planned, want 2 (max_fires 3, one fired)", pending)
	}
}
