package storetest

import (
	"testing"
	"time"

	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// skipTests are the tests of fires recorded skipped (model.Run.Reason) and
// of a timer's pause.
var skipTests = []test{
	{"InsertSkipped", testInsertSkipped},
	{"PausedTimer", testPausedTimer},
	{"PauseKeepsPlanAndReplace", testPauseKeepsPlanAndReplace},
	{"SkippedResult", testSkippedResult},
}

// testInsertSkipped: InsertRuns inserts a run given as skipped skipped,
// with its reason, error and finish time, returns it with the pending
// ones, leaves a pending run of the same instant alone and revives a
// cancelled one as skipped; ListRuns lists them by status.
func testInsertSkipped(t *testing.T, s store.Store) {
	tm := mustTimer(t, s, "app", "skips")
	runs := NewRuns(tm.ID, base, time.Second, 4)
	mustInsert(t, s, runs[:1]) // a pending run at base
	mustMade(t)(s.SetRunStatus(ctx(t), mustInsert(t, s, runs[1:2])[0].ID, model.RunPending, model.RunCancelled, "disabled"))
	skip := func(r *model.Run) *model.Run {
		return model.Skipped(tm.ID, r.ScheduledAt, base.Add(time.Hour), model.SkipMisfire, "missed: late")
	}
	got := mustInsert(t, s, []*model.Run{skip(runs[0]), skip(runs[1]), skip(runs[2]), runs[3]})
	statuses := map[string]model.RunStatus{}
	for _, r := range got {
		statuses[r.ID] = r.Status
	}
	want := map[string]model.RunStatus{runs[1].ID: model.RunSkipped, runs[2].ID: model.RunSkipped, runs[3].ID: model.RunPending}
	if len(statuses) != len(want) {
		t.Errorf("InsertRuns returned %v, want %v", statuses, want)
	}
	for id, st := range want {
		if statuses[id] != st {
			t.Errorf("InsertRuns returned %s as %q, want %q", id, statuses[id], st)
		}
	}
	if r := getRun(t, s, runs[0].ID); r.Status != model.RunPending || r.Reason != "" {
		t.Errorf("a pending run under a skipped insert: %s reason %q, want pending", r.Status, r.Reason)
	}
	for _, id := range []string{runs[1].ID, runs[2].ID} {
		r := getRun(t, s, id)
		if r.Status != model.RunSkipped || r.Reason != model.SkipMisfire || r.Error != "missed: late" ||
			r.FinishedAt == nil || !r.FinishedAt.Equal(base.Add(time.Hour)) || r.Attempt != 0 {
			t.Errorf("skipped run %s = %+v", id, r)
		}
	}
	list, _, err := s.ListRuns(ctx(t), store.RunFilter{TimerID: tm.ID, Status: model.RunSkipped})
	must(t, err)
	if len(list) != 2 || list[0].Reason != model.SkipMisfire {
		t.Errorf("ListRuns skipped = %d runs (%+v), want 2 with their reason", len(list), list)
	}
}

// testPausedTimer: Paused round-trips through create, update, SaveTimer
// and TimersToPlan.
func testPausedTimer(t *testing.T, s store.Store) {
	tm := NewTimer("app", "paused")
	tm.Paused = true
	must(t, createTimer(ctx(t), s, tm))
	got, err := s.GetTimer(ctx(t), tm.ID)
	must(t, err)
	if !got.Paused {
		t.Error("created paused, read back not paused")
	}
	plan, err := s.TimersToPlan(ctx(t), base.Add(time.Hour), store.PlanCursor{}, 10)
	must(t, err)
	if len(plan) != 1 || !plan[0].Paused {
		t.Errorf("TimersToPlan = %+v, want the paused timer, paused", plan)
	}
	got.Paused = false
	must(t, s.UpdateTimer(ctx(t), got))
	if again, err := s.GetTimer(ctx(t), tm.ID); err != nil || again.Paused {
		t.Errorf("after an update to not paused: %+v, %v", again, err)
	}
	got.Paused = true
	_, err = s.SaveTimer(ctx(t), store.TimerWrite{Timer: got})
	must(t, err)
	if again, err := s.GetTimer(ctx(t), tm.ID); err != nil || !again.Paused {
		t.Errorf("after a save paused: %+v, %v", again, err)
	}
}

// testPauseKeepsPlanAndReplace: a save that pauses a timer writes no run
// (its fires are skipped when they come); a later save with ReplaceFrom
// deletes the pending runs and the paused skips from then on (a resume),
// keeping other skips and the runs before.
func testPauseKeepsPlanAndReplace(t *testing.T, s store.Store) {
	tm, runs := pendingRuns(t, s, "pause", 4)
	manual := &model.Run{ID: model.RunID(tm.ID, base.Add(time.Hour)), TimerID: tm.ID, ScheduledAt: base.Add(time.Hour),
		DueAt: base.Add(time.Hour), Status: model.RunPending, Manual: true, CreatedAt: base}
	mustInsert(t, s, []*model.Run{manual})
	other := &model.Run{ID: model.RunID(tm.ID, base.Add(time.Minute)), TimerID: tm.ID, ScheduledAt: base.Add(time.Minute)}
	mustInsert(t, s, []*model.Run{model.Skipped(tm.ID, other.ScheduledAt, base, model.SkipOverlap, "overlap")})
	// A paused skip of a fire to come, as a database may hold one.
	ahead := model.Skipped(tm.ID, base.Add(2*time.Minute), base, model.SkipPaused, "the timer is paused")
	mustInsert(t, s, []*model.Run{ahead})
	tm.Paused = true
	_, err := s.SaveTimer(ctx(t), store.TimerWrite{Timer: tm})
	must(t, err)
	for _, r := range append(runs, manual) {
		if got := getRun(t, s, r.ID); got.Status != model.RunPending {
			t.Errorf("pending run after a pause: %+v, want pending", got)
		}
	}
	// The resume: replace from the third run on with a new plan.
	tm.Paused = false
	from := runs[2].ScheduledAt
	fresh := NewRuns(tm.ID, runs[3].ScheduledAt, time.Second, 2)
	_, err = s.SaveTimer(ctx(t), store.TimerWrite{Timer: tm, ReplaceFrom: from, Runs: fresh})
	must(t, err)
	for i, want := range []model.RunStatus{model.RunPending, model.RunPending, "", model.RunPending} {
		got, err := s.GetRun(ctx(t), runs[i].ID)
		switch {
		case want == "" && err == nil:
			t.Errorf("run %d, pending from the resume on, is still there: %+v", i, got)
		case want != "" && (err != nil || got.Status != want):
			t.Errorf("run %d after the resume: %+v, %v; want %s", i, got, err, want)
		}
	}
	if got, err := s.GetRun(ctx(t), ahead.ID); err == nil {
		t.Errorf("a paused skip after the resume is still there: %+v", got)
	}
	if got := getRun(t, s, other.ID); got.Status != model.RunSkipped || got.Reason != model.SkipOverlap {
		t.Errorf("an overlap skip after the resume: %+v", got)
	}
}

// testSkippedResult: a result recorded skipped keeps its reason; any
// other result clears it.
func testSkippedResult(t *testing.T, s store.Store) {
	_, runs := pendingRuns(t, s, "skipres", 2)
	now := base.Add(time.Second)
	claimed, err := s.ClaimRuns(ctx(t), claimsFor(runs, "n1", now))
	must(t, err)
	if len(claimed) != 2 {
		t.Fatalf("claimed %d, want 2", len(claimed))
	}
	ok, _, err := s.FinishRuns(ctx(t), []model.Result{
		{RunID: runs[0].ID, Node: "n1", Attempt: 1, Status: model.RunSkipped, StartedAt: now, FinishedAt: now,
			Error: "overlap: run x still running", Reason: model.SkipOverlap},
		{RunID: runs[1].ID, Node: "n1", Attempt: 1, Status: model.RunSucceeded, StartedAt: now, FinishedAt: now,
			Reason: model.SkipOverlap},
	})
	must(t, err)
	if !ok[0] || !ok[1] {
		t.Fatalf("FinishRuns fences = %v", ok)
	}
	if r := getRun(t, s, runs[0].ID); r.Status != model.RunSkipped || r.Reason != model.SkipOverlap {
		t.Errorf("skipped result: %s reason %q", r.Status, r.Reason)
	}
	if r := getRun(t, s, runs[1].ID); r.Status != model.RunSucceeded || r.Reason != "" {
		t.Errorf("succeeded result: %s reason %q, want no reason", r.Status, r.Reason)
	}
}
