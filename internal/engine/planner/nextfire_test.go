package planner_test

import (
	"context"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/coord/index/memindex"
	"github.com/chimehq/chime/internal/engine/planner"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/internal/store/sqlstore"
	"github.com/chimehq/chime/model"
)

// TestPlanDueRecordsNextFire: a pass records each timer's next fire after
// the pass's now, within its bounds (none past its end), and a later pass
// that extends the plan moves it on; the list by next fire follows.
func TestPlanDueRecordsNextFire(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	st, err := sqlstore.Open(ctx, "sqlite::memory:", sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	mk := func(name, spec string, pol model.Policy) {
		tm := &model.Timer{ID: "t-" + name, App: "a", Name: name, Schedule: spec, Timezone: "UTC", Enabled: true, Policy: pol,
			Action: model.Action{Type: model.ActionHTTP, HTTP: &model.HTTPAction{Method: "POST", URL: "http://x"}},
			Retry:  model.RetryPolicy{MaxAttempts: 1}, CreatedAt: now, UpdatedAt: now}
		if _, err := st.SaveTimer(ctx, store.TimerWrite{Timer: tm, Create: true}); err != nil {
			t.Fatal(err)
		}
	}
	mk("hourly", "0 0 * * * *", model.Policy{})
	mk("seconds", "*/10 * * * * *", model.Policy{})
	mk("started", "0 * * * * *", model.Policy{StartAt: now.Add(3 * time.Hour)})
	mk("ended", "0 0 * * * *", model.Policy{EndAt: now.Add(-time.Hour)})
	at := now
	p := planner.New(planner.Config{Store: st, Index: memindex.New(4), Lookahead: 10 * time.Minute,
		Clock: clock.Func(func() time.Time { return at })})
	check := func(want map[string]time.Time) {
		t.Helper()
		for name, w := range want {
			tm, err := st.GetTimerByName(ctx, "a", name)
			if err != nil {
				t.Fatal(err)
			}
			if !tm.NextFireAt.Equal(w) {
				t.Errorf("%s at %v: NextFireAt = %v, want %v", name, at, tm.NextFireAt, w)
			}
		}
	}
	if _, err := p.PlanDue(ctx); err != nil {
		t.Fatal(err)
	}
	check(map[string]time.Time{"hourly": now.Add(time.Hour), "seconds": now.Add(10 * time.Second),
		"started": now.Add(3 * time.Hour), "ended": {}})
	ts, _, err := st.ListTimers(ctx, store.TimerFilter{Sort: store.SortNextFire})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tm := range ts {
		names = append(names, tm.Name)
	}
	if got, want := names, []string{"seconds", "hourly", "started", "ended"}; len(got) != 4 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || got[3] != want[3] {
		t.Errorf("by next fire = %v, want %v", got, want)
	}
	// Later, the passes that extend the plans move the next fires on.
	at = now.Add(6 * time.Minute)
	if _, err := p.PlanDue(ctx); err != nil {
		t.Fatal(err)
	}
	check(map[string]time.Time{"hourly": now.Add(time.Hour), "seconds": at.Add(10 * time.Second)})
}
