package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/store"
)

// planningTests are the tests of what the planner reads and records:
// TimersToPlan and SetPlannedUntil.
var planningTests = []test{
	{"TimersToPlan", testPlanning},
}

// testPlanning: TimersToPlan pages through the enabled timers planned short
// of the horizon, with what planning needs of each; SetPlannedUntil only
// moves forward and skips missing timers.
func testPlanning(t *testing.T, s store.Store) {
	var made []*model.Timer
	for i := range 6 {
		tm := NewTimer("plan", fmt.Sprintf("p%d", i))
		tm.Enabled = i != 5
		tm.Timezone = "Europe/Paris"
		tm.Policy.MaxFires = 10 + i
		if i == 4 {
			tm.PlannedUntil = base.Add(time.Hour) // already planned past the horizon
		}
		must(t, s.CreateTimer(ctx(t), tm))
		made = append(made, tm)
	}
	horizon := base.Add(10 * time.Minute)
	var got []string
	var after store.PlanCursor
	for {
		ts, err := s.TimersToPlan(ctx(t), horizon, after, 2)
		must(t, err)
		if len(ts) == 0 {
			break
		}
		for _, tm := range ts {
			got = append(got, tm.ID)
			after = store.CursorOf(tm)
			// What planning needs is there.
			i := slices.IndexFunc(made, func(m *model.Timer) bool { return m.ID == tm.ID })
			if i < 0 {
				continue
			}
			m := made[i]
			if tm.Schedule != m.Schedule || tm.Timezone != m.Timezone || !tm.Enabled || !tm.CreatedAt.Equal(m.CreatedAt) ||
				tm.Policy.MaxFires != m.Policy.MaxFires {
				t.Errorf("TimersToPlan timer %s = %+v, want schedule, zone, enabled, creation and policy of %+v", tm.ID, tm, m)
			}
		}
	}
	want := []string{made[0].ID, made[1].ID, made[2].ID, made[3].ID}
	if !slices.Equal(got, want) {
		t.Errorf("TimersToPlan = %v, want %v", got, want)
	}
	must(t, s.SetPlannedUntil(ctx(t), map[string]store.Plan{made[0].ID: {Until: horizon}}))
	must(t, s.SetPlannedUntil(ctx(t), map[string]store.Plan{made[0].ID: {Until: base}})) // backwards: ignored
	tm, err := s.GetTimer(ctx(t), made[0].ID)
	must(t, err)
	if !tm.PlannedUntil.Equal(horizon) {
		t.Errorf("PlannedUntil = %v, want %v", tm.PlannedUntil, horizon)
	}
	ts, err := s.TimersToPlan(ctx(t), horizon, store.PlanCursor{}, 100)
	must(t, err)
	if len(ts) != 3 {
		t.Errorf("after SetPlannedUntil: %d timers to plan, want 3", len(ts))
	}
	if err := s.SetPlannedUntil(ctx(t), map[string]store.Plan{"missing": {Until: horizon}}); err != nil {
		t.Errorf("SetPlannedUntil(missing) = %v, want nil (skipped)", err)
	}
}
