package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// timerTests are the tests of timers: create, read, update, delete, list
// and the name rules.
var timerTests = []test{
	{"CRUD", testTimerCRUD},
	{"List", testListTimers},
	{"ListApps", testListTimersApps},
	{"Delete", testDeleteTimer},
	{"Save", testSaveTimer},
	{"SaveAtomic", testSaveTimerAtomic},
}

// testTimerCRUD: create, read by id and by name, update and delete, with
// the name unique per app (case-sensitive) and free again once deleted.
func testTimerCRUD(t *testing.T, s store.Store) {
	tm := mustTimer(t, s, "app", "one")
	got, err := s.GetTimer(ctx(t), tm.ID)
	must(t, err)
	equalTimer(t, got, tm)
	if got.CreatedAt.Location() != time.UTC {
		t.Errorf("CreatedAt location = %v, want UTC", got.CreatedAt.Location())
	}
	got, err = s.GetTimerByName(ctx(t), "app", "one")
	must(t, err)
	equalTimer(t, got, tm)

	if _, err := s.GetTimer(ctx(t), "nope"); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("GetTimer(missing) = %v, want ErrNotFound", err)
	}
	if _, err := s.GetTimerByName(ctx(t), "app", "nope"); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("GetTimerByName(missing) = %v, want ErrNotFound", err)
	}
	dup := NewTimer("app", "one")
	if err := createTimer(ctx(t), s, dup); !errors.Is(err, model.ErrConflict) {
		t.Errorf("CreateTimer(dup name) = %v, want ErrConflict", err)
	}
	// Same name in another app, and a name differing only in case, are fine.
	mustTimer(t, s, "other", "one")
	mustTimer(t, s, "app", "ONE")

	two := mustTimer(t, s, "app", "two")
	two.Name = "one"
	if err := s.UpdateTimer(ctx(t), two); !errors.Is(err, model.ErrConflict) {
		t.Errorf("UpdateTimer(to dup name) = %v, want ErrConflict", err)
	}
	two.Name = "two-renamed"
	two.Enabled = false
	two.Schedule = "0 * * * *"
	two.Action = model.Action{Type: model.ActionShell, Shell: &model.ShellAction{Command: "true"}}
	two.UpdatedAt = base.Add(time.Hour)
	two.PlannedUntil = base.Add(2 * time.Hour)
	must(t, s.UpdateTimer(ctx(t), two))
	// Updating with identical values must not look like a missing timer.
	must(t, s.UpdateTimer(ctx(t), two))
	got, err = s.GetTimer(ctx(t), two.ID)
	must(t, err)
	equalTimer(t, got, two)
	if got.Action.Shell == nil || got.Action.Shell.Command != "true" {
		t.Errorf("shell action lost: %+v", got.Action)
	}
	missing := NewTimer("app", "ghost")
	if err := s.UpdateTimer(ctx(t), missing); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("UpdateTimer(missing) = %v, want ErrNotFound", err)
	}

	must(t, s.DeleteTimer(ctx(t), tm.ID))
	if _, err := s.GetTimer(ctx(t), tm.ID); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("GetTimer(deleted) = %v, want ErrNotFound", err)
	}
	if err := s.DeleteTimer(ctx(t), tm.ID); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("DeleteTimer(deleted) = %v, want ErrNotFound", err)
	}
	// The name is free again.
	mustTimer(t, s, "app", "one")
}

