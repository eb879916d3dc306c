package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// planningTests are the tests of what the planner reads and records:
// TimersToPlan, SetPlannedUntil and InsertPlanned.
var planningTests = []test{
	{"TimersToPlan", testPlanning},
	{"GuardedBySave", testPlanGuardSave},
	{"GuardedByDisablePauseDelete", testPlanGuardGone},
	{"GuardedConcurrently", testPlanGuardConcurrent},
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
		must(t, createTimer(ctx(t), s, tm))
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
				tm.Policy.MaxFires != m.Policy.MaxFires || tm.Version == 0 {
				t.Errorf("TimersToPlan timer %s = %+v, want schedule, zone, enabled, creation and policy of %+v, and a version", tm.ID, tm, m)
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

// toPlan returns the timers that TimersToPlan reads up to horizon, by id.
func toPlan(t *testing.T, s store.Store, horizon time.Time) map[string]*model.Timer {
	t.Helper()
	ts, err := s.TimersToPlan(ctx(t), horizon, store.PlanCursor{}, 1000)
	must(t, err)
	m := make(map[string]*model.Timer, len(ts))
	for _, tm := range ts {
		m[tm.ID] = tm
	}
	return m
}

// pendingOf returns the ids of the timer's pending runs, sorted.
func pendingOf(t *testing.T, s store.Store, timerID string) []string {
	t.Helper()
	runs, _, err := s.ListRuns(ctx(t), store.RunFilter{TimerID: timerID, Status: model.RunPending, Limit: 1000})
	must(t, err)
	return ids(runs)
}

// wantGone checks that none of runs exists.
func wantGone(t *testing.T, s store.Store, what string, runs []*model.Run) {
	t.Helper()
	for _, r := range runs {
		if got, err := s.GetRun(ctx(t), r.ID); !errors.Is(err, model.ErrNotFound) {
			t.Errorf("%s: run %s at %v is there (%+v, %v), want none", what, r.ID, r.ScheduledAt, got, err)
		}
	}
}

// testPlanGuardSave: the planner reads a timer (TimersToPlan), a save
// gives it a new schedule and its runs, and then the planner writes what
// it computed from the old one: InsertPlanned drops the old schedule's
// runs and SetPlannedUntil keeps the save's PlannedUntil, while another
// timer of the same calls, unchanged, gets its runs and plan. With the
// version read after the save both go in, and the version does not change.
func testPlanGuardSave(t *testing.T, s store.Store) {
	tm := mustTimer(t, s, "guard", "save") // @every 5s, never planned
	other := mustTimer(t, s, "guard", "other")
	read := toPlan(t, s, base.Add(time.Hour))
	v0, vOther := read[tm.ID].Version, read[other.ID].Version
	if v0 == 0 || vOther == 0 {
		t.Fatalf("TimersToPlan versions %d and %d, want non-zero", v0, vOther)
	}
	// The planner's runs of the schedule it read: every 5 s.
	old := NewRuns(tm.ID, base.Add(5*time.Second), 5*time.Second, 6) // +5s … +30s
	otherRuns := NewRuns(other.ID, base.Add(time.Second), 5*time.Second, 3)

	// The save meanwhile: every 7 s, planned from base to +28s.
	saved := *tm
	saved.Schedule = "@every 7s"
	saved.UpdatedAt = base.Add(time.Second)
	saved.PlannedUntil = base.Add(28 * time.Second)
	fresh := NewRuns(tm.ID, base, 7*time.Second, 4) // +0s … +21s
	_, err := s.SaveTimer(ctx(t), store.TimerWrite{Timer: &saved, ReplaceFrom: base, Runs: fresh})
	must(t, err)

	versions := map[string]int64{tm.ID: v0, other.ID: vOther}
	got, err := s.InsertPlanned(ctx(t), append(slices.Clone(old), otherRuns...), versions)
	must(t, err)
	if !slices.Equal(ids(got), ids(otherRuns)) {
		t.Errorf("InsertPlanned after a save = %v, want only the unchanged timer's %v", ids(got), ids(otherRuns))
	}
	wantGone(t, s, "a run of the schedule before the save", old)
	if got := pendingOf(t, s, tm.ID); !slices.Equal(got, ids(fresh)) {
		t.Errorf("pending runs after the planner's stale insert = %v, want the save's %v", got, ids(fresh))
	}
	until := base.Add(time.Hour)
	must(t, s.SetPlannedUntil(ctx(t), map[string]store.Plan{
		tm.ID:    {Until: until, NextFire: base.Add(5 * time.Second), Version: v0},
		other.ID: {Until: until, NextFire: base.Add(time.Second), Version: vOther},
	}))
	if g, err := s.GetTimer(ctx(t), tm.ID); err != nil || !g.PlannedUntil.Equal(saved.PlannedUntil) {
		t.Errorf("saved timer after a stale SetPlannedUntil: %+v, %v; want PlannedUntil %v (the save's)", g, err, saved.PlannedUntil)
	}
	if g, err := s.GetTimer(ctx(t), other.ID); err != nil || !g.PlannedUntil.Equal(until) {
		t.Errorf("unchanged timer after SetPlannedUntil: %+v, %v; want PlannedUntil %v", g, err, until)
	}

	// Read again, the timer has a new version, with which the planner
	// writes.
	cur := toPlan(t, s, base.Add(time.Minute))[tm.ID]
	if cur == nil || cur.Version == v0 || cur.Schedule != saved.Schedule {
		t.Fatalf("TimersToPlan after the save = %+v, want the saved timer with a version other than %d", cur, v0)
	}
	more := NewRuns(tm.ID, base.Add(28*time.Second), 7*time.Second, 3) // +28s … +42s
	got, err = s.InsertPlanned(ctx(t), more, map[string]int64{tm.ID: cur.Version})
	must(t, err)
	if !slices.Equal(ids(got), ids(more)) {
		t.Errorf("InsertPlanned with the current version = %v, want %v", ids(got), ids(more))
	}
	must(t, s.SetPlannedUntil(ctx(t), map[string]store.Plan{tm.ID: {Until: base.Add(49 * time.Second), Version: cur.Version}}))
	again := toPlan(t, s, base.Add(time.Minute))[tm.ID]
	if again == nil || !again.PlannedUntil.Equal(base.Add(49*time.Second)) || again.Version != cur.Version {
		t.Errorf("after SetPlannedUntil with the current version: %+v, want PlannedUntil %v and version %d (planning does not change it)",
			again, base.Add(49*time.Second), cur.Version)
	}
	// Without a version (zero, or no map), the insert is InsertRuns'.
	late := NewRuns(tm.ID, base.Add(2*time.Hour), time.Second, 2)
	if got, err := s.InsertPlanned(ctx(t), late[:1], map[string]int64{tm.ID: 0}); err != nil || len(got) != 1 {
		t.Errorf("InsertPlanned with a zero version = %v, %v; want the run inserted", ids(got), err)
	}
	if got, err := s.InsertPlanned(ctx(t), late[1:], nil); err != nil || len(got) != 1 {
		t.Errorf("InsertPlanned without versions = %v, %v; want the run inserted", ids(got), err)
	}
}

// testPlanGuardGone: a timer disabled, paused or deleted after the
// planner read it gets none of the planner's runs (a disabled or deleted
// timer's would fire; a paused one's plan is the planner's again after the
// change), and its PlannedUntil is left as the change left it.
func testPlanGuardGone(t *testing.T, s store.Store) {
	for _, c := range []struct {
		name   string
		change func(t *testing.T, tm *model.Timer)
	}{
		{"disable", func(t *testing.T, tm *model.Timer) {
			tm.Enabled, tm.PlannedUntil = false, time.Time{}
			_, err := s.SaveTimer(ctx(t), store.TimerWrite{Timer: tm, CancelPending: true})
			must(t, err)
		}},
		{"pause", func(t *testing.T, tm *model.Timer) {
			tm.Paused = true
			_, err := s.SaveTimer(ctx(t), store.TimerWrite{Timer: tm})
			must(t, err)
		}},
		{"delete", func(t *testing.T, tm *model.Timer) { must(t, s.DeleteTimer(ctx(t), tm.ID)) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			tm := NewTimer("guard", c.name)
			tm.PlannedUntil = base.Add(10 * time.Second)
			must(t, createTimer(ctx(t), s, tm))
			mustInsert(t, s, NewRuns(tm.ID, base, 5*time.Second, 2)) // its plan so far
			read := toPlan(t, s, base.Add(time.Hour))[tm.ID]
			if read == nil {
				t.Fatal("TimersToPlan does not read the timer")
			}
			c.change(t, tm)
			runs := NewRuns(tm.ID, base.Add(10*time.Second), 5*time.Second, 4)
			got, err := s.InsertPlanned(ctx(t), runs, map[string]int64{tm.ID: read.Version})
			must(t, err)
			if len(got) != 0 {
				t.Errorf("InsertPlanned after a %s inserted %v, want none", c.name, ids(got))
			}
			wantGone(t, s, "a run planned before the "+c.name, runs)
			// A pause keeps the plan so far: its fires are skipped when
			// they come.
			want := 0
			if c.name == "pause" {
				want = 2
			}
			if p := pendingOf(t, s, tm.ID); len(p) != want {
				t.Errorf("pending runs after a %s and the planner's stale insert: %v, want %d", c.name, p, want)
			}
			must(t, s.SetPlannedUntil(ctx(t), map[string]store.Plan{tm.ID: {Until: base.Add(30 * time.Second), Version: read.Version}}))
			g, err := s.GetTimer(ctx(t), tm.ID)
			if c.name == "delete" {
				if !errors.Is(err, model.ErrNotFound) {
					t.Errorf("deleted timer after SetPlannedUntil: %+v, %v; want ErrNotFound", g, err)
				}
				return
			}
			if err != nil || !g.PlannedUntil.Equal(tm.PlannedUntil) {
				t.Errorf("timer after a %s and a stale SetPlannedUntil: %+v, %v; want PlannedUntil %v", c.name, g, err, tm.PlannedUntil)
			}
		})
	}
}

// testPlanGuardConcurrent: saves that replace a timer's schedule race the
// planner's insert of the runs of the schedule before each (read before
// the save began): whichever commits first, the timer is left with the
// runs of its last save only. On the server databases this is the share
// lock of InsertPlanned against the save's update of the timer. Likewise
// a delete racing the insert leaves no run of the timer.
func testPlanGuardConcurrent(t *testing.T, s store.Store) {
	tm := mustTimer(t, s, "guard", "race")
	// Round i's schedule fires at base + i hours + 0…9 s: its save plans
	// the first five, the planner the next five.
	sched := func(i, from int) []*model.Run {
		return NewRuns(tm.ID, base.Add(time.Duration(i)*time.Hour+time.Duration(from)*time.Second), time.Second, 5)
	}
	mustInsert(t, s, sched(0, 0))
	for i := 1; i <= 20; i++ {
		read := toPlan(t, s, base.Add(time.Duration(100)*time.Hour))[tm.ID]
		if read == nil {
			t.Fatalf("round %d: TimersToPlan does not read the timer", i)
		}
		var wg sync.WaitGroup
		var saveErr, insErr error
		wg.Go(func() {
			w := *tm
			w.Schedule = fmt.Sprintf("@every %ds", i+1)
			_, saveErr = s.SaveTimer(ctx(t), store.TimerWrite{Timer: &w, ReplaceFrom: base, Runs: sched(i, 0)})
		})
		wg.Go(func() {
			_, insErr = s.InsertPlanned(ctx(t), sched(i-1, 5), map[string]int64{tm.ID: read.Version})
		})
		wg.Wait()
		must(t, saveErr)
		must(t, insErr)
		if got, want := pendingOf(t, s, tm.ID), ids(sched(i, 0)); !slices.Equal(got, want) {
			t.Fatalf("round %d: pending runs %v, want the last save's %v", i, got, want)
		}
	}
	// A delete racing the insert leaves no run of the deleted timer.
	for i := range 10 {
		gone := mustTimer(t, s, "guard", fmt.Sprintf("gone%d", i))
		mustInsert(t, s, NewRuns(gone.ID, base, time.Second, 5))
		read := toPlan(t, s, base.Add(100*time.Hour))[gone.ID]
		if read == nil {
			t.Fatalf("delete round %d: TimersToPlan does not read the timer", i)
		}
		var wg sync.WaitGroup
		var delErr, insErr error
		wg.Go(func() { delErr = s.DeleteTimer(ctx(t), gone.ID) })
		wg.Go(func() {
			_, insErr = s.InsertPlanned(ctx(t), NewRuns(gone.ID, base.Add(5*time.Second), time.Second, 5), map[string]int64{gone.ID: read.Version})
		})
		wg.Wait()
		must(t, delErr)
		must(t, insErr)
		if runs := runsOf(t, s, gone.ID); len(runs) > 0 {
			t.Fatalf("delete round %d: %d runs of the deleted timer are left: %v", i, len(runs), ids(runs))
		}
	}
}
