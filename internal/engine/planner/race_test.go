package planner_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/coord/index/memindex"
	"github.com/chimehq/chime/internal/engine/planner"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/internal/store/sqlstore"
	"github.com/chimehq/chime/model"
)

// saveDuringPass is a store whose TimersToPlan, the first time it reads
// the timer id, runs save before it returns: a save of that timer that
// commits between the planning pass's read and its writes.
type saveDuringPass struct {
	planner.Store
	id    string
	save  func()
	saved bool
}

func (s *saveDuringPass) TimersToPlan(ctx context.Context, horizon time.Time, after store.PlanCursor, limit int) ([]*model.Timer, error) {
	ts, err := s.Store.TimersToPlan(ctx, horizon, after, limit)
	if err == nil && !s.saved && slices.ContainsFunc(ts, func(t *model.Timer) bool { return t.ID == s.id }) {
		s.saved = true
		s.save()
	}
	return ts, err
}

// TestPlanDueSaveDuringPass: a timer saved while a planning pass has read
// it and not yet written its plan keeps what the save wrote. Rescheduled
// (every 2 s to every 3 s, by a node whose plan is shorter than the
// pass's), it gets no run of its old schedule and its PlannedUntil stays
// the save's, so that every fire of the new schedule before it has a run
// and the next pass plans the rest; disabled, it gets no pending run and no
// PlannedUntil. Before the planner's writes were guarded by the timer's
// version, the pass inserted the old schedule's runs (wrong fires) and
// moved PlannedUntil to its own horizon, past the save's runs (missed
// fires).
func TestPlanDueSaveDuringPass(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	clk := clock.Func(func() time.Time { return now })
	for _, tc := range []struct {
		name string
		// change rewrites cur as the save path does (engine.PlanSave,
		// then store.Store.SaveTimer); save plans with p.
		change func(t *testing.T, st store.Store, p *planner.Planner, cur *model.Timer)
		// every is the seconds between the fires of the timer after the
		// save; 0: none (disabled).
		every int
	}{
		{"reschedule", func(t *testing.T, st store.Store, p *planner.Planner, cur *model.Timer) {
			cur.Schedule = "*/3 * * * * *"
			cur.UpdatedAt = now
			cur.PlannedUntil = time.Time{}
			w := store.TimerWrite{Timer: cur, ReplaceFrom: now}
			var plan store.Plan
			w.Runs, plan = p.TimerRuns(t.Context(), cur)
			cur.PlannedUntil, cur.NextFireAt = plan.Until, plan.NextFire
			if _, err := st.SaveTimer(t.Context(), w); err != nil {
				t.Error(err)
			}
		}, 3},
		{"disable", func(t *testing.T, st store.Store, p *planner.Planner, cur *model.Timer) {
			cur.Enabled = false
			cur.UpdatedAt = now
			cur.PlannedUntil, cur.NextFireAt = time.Time{}, time.Time{}
			if _, err := st.SaveTimer(t.Context(), store.TimerWrite{Timer: cur, CancelPending: true}); err != nil {
				t.Error(err)
			}
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			st, err := sqlstore.Open(ctx, "sqlite::memory:", sqlstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			// Every 2 s, planned for the next 20 s: the pass's urgent
			// phase leaves it, its full phase (2 min) reads it.
			tm := &model.Timer{ID: "t1", App: "a", Name: "n", Schedule: "*/2 * * * * *", Timezone: "UTC", Enabled: true,
				Action: model.Action{Type: model.ActionHTTP, HTTP: &model.HTTPAction{Method: "POST", URL: "http://x"}},
				Retry:  model.RetryPolicy{MaxAttempts: 1}, CreatedAt: now.Add(-time.Hour), UpdatedAt: now.Add(-time.Hour),
				PlannedUntil: now.Add(20 * time.Second)}
			if _, err := st.SaveTimer(ctx, store.TimerWrite{Timer: tm, Create: true}); err != nil {
				t.Fatal(err)
			}
			var planned []*model.Run
			for at := now.Add(2 * time.Second); at.Before(tm.PlannedUntil); at = at.Add(2 * time.Second) {
				planned = append(planned, &model.Run{ID: model.RunID(tm.ID, at), TimerID: tm.ID, ScheduledAt: at, DueAt: at,
					Status: model.RunPending, CreatedAt: now.Add(-time.Minute)})
			}
			if _, err := st.InsertRuns(ctx, planned); err != nil {
				t.Fatal(err)
			}
			// The node that saves plans 30 s ahead, the pass 2 min.
			saver := planner.New(planner.Config{Store: st, Index: memindex.NewWithOptions(memindex.Options{Buckets: 1, Clock: clk}),
				Lookahead: 30 * time.Second, MinAhead: 30 * time.Second, Clock: clk})
			hook := &saveDuringPass{Store: st, id: tm.ID}
			hook.save = func() {
				cur, err := st.GetTimer(ctx, tm.ID)
				if err != nil {
					t.Error(err)
					return
				}
				tc.change(t, st, saver, cur)
			}
			p := planner.New(planner.Config{Store: hook, Index: memindex.NewWithOptions(memindex.Options{Buckets: 1, Clock: clk}),
				Lookahead: 2 * time.Minute, MinAhead: 2 * time.Minute, Clock: clk})

			// check: the timer's pending runs are the fires of the new
			// schedule before its PlannedUntil, at least those before
			// atLeast, and none other.
			check := func(when string, atLeast time.Time) {
				t.Helper()
				cur, err := st.GetTimer(ctx, tm.ID)
				if err != nil {
					t.Fatal(err)
				}
				runs, err := st.PendingRuns(ctx, time.Unix(0, 0), now.Add(time.Hour), 0)
				if err != nil {
					t.Fatal(err)
				}
				pending := map[time.Time]bool{}
				var wrong, missed []string
				for _, r := range runs {
					pending[r.ScheduledAt] = true
					if tc.every == 0 || r.ScheduledAt.Second()%tc.every != 0 {
						wrong = append(wrong, r.ScheduledAt.Format(time.TimeOnly))
					}
				}
				if len(wrong) > 0 {
					t.Errorf("%s: %d pending runs at instants the saved timer does not fire at: %v", when, len(wrong), wrong)
				}
				if tc.every == 0 {
					if !cur.PlannedUntil.IsZero() {
						t.Errorf("%s: the disabled timer is planned until %v, want zero (as its save left it)", when, cur.PlannedUntil)
					}
					return
				}
				if cur.PlannedUntil.Before(atLeast) {
					t.Errorf("%s: planned until %v, want at least %v", when, cur.PlannedUntil, atLeast)
				}
				for at := now.Add(time.Second); at.Before(cur.PlannedUntil); at = at.Add(time.Second) {
					if at.Second()%tc.every == 0 && !pending[at] {
						missed = append(missed, at.Format(time.TimeOnly))
					}
				}
				if len(missed) > 0 {
					t.Errorf("%s: %d fires before the PlannedUntil %v have no run (never to be planned): %v",
						when, len(missed), cur.PlannedUntil.Format(time.TimeOnly), missed)
				}
			}

			if _, err := p.PlanDue(ctx); err != nil {
				t.Fatal(err)
			}
			if !hook.saved {
				t.Fatal("the pass did not read the timer")
			}
			check("after the pass the save raced", now.Add(29*time.Second))
			// The next pass plans the saved timer to its look-ahead.
			if _, err := p.PlanDue(ctx); err != nil {
				t.Fatal(err)
			}
			check("after the next pass", now.Add(2*time.Minute-time.Second))
		})
	}
}