// testListTimers: ListTimers filters by app, enabled and paused flags and
// pages in id order at every page size; CountTimers counts by state.
func testListTimers(t *testing.T, s store.Store) {
	var all []string
	for i := range 25 {
		app := "a"
		if i%5 == 0 {
			app = "b"
		}
		tm := NewTimer(app, fmt.Sprintf("t%02d", i))
		tm.Enabled = i%2 == 0
		tm.Paused = i%4 == 0
		must(t, createTimer(ctx(t), s, tm))
		all = append(all, tm.ID)
	}
	slices.Sort(all)
	enabled, disabled := true, false
	for _, tc := range []struct {
		name   string
		filter store.TimerFilter
		want   store.TimerCounts
	}{
		{"all", store.TimerFilter{}, store.TimerCounts{Enabled: 6, Paused: 7, Disabled: 12}},
		{"app b", store.TimerFilter{App: "b"}, store.TimerCounts{Enabled: 1, Paused: 2, Disabled: 2}},
		{"apps a", store.TimerFilter{Apps: []string{"a"}, Enabled: &disabled}, store.TimerCounts{Enabled: 5, Paused: 5, Disabled: 10}},
		{"name contains", store.TimerFilter{NameContains: "T1"}, store.TimerCounts{Enabled: 3, Paused: 2, Disabled: 5}},
		{"none", store.TimerFilter{App: "zzz"}, store.TimerCounts{}},
	} {
		got, err := s.CountTimers(ctx(t), tc.filter)
		must(t, err)
		if got != tc.want {
			t.Errorf("CountTimers %s = %+v, want %+v", tc.name, got, tc.want)
		}
	}
	tests := []struct {
		name   string
		filter store.TimerFilter
		want   int
	}{
		{"all", store.TimerFilter{}, 25},
		{"app b", store.TimerFilter{App: "b"}, 5},
		{"enabled", store.TimerFilter{Enabled: &enabled}, 13},
		{"disabled in a", store.TimerFilter{App: "a", Enabled: &disabled}, 10},
		{"paused", store.TimerFilter{Paused: &enabled}, 7},
		{"enabled, not paused", store.TimerFilter{Enabled: &enabled, Paused: &disabled}, 6},
		{"none", store.TimerFilter{App: "zzz"}, 0},
		{"name contains", store.TimerFilter{NameContains: "T1"}, 10},
		{"name contains in b", store.TimerFilter{App: "b", NameContains: "1"}, 2},
		{"name contains a wildcard", store.TimerFilter{NameContains: "%"}, 0},
		{"name contains an underscore", store.TimerFilter{NameContains: "t_1"}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, limit := range []int{0, 1, 7, 25} {
				f := tc.filter
				f.Limit = limit
				var got []string
				for pages := 0; ; pages++ {
					if pages > 30 {
						t.Fatal("pagination does not end")
					}
					ts, next, err := s.ListTimers(ctx(t), f)
					must(t, err)
					if limit > 0 && len(ts) > limit {
						t.Fatalf("page of %d > limit %d", len(ts), limit)
					}
					for _, tm := range ts {
						got = append(got, tm.ID)
					}
					if next == "" {
						break
					}
					f.After = next
				}
				if len(got) != tc.want || !slices.IsSorted(got) {
					t.Errorf("limit %d: got %d timers %v, want %d sorted", limit, len(got), got, tc.want)
				}
			}
		})
	}
}

// testListTimersApps: a filter on several apps, alone or with one app.
func testListTimersApps(t *testing.T, s store.Store) {
	ctx := context.Background()
	for _, app := range []string{"a", "b", "c"} {
		if err := createTimer(ctx, s, NewTimer(app, "x")); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		f    store.TimerFilter
		want int
	}{
		{store.TimerFilter{Apps: []string{"a", "c"}}, 2},
		{store.TimerFilter{Apps: []string{"a"}, App: "a"}, 1},
		{store.TimerFilter{Apps: []string{"a"}, App: "b"}, 0},
	} {
		got, _, err := s.ListTimers(ctx, tc.f)
		if err != nil || len(got) != tc.want {
			t.Errorf("ListTimers(%+v) = %d, %v; want %d", tc.f, len(got), err, tc.want)
		}
	}
}

