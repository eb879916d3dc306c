package planner

import (
	"testing"
	"time"

	"github.com/chimehq/chime/model"
)

// TestMissedHonoursGrace: after an outage (45 s, 90 s) of the planner, the fires
// of skip and latest timers found at most the misfire grace late, counted
// from their jittered instants, run; only those later are skipped, and
// under latest the newest fire runs besides.
func TestMissedHonoursGrace(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		schedule string
		outage   time.Duration
		pol      model.Policy
	}{
		{"skip, every second", "* * * * * *", 45 * time.Second, model.Policy{Misfire: model.MisfireSkip}},
		{"latest, every second", "* * * * * *", 45 * time.Second, model.Policy{Misfire: model.MisfireLatest}},
		{"skip, every 5 s, jitter 20 s", "*/5 * * * * *", 90 * time.Second, model.Policy{Misfire: model.MisfireSkip, Jitter: 20 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := New(Config{FiresAhead: 1, MinAhead: time.Minute})
			tm := &model.Timer{ID: "01GRACE", Schedule: tc.schedule, Timezone: "UTC", CreatedAt: now.Add(-time.Hour),
				PlannedUntil: now.Add(-tc.outage), Policy: tc.pol}
			runs, _, err := p.Fires(tm, now, now.Add(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			var ran, skipped int
			var newest *model.Run
			for _, r := range runs {
				if r.ScheduledAt.After(now) {
					continue
				}
				late := now.Sub(tc.pol.DueAt(tm.ID, r.ScheduledAt))
				if newest == nil || r.ScheduledAt.After(newest.ScheduledAt) {
					newest = r
				}
				if late <= model.MisfireGrace && r.Status != model.RunPending {
					t.Errorf("fire at %s, %s late (jittered), %s (%s): want it run", r.ScheduledAt.Format(time.TimeOnly), late, r.Status, r.Error)
				}
				if r.Status == model.RunPending {
					ran++
				} else {
					skipped++
				}
			}
			if ran == 0 || skipped == 0 {
				t.Errorf("%d fires run, %d skipped; want some of each", ran, skipped)
			}
			if newest == nil || newest.Status != model.RunPending {
				t.Errorf("newest missed fire %+v, want it run", newest)
			}
		})
	}
}