// testDeleteTimer: deleting a timer deletes its runs, and a run planned
// after the delete is never claimed.
func testDeleteTimer(t *testing.T, s store.Store) {
	tm := mustTimer(t, s, "app", "del")
	keep := mustTimer(t, s, "app", "keep")
	runs := NewRuns(tm.ID, base, time.Second, 10)
	mustInsert(t, s, runs)
	mustInsert(t, s, NewRuns(keep.ID, base, time.Second, 10))
	_, err := s.ClaimRuns(ctx(t), claimsFor(runs[:2], "n", base))
	must(t, err)
	must(t, Finish(ctx(t), s, model.Result{RunID: runs[0].ID, Node: "n", Attempt: 1, Status: model.RunSucceeded}))
	must(t, s.DeleteTimer(ctx(t), tm.ID))
	rs, _, err := s.ListRuns(ctx(t), store.RunFilter{TimerID: tm.ID})
	must(t, err)
	if len(rs) != 0 {
		t.Errorf("%d runs left after DeleteTimer", len(rs))
	}
	rs, _, err = s.ListRuns(ctx(t), store.RunFilter{TimerID: keep.ID})
	must(t, err)
	if len(rs) != 10 {
		t.Errorf("other timer lost runs: %d left", len(rs))
	}
	// A run planned after its timer was deleted is never handed out.
	mustInsert(t, s, NewRuns(tm.ID, base.Add(time.Hour), time.Second, 1))
	got, err := s.ClaimRuns(ctx(t), claimsFor(NewRuns(tm.ID, base.Add(time.Hour), time.Second, 1), "n", base))
	must(t, err)
	if len(got) != 0 {
		t.Errorf("claimed a run of a deleted timer: %+v", got[0].Run)
	}
}

// testSaveTimer: SaveTimer writes a timer with its runs and its audit entry
// in one call; an update replaces the pending runs from ReplaceFrom (not the
// claimed ones, nor those before), and a disable cancels them, which a
// later save revives.
func testSaveTimer(t *testing.T, s store.Store) {
	tm := NewTimer("app", "saved")
	tm.PlannedUntil = base.Add(5 * time.Second)
	audit := &model.AuditEntry{ID: "aud-" + tm.ID, At: base, Action: "timer.create", App: "app", Target: tm.ID, Detail: "saved"}
	got, err := s.SaveTimer(ctx(t), store.TimerWrite{Timer: tm, Create: true, Runs: NewRuns(tm.ID, base, time.Second, 5), Audit: audit})
	must(t, err)
	if len(got) != 5 {
		t.Fatalf("create: %d runs inserted, want 5", len(got))
	}
	stored, err := s.GetTimer(ctx(t), tm.ID)
	must(t, err)
	equalTimer(t, stored, tm)
	entries, _, err := s.ListAudit(ctx(t), store.AuditFilter{Target: tm.ID})
	must(t, err)
	if len(entries) != 1 || entries[0].Action != "timer.create" {
		t.Errorf("audit = %+v, want the create", entries)
	}

	// The first run is claimed; the update replaces the pending runs from
	// the third on with runs every 2 s.
	runs := NewRuns(tm.ID, base, time.Second, 5)
	if cl, err := s.ClaimRuns(ctx(t), claimsFor(runs[:1], "n1", base)); err != nil || len(cl) != 1 {
		t.Fatalf("claim = %v, %v", cl, err)
	}
	tm.Schedule, tm.UpdatedAt = "@every 2s", base.Add(time.Second)
	tm.PlannedUntil = base.Add(8 * time.Second)
	next := NewRuns(tm.ID, base.Add(2*time.Second), 2*time.Second, 4) // 2, 4, 6, 8 s
	got, err = s.SaveTimer(ctx(t), store.TimerWrite{Timer: tm, ReplaceFrom: base.Add(2 * time.Second), Runs: next})
	must(t, err)
	// The runs at 2 s and 4 s are in both plans: kept, not inserted again.
	if want := ids(next[2:]); !slices.Equal(ids(got), want) {
		t.Errorf("update inserted %v, want %v (6 s and 8 s)", ids(got), want)
	}
	checkRun(t, s, "claimed before the replan", runs[0].ID, wantRun{status: model.RunRunning, attempt: 1, lease: at(base.Add(time.Minute))})
	checkRun(t, s, "pending before ReplaceFrom", runs[1].ID, wantRun{status: model.RunPending})
	checkRun(t, s, "pending at 2 s, in the new plan too", runs[2].ID, wantRun{status: model.RunPending})
	checkRun(t, s, "pending at 4 s, in the new plan too", runs[4].ID, wantRun{status: model.RunPending})
	if _, err := s.GetRun(ctx(t), runs[3].ID); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("run at 3 s after the replan: %v, want ErrNotFound", err)
	}
	stored, err = s.GetTimer(ctx(t), tm.ID)
	must(t, err)
	equalTimer(t, stored, tm)

	// Disable: every pending run cancelled; enable: revived.
	tm.Enabled, tm.PlannedUntil = false, time.Time{}
	_, err = s.SaveTimer(ctx(t), store.TimerWrite{Timer: tm, CancelPending: true})
	must(t, err)
	if n, err := s.CountRuns(ctx(t), tm.ID, model.RunPending); err != nil || n != 0 {
		t.Errorf("pending after the disable = %d, %v, want 0", n, err)
	}
	checkRun(t, s, "claimed, after the disable", runs[0].ID, wantRun{status: model.RunRunning, attempt: 1, lease: at(base.Add(time.Minute))})
	tm.Enabled, tm.PlannedUntil = true, base.Add(8*time.Second)
	got, err = s.SaveTimer(ctx(t), store.TimerWrite{Timer: tm, ReplaceFrom: base.Add(2 * time.Second), Runs: next})
	must(t, err)
	if want := ids(next); !slices.Equal(ids(got), want) {
		t.Errorf("enable revived %v, want %v", ids(got), want)
	}

	// A replan with the same instants due later (a jitter added) rewrites
	// their due times: a run is kept only when due as the new plan says.
	jittered := NewRuns(tm.ID, base.Add(2*time.Second), 2*time.Second, 4)
	for i, r := range jittered {
		r.DueAt = r.ScheduledAt.Add(time.Duration(100*(i+1)) * time.Millisecond)
	}
	jittered[3].DueAt = jittered[3].ScheduledAt // and one not moved: kept
	got, err = s.SaveTimer(ctx(t), store.TimerWrite{Timer: tm, ReplaceFrom: base.Add(2 * time.Second), Runs: jittered})
	must(t, err)
	if want := ids(jittered[:3]); !slices.Equal(ids(got), want) {
		t.Errorf("replan with moved due times inserted %v, want %v", ids(got), want)
	}
	for _, r := range jittered {
		if g := getRun(t, s, r.ID); !g.DueAt.Equal(r.DueAt) || g.Status != model.RunPending {
			t.Errorf("run at %v after the jittered replan: %s due %v, want pending due %v", r.ScheduledAt, g.Status, g.DueAt, r.DueAt)
		}
	}
}

// testSaveTimerAtomic: a save that fails writes nothing: neither its runs
// nor its audit entry.
func testSaveTimerAtomic(t *testing.T, s store.Store) {
	mustTimer(t, s, "app", "taken")
	dup := NewTimer("app", "taken")
	audit := &model.AuditEntry{ID: "aud-" + dup.ID, At: base, Action: "timer.create", App: "app", Target: dup.ID}
	_, err := s.SaveTimer(ctx(t), store.TimerWrite{Timer: dup, Create: true, Runs: NewRuns(dup.ID, base, time.Second, 3), Audit: audit})
	if !errors.Is(err, model.ErrConflict) {
		t.Fatalf("SaveTimer(dup name) = %v, want ErrConflict", err)
	}
	ghost := NewTimer("app", "ghost")
	_, err = s.SaveTimer(ctx(t), store.TimerWrite{Timer: ghost, Runs: NewRuns(ghost.ID, base, time.Second, 3),
		Audit: &model.AuditEntry{ID: "aud-" + ghost.ID, At: base, Action: "timer.update", Target: ghost.ID}})
	if !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("SaveTimer(update of a missing timer) = %v, want ErrNotFound", err)
	}
	for _, id := range []string{dup.ID, ghost.ID} {
		if n, err := s.CountRuns(ctx(t), id); err != nil || n != 0 {
			t.Errorf("runs of %s after a failed save = %d, %v, want 0", id, n, err)
		}
		if e, _, err := s.ListAudit(ctx(t), store.AuditFilter{Target: id}); err != nil || len(e) != 0 {
			t.Errorf("audit of %s after a failed save = %v, %v, want none", id, e, err)
		}
	}
}
