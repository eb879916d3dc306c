package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/store"
)

func testListTimers(t *testing.T, s store.Store) {
	var all []string
	for i := range 25 {
		app := "a"
		if i%5 == 0 {
			app = "b"
		}
		tm := NewTimer(app, fmt.Sprintf("t%02d", i))
		tm.Enabled = i%2 == 0
		must(t, s.CreateTimer(ctx(t), tm))
		all = append(all, tm.ID)
	}
	slices.Sort(all)
	enabled, disabled := true, false
	tests := []struct {
		name   string
		filter store.TimerFilter
		want   int
	}{
		{"all", store.TimerFilter{}, 25},
		{"app b", store.TimerFilter{App: "b"}, 5},
		{"enabled", store.TimerFilter{Enabled: &enabled}, 13},
		{"disabled in a", store.TimerFilter{App: "a", Enabled: &disabled}, 10},
		{"none", store.TimerFilter{App: "zzz"}, 0},
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
	must(t, s.SetPlannedUntil(ctx(t), map[string]time.Time{made[0].ID: horizon}))
	must(t, s.SetPlannedUntil(ctx(t), map[string]time.Time{made[0].ID: base})) // backwards: ignored
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
	if err := s.SetPlannedUntil(ctx(t), map[string]time.Time{"missing": horizon}); err != nil {
		t.Errorf("SetPlannedUntil(missing) = %v, want nil (skipped)", err)
	}
}

func testInsertRuns(t *testing.T, s store.Store) {
	tm := mustTimer(t, s, "app", "runs")
	runs := NewRuns(tm.ID, base, time.Second, 1200) // several batches
	got := mustInsert(t, s, runs)
	if !slices.Equal(ids(got), ids(runs)) {
		t.Fatalf("first insert returned %d runs, want %d", len(got), len(runs))
	}
	for _, r := range got[:3] {
		if r.Status != model.RunPending || r.Attempt != 0 || r.TimerID != tm.ID {
			t.Errorf("inserted run %+v", r)
		}
	}
	// Again, plus duplicates inside the call and two new ones.
	more := NewRuns(tm.ID, base.Add(1200*time.Second), time.Second, 2)
	again := append(append(slices.Clone(runs), runs[:10]...), more...)
	got = mustInsert(t, s, again)
	if !slices.Equal(ids(got), ids(more)) {
		t.Errorf("second insert returned %v, want only the 2 new runs", ids(got))
	}
	r, err := s.GetRun(ctx(t), runs[7].ID)
	must(t, err)
	if !r.ScheduledAt.Equal(runs[7].ScheduledAt) || !r.DueAt.Equal(runs[7].DueAt) || r.Status != model.RunPending ||
		r.StartedAt != nil || r.FinishedAt != nil || r.LeaseUntil != nil || !r.CreatedAt.Equal(base) {
		t.Errorf("GetRun = %+v", r)
	}
	if _, err := s.GetRun(ctx(t), "missing"); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("GetRun(missing) = %v, want ErrNotFound", err)
	}

	// Cancelled runs are revived; others (running, finished) stay.
	ids5 := runs[:5]
	cancelled, err := s.CancelPendingRuns(ctx(t), tm.ID, base)
	must(t, err)
	if len(cancelled) != 1202 {
		t.Fatalf("cancelled %d runs, want 1202", len(cancelled))
	}
	// Claim-free way to get a non-pending, non-cancelled run: skip one.
	must(t, s.SetRunStatus(ctx(t), runs[1].ID, model.RunCancelled, model.RunSkipped, "skipped"))
	revive := slices.Clone(ids5)
	revive[0] = &model.Run{ID: runs[0].ID, TimerID: tm.ID, ScheduledAt: runs[0].ScheduledAt,
		DueAt: base.Add(time.Hour), CreatedAt: base}
	got = mustInsert(t, s, revive)
	want := []string{runs[0].ID, runs[2].ID, runs[3].ID, runs[4].ID}
	slices.Sort(want)
	if !slices.Equal(ids(got), want) {
		t.Errorf("revive returned %v, want %v", ids(got), want)
	}
	r, err = s.GetRun(ctx(t), runs[0].ID)
	must(t, err)
	if r.Status != model.RunPending || !r.DueAt.Equal(base.Add(time.Hour)) || r.Error != "" {
		t.Errorf("revived run = %+v", r)
	}
	r, err = s.GetRun(ctx(t), runs[1].ID)
	must(t, err)
	if r.Status != model.RunSkipped {
		t.Errorf("skipped run became %s", r.Status)
	}
	if got, err := s.InsertRuns(ctx(t), nil); err != nil || len(got) != 0 {
		t.Errorf("InsertRuns(nil) = %v, %v", got, err)
	}
}

func testInsertRunsConcurrent(t *testing.T, s store.Store) {
	var runs []*model.Run
	for i := range 3 {
		tm := mustTimer(t, s, "app", fmt.Sprintf("c%d", i))
		runs = append(runs, NewRuns(tm.ID, base, time.Second, 300)...)
	}
	const workers = 6
	var wg sync.WaitGroup
	results := make([][]*model.Run, workers)
	errs := make([]error, workers)
	for w := range workers {
		wg.Go(func() {
			in := slices.Clone(runs)
			if w%2 == 1 {
				slices.Reverse(in) // different order: no deadlock either
			}
			results[w], errs[w] = s.InsertRuns(ctx(t), in)
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for w := range workers {
		must(t, errs[w])
		for _, r := range results[w] {
			seen[r.ID] = true
		}
	}
	if len(seen) != len(runs) {
		t.Errorf("the callers returned %d distinct runs, want %d", len(seen), len(runs))
	}
	st, err := s.Stats(ctx(t))
	must(t, err)
	if st.Runs[model.RunPending] != int64(len(runs)) {
		t.Errorf("%d pending rows, want %d", st.Runs[model.RunPending], len(runs))
	}
}

func testCancelAndDelete(t *testing.T, s store.Store) {
	tm := mustTimer(t, s, "app", "cd")
	other := mustTimer(t, s, "app", "other")
	runs := NewRuns(tm.ID, base, time.Minute, 10)
	mustInsert(t, s, runs)
	mustInsert(t, s, NewRuns(other.ID, base, time.Minute, 10))
	// Run 0 is running: neither cancelled nor deleted.
	_, err := s.ClaimRuns(ctx(t), claimsFor(runs[:1], "n1", base))
	must(t, err)

	got, err := s.CancelPendingRuns(ctx(t), tm.ID, base.Add(5*time.Minute))
	must(t, err)
	slices.Sort(got)
	if want := ids(runs[5:]); !slices.Equal(got, want) {
		t.Errorf("CancelPendingRuns = %v, want %v", got, want)
	}
	got, err = s.DeletePendingRuns(ctx(t), tm.ID, base.Add(2*time.Minute))
	must(t, err)
	slices.Sort(got)
	if want := ids(runs[2:5]); !slices.Equal(got, want) {
		t.Errorf("DeletePendingRuns = %v, want %v", got, want)
	}
	if _, err := s.GetRun(ctx(t), runs[3].ID); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("deleted run: %v", err)
	}
	rs, _, err := s.ListRuns(ctx(t), store.RunFilter{TimerID: tm.ID})
	must(t, err)
	if len(rs) != 7 {
		t.Errorf("%d runs left, want 7", len(rs))
	}
	rs, _, err = s.ListRuns(ctx(t), store.RunFilter{TimerID: other.ID, Status: model.RunPending})
	must(t, err)
	if len(rs) != 10 {
		t.Errorf("other timer has %d pending runs, want 10", len(rs))
	}
	got, err = s.CancelPendingRuns(ctx(t), "missing", base)
	if err != nil || len(got) != 0 {
		t.Errorf("CancelPendingRuns(missing) = %v, %v", got, err)
	}
}

func testListRuns(t *testing.T, s store.Store) {
	a := mustTimer(t, s, "app", "la")
	b := mustTimer(t, s, "app", "lb")
	// Same instants on both timers: ties are broken by id.
	all := append(NewRuns(a.ID, base, time.Second, 30), NewRuns(b.ID, base, time.Second, 30)...)
	mustInsert(t, s, all)
	_, err := s.ClaimRuns(ctx(t), claimsFor(all[:4], "n", base))
	must(t, err)
	tests := []struct {
		name   string
		filter store.RunFilter
		want   int
	}{
		{"all", store.RunFilter{}, 60},
		{"timer a", store.RunFilter{TimerID: a.ID}, 30},
		{"running", store.RunFilter{Status: model.RunRunning}, 4},
		{"pending of a", store.RunFilter{TimerID: a.ID, Status: model.RunPending}, 26},
		{"none", store.RunFilter{Status: model.RunFailed}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, limit := range []int{0, 1, 7, 60} {
				f := tc.filter
				f.Limit = limit
				var got []*model.Run
				for pages := 0; ; pages++ {
					if pages > 70 {
						t.Fatal("pagination does not end")
					}
					rs, next, err := s.ListRuns(ctx(t), f)
					must(t, err)
					got = append(got, rs...)
					if next == "" {
						break
					}
					f.Before = next
				}
				if len(got) != tc.want {
					t.Errorf("limit %d: %d runs, want %d", limit, len(got), tc.want)
				}
				for i := 1; i < len(got); i++ {
					p, c := got[i-1], got[i]
					if p.ScheduledAt.Before(c.ScheduledAt) || (p.ScheduledAt.Equal(c.ScheduledAt) && p.ID <= c.ID) {
						t.Fatalf("limit %d: not newest first at %d: %v/%s then %v/%s", limit, i, p.ScheduledAt, p.ID, c.ScheduledAt, c.ID)
					}
				}
			}
		})
	}
	if _, _, err := s.ListRuns(ctx(t), store.RunFilter{Before: "!!not a cursor"}); err == nil {
		t.Error("ListRuns with a bad cursor: no error")
	}
}

func testPendingRuns(t *testing.T, s store.Store) {
	tm := mustTimer(t, s, "app", "pr")
	runs := NewRuns(tm.ID, base, time.Second, 20)
	mustInsert(t, s, runs)
	_, err := s.ClaimRuns(ctx(t), claimsFor(runs[5:6], "n", base))
	must(t, err)
	must(t, s.RescheduleRun(ctx(t), runs[0].ID, base.Add(100*time.Second)))
	got, err := s.PendingRuns(ctx(t), base, base.Add(10*time.Second), 100)
	must(t, err)
	// runs 1..9 without 5 (running); run 0 moved out of the window.
	var want []string
	for i := 1; i < 10; i++ {
		if i != 5 {
			want = append(want, runs[i].ID)
		}
	}
	var gotIDs []string
	for i, r := range got {
		gotIDs = append(gotIDs, r.ID)
		if i > 0 && r.DueAt.Before(got[i-1].DueAt) {
			t.Errorf("PendingRuns not ordered by DueAt")
		}
	}
	if !slices.Equal(gotIDs, want) {
		t.Errorf("PendingRuns = %v, want %v", gotIDs, want)
	}
	got, err = s.PendingRuns(ctx(t), base, base.Add(time.Hour), 3)
	must(t, err)
	if len(got) != 3 {
		t.Errorf("limit 3: %d runs", len(got))
	}
	got, err = s.PendingRuns(ctx(t), base.Add(100*time.Second), base.Add(101*time.Second), 10)
	must(t, err)
	if len(got) != 1 || got[0].ID != runs[0].ID {
		t.Errorf("rescheduled run not found at its new DueAt: %v", got)
	}
	if err := s.RescheduleRun(ctx(t), runs[5].ID, base); !errors.Is(err, model.ErrNotClaimed) {
		t.Errorf("RescheduleRun(running) = %v, want ErrNotClaimed", err)
	}
	if err := s.RescheduleRun(ctx(t), "missing", base); err == nil {
		t.Error("RescheduleRun(missing): no error")
	}
}

func testClaimAndFinish(t *testing.T, s store.Store) {
	tm := mustTimer(t, s, "app", "cf")
	runs := NewRuns(tm.ID, base, time.Second, 5)
	mustInsert(t, s, runs)
	now := base.Add(time.Second)
	got, err := s.ClaimRuns(ctx(t), append(claimsFor(runs[:3], "n1", now), store.Claim{RunID: "missing", Node: "n1", Now: now}))
	must(t, err)
	if len(got) != 3 {
		t.Fatalf("claimed %d runs, want 3", len(got))
	}
	for _, c := range got {
		r := c.Run
		if r.Status != model.RunRunning || r.Node != "n1" || r.Attempt != 1 || r.StartedAt == nil ||
			!r.StartedAt.Equal(now) || r.LeaseUntil == nil || !r.LeaseUntil.Equal(now.Add(time.Minute)) {
			t.Errorf("claimed run = %+v", r)
		}
		if c.Timer == nil || c.Timer.ID != tm.ID || c.Timer.Action.HTTP == nil {
			t.Errorf("claimed run without its timer: %+v", c.Timer)
		}
	}
	again, err := s.ClaimRuns(ctx(t), claimsFor(runs[:3], "n2", now))
	must(t, err)
	if len(again) != 0 {
		t.Errorf("claimed %d running runs again", len(again))
	}
	// DueBy fences off a run due later than the claimer thinks.
	early := claimsFor(runs[3:4], "n1", now)
	early[0].DueBy = runs[3].DueAt.Add(-time.Nanosecond)
	got2, err := s.ClaimRuns(ctx(t), early)
	must(t, err)
	if len(got2) != 0 {
		t.Errorf("claimed a run due after DueBy")
	}
	early[0].DueBy = runs[3].DueAt
	got2, err = s.ClaimRuns(ctx(t), early)
	must(t, err)
	if len(got2) != 1 {
		t.Errorf("DueBy = DueAt: claimed %d runs, want 1", len(got2))
	}

	start, end := now, now.Add(1500*time.Millisecond)
	res := model.Result{RunID: runs[0].ID, Node: "n1", Attempt: 1, Status: model.RunSucceeded,
		StartedAt: start, FinishedAt: end, Output: "ok"}
	fences := []struct {
		name string
		mod  func(r model.Result) model.Result
	}{
		{"wrong node", func(r model.Result) model.Result { r.Node = "n2"; return r }},
		{"wrong attempt", func(r model.Result) model.Result { r.Attempt = 2; return r }},
		{"not running", func(r model.Result) model.Result { r.RunID = runs[4].ID; return r }},
		{"missing", func(r model.Result) model.Result { r.RunID = "missing"; return r }},
	}
	for _, f := range fences {
		if err := s.FinishRun(ctx(t), f.mod(res)); !errors.Is(err, model.ErrNotClaimed) {
			t.Errorf("FinishRun(%s) = %v, want ErrNotClaimed", f.name, err)
		}
	}
	must(t, s.FinishRun(ctx(t), res))
	if err := s.FinishRun(ctx(t), res); !errors.Is(err, model.ErrNotClaimed) {
		t.Errorf("FinishRun twice = %v, want ErrNotClaimed", err)
	}
	r, err := s.GetRun(ctx(t), runs[0].ID)
	must(t, err)
	if r.Status != model.RunSucceeded || r.DurationMS != 1500 || r.Output != "ok" || r.LeaseUntil != nil ||
		r.FinishedAt == nil || !r.FinishedAt.Equal(end) || r.Attempt != 1 {
		t.Errorf("finished run = %+v", r)
	}
	// A big output survives (MEDIUMTEXT on MySQL).
	big := make([]byte, 100<<10)
	for i := range big {
		big[i] = 'a' + byte(i%26)
	}
	must(t, s.FinishRun(ctx(t), model.Result{RunID: runs[1].ID, Node: "n1", Attempt: 1, Status: model.RunFailed,
		StartedAt: start, FinishedAt: end, Output: string(big), Error: "exit status 1"}))
	r, err = s.GetRun(ctx(t), runs[1].ID)
	must(t, err)
	if r.Status != model.RunFailed || r.Output != string(big) || r.Error != "exit status 1" {
		t.Errorf("failed run: status %s, output %d bytes, error %q", r.Status, len(r.Output), r.Error)
	}
}

func testClaimConcurrent(t *testing.T, s store.Store) {
	var runs []*model.Run
	for i := range 4 {
		tm := mustTimer(t, s, "app", fmt.Sprintf("cc%d", i))
		runs = append(runs, NewRuns(tm.ID, base, time.Second, 50)...)
	}
	mustInsert(t, s, runs)
	const workers = 8
	var wg sync.WaitGroup
	claimed := make([][]store.ClaimedRun, workers)
	errs := make([]error, workers)
	for w := range workers {
		wg.Go(func() {
			in := slices.Clone(runs)
			if w%2 == 1 {
				slices.Reverse(in)
			}
			// In batches of 50, like an executor.
			for len(in) > 0 {
				n := min(50, len(in))
				got, err := s.ClaimRuns(ctx(t), claimsFor(in[:n], fmt.Sprintf("node%d", w), base))
				if err != nil {
					errs[w] = err
					return
				}
				claimed[w] = append(claimed[w], got...)
				in = in[n:]
			}
		})
	}
	wg.Wait()
	owner := map[string]string{}
	for w := range workers {
		must(t, errs[w])
		for _, c := range claimed[w] {
			if prev, dup := owner[c.Run.ID]; dup {
				t.Errorf("run %s claimed by %s and %s", c.Run.ID, prev, c.Run.Node)
			}
			owner[c.Run.ID] = c.Run.Node
		}
	}
	if len(owner) != len(runs) {
		t.Errorf("%d runs claimed, want %d", len(owner), len(runs))
	}
	// The stored node is the one that got the run.
	for _, r := range runs[:20] {
		got, err := s.GetRun(ctx(t), r.ID)
		must(t, err)
		if got.Node != owner[r.ID] || got.Attempt != 1 {
			t.Errorf("run %s: node %s attempt %d, claimed by %s", r.ID, got.Node, got.Attempt, owner[r.ID])
		}
	}
}

func testFinishRuns(t *testing.T, s store.Store) {
	tm := mustTimer(t, s, "app", "fr")
	runs := NewRuns(tm.ID, base, time.Second, 300)
	mustInsert(t, s, runs)
	_, err := s.ClaimRuns(ctx(t), claimsFor(runs, "n1", base))
	must(t, err)
	var rs []model.Result
	for i, r := range runs {
		res := model.Result{RunID: r.ID, Node: "n1", Attempt: 1, Status: model.RunSucceeded,
			StartedAt: base, FinishedAt: base.Add(time.Duration(i) * time.Millisecond)}
		switch i % 3 {
		case 1:
			res.Node = "n2" // lost fence
		case 2:
			res.Status, res.Error, res.RetryAt = model.RunFailed, "try again", base.Add(time.Hour)
		}
		rs = append(rs, res)
	}
	ok, err := s.FinishRuns(ctx(t), rs)
	must(t, err)
	if len(ok) != len(rs) {
		t.Fatalf("FinishRuns returned %d flags for %d results", len(ok), len(rs))
	}
	for i := range rs {
		if ok[i] != (i%3 != 1) {
			t.Errorf("result %d: ok = %v", i, ok[i])
		}
	}
	st, err := s.Stats(ctx(t))
	must(t, err)
	if st.Runs[model.RunSucceeded] != 100 || st.Runs[model.RunPending] != 100 || st.Runs[model.RunRunning] != 100 {
		t.Errorf("stats after FinishRuns: %v", st.Runs)
	}
	r, err := s.GetRun(ctx(t), runs[297].ID)
	must(t, err)
	if r.DurationMS != 297 || r.Status != model.RunSucceeded || r.LeaseUntil != nil {
		t.Errorf("run 297 = %+v, want succeeded in 297ms", r)
	}
	r, err = s.GetRun(ctx(t), runs[299].ID)
	must(t, err)
	if r.Status != model.RunPending || !r.DueAt.Equal(base.Add(time.Hour)) || r.Error != "try again" || r.Attempt != 1 || r.DurationMS != 299 {
		t.Errorf("retried run 299 = %+v", r)
	}
	r, err = s.GetRun(ctx(t), runs[298].ID)
	must(t, err)
	if r.Status != model.RunRunning || !r.DueAt.Equal(runs[298].DueAt) {
		t.Errorf("fenced-off run 298 = %+v", r)
	}
	if ok, err := s.FinishRuns(ctx(t), nil); err != nil || len(ok) != 0 {
		t.Errorf("FinishRuns(nil) = %v, %v", ok, err)
	}
}

func testRetryAndRequeue(t *testing.T, s store.Store) {
	tm := mustTimer(t, s, "app", "rr")
	runs := NewRuns(tm.ID, base, time.Second, 3)
	mustInsert(t, s, runs)
	_, err := s.ClaimRuns(ctx(t), claimsFor(runs, "n1", base))
	must(t, err)

	retryAt := base.Add(10 * time.Second)
	must(t, s.FinishRun(ctx(t), model.Result{RunID: runs[0].ID, Node: "n1", Attempt: 1, Status: model.RunFailed,
		StartedAt: base, FinishedAt: base.Add(time.Second), Error: "HTTP 500", Output: "boom", RetryAt: retryAt}))
	r, err := s.GetRun(ctx(t), runs[0].ID)
	must(t, err)
	if r.Status != model.RunPending || !r.DueAt.Equal(retryAt) || r.Attempt != 1 || r.Error != "HTTP 500" ||
		r.Output != "boom" || r.DurationMS != 1000 || r.LeaseUntil != nil {
		t.Errorf("run after retry = %+v", r)
	}
	pend, err := s.PendingRuns(ctx(t), retryAt, retryAt.Add(time.Nanosecond), 10)
	must(t, err)
	if len(pend) != 1 {
		t.Errorf("retried run not pending at RetryAt")
	}
	// Second attempt, on another node.
	got, err := s.ClaimRuns(ctx(t), claimsFor(runs[:1], "n2", retryAt))
	must(t, err)
	if len(got) != 1 || got[0].Run.Attempt != 2 || got[0].Run.Node != "n2" {
		t.Fatalf("second claim = %+v", got)
	}
	if err := s.FinishRun(ctx(t), model.Result{RunID: runs[0].ID, Node: "n1", Attempt: 1, Status: model.RunSucceeded}); !errors.Is(err, model.ErrNotClaimed) {
		t.Errorf("finish by the first attempt after a retry = %v, want ErrNotClaimed", err)
	}
	must(t, s.FinishRun(ctx(t), model.Result{RunID: runs[0].ID, Node: "n2", Attempt: 2, Status: model.RunSucceeded,
		StartedAt: retryAt, FinishedAt: retryAt}))

	// Extending runs 1 and 2 for another node changes nothing; for
	// their holder it does, and it can be undone by a later extension.
	lost, err := s.ExtendLeases(ctx(t), "other", leasesOf(runs[1:], 1), base.Add(time.Hour))
	must(t, err)
	if !slices.Equal(lost, leasesOf(runs[1:], 1)) {
		t.Errorf("ExtendLeases(other node) lost = %v, want %v", lost, leasesOf(runs[1:], 1))
	}
	lost, err = s.ExtendLeases(ctx(t), "n1", append(leasesOf(runs[1:], 1), store.Lease{RunID: runs[0].ID, Attempt: 1}), base.Add(90*time.Minute))
	must(t, err)
	if !slices.Equal(lost, []store.Lease{{RunID: runs[0].ID, Attempt: 1}}) {
		t.Errorf("ExtendLeases lost = %v, want only the finished run %s", lost, runs[0].ID)
	}
	if exp, err := s.ExpiredLeases(ctx(t), base.Add(time.Hour), 10); err != nil || len(exp) != 0 {
		t.Errorf("ExpiredLeases after ExtendLeases = %v, %v; want none", ids(exp), err)
	}
	_, err = s.ExtendLeases(ctx(t), "n1", leasesOf(runs[1:], 1), base.Add(time.Minute))
	must(t, err)

	// Leases: runs 1 and 2 expire at base+1m.
	exp, err := s.ExpiredLeases(ctx(t), base.Add(time.Minute), 10)
	must(t, err)
	if len(exp) != 0 {
		t.Errorf("%d leases expired before their end", len(exp))
	}
	exp, err = s.ExpiredLeases(ctx(t), base.Add(2*time.Minute), 10)
	must(t, err)
	if !slices.Equal(ids(exp), ids(runs[1:])) {
		t.Fatalf("ExpiredLeases = %v, want %v", ids(exp), ids(runs[1:]))
	}
	stale := *exp[0]
	stale.Node = "other"
	if err := s.Requeue(ctx(t), &stale, base, base.Add(2*time.Minute)); !errors.Is(err, model.ErrNotClaimed) {
		t.Errorf("Requeue(wrong node) = %v, want ErrNotClaimed", err)
	}
	stale = *exp[0]
	stale.Attempt = 7
	if err := s.Requeue(ctx(t), &stale, base, base.Add(2*time.Minute)); !errors.Is(err, model.ErrNotClaimed) {
		t.Errorf("Requeue(wrong attempt) = %v, want ErrNotClaimed", err)
	}
	due := base.Add(3 * time.Minute)
	must(t, s.Requeue(ctx(t), exp[0], due, base.Add(2*time.Minute)))
	if err := s.Requeue(ctx(t), exp[0], due, base.Add(2*time.Minute)); !errors.Is(err, model.ErrNotClaimed) {
		t.Errorf("Requeue twice = %v, want ErrNotClaimed", err)
	}
	r, err = s.GetRun(ctx(t), exp[0].ID)
	must(t, err)
	if r.Status != model.RunPending || !r.DueAt.Equal(due) || r.LeaseUntil != nil || r.Attempt != 1 {
		t.Errorf("requeued run = %+v", r)
	}
	// The old holder's late finish is fenced off.
	if err := s.FinishRun(ctx(t), model.Result{RunID: exp[0].ID, Node: "n1", Attempt: 1, Status: model.RunSucceeded}); !errors.Is(err, model.ErrNotClaimed) {
		t.Errorf("finish after requeue = %v, want ErrNotClaimed", err)
	}
}

func testSetRunStatus(t *testing.T, s store.Store) {
	tm := mustTimer(t, s, "app", "srs")
	runs := NewRuns(tm.ID, base, time.Second, 2)
	mustInsert(t, s, runs)
	must(t, s.SetRunStatus(ctx(t), runs[0].ID, model.RunPending, model.RunSkipped, "overlap"))
	r, err := s.GetRun(ctx(t), runs[0].ID)
	must(t, err)
	if r.Status != model.RunSkipped || r.Error != "overlap" {
		t.Errorf("run = %+v", r)
	}
	if err := s.SetRunStatus(ctx(t), runs[0].ID, model.RunPending, model.RunCancelled, ""); !errors.Is(err, model.ErrNotClaimed) {
		t.Errorf("SetRunStatus(wrong from) = %v, want ErrNotClaimed", err)
	}
	if err := s.SetRunStatus(ctx(t), "missing", model.RunPending, model.RunCancelled, ""); err == nil {
		t.Error("SetRunStatus(missing): no error")
	}
	// Same from and to: a no-op that still succeeds.
	must(t, s.SetRunStatus(ctx(t), runs[1].ID, model.RunPending, model.RunPending, ""))
}

func testDeleteTimer(t *testing.T, s store.Store) {
	tm := mustTimer(t, s, "app", "del")
	keep := mustTimer(t, s, "app", "keep")
	runs := NewRuns(tm.ID, base, time.Second, 10)
	mustInsert(t, s, runs)
	mustInsert(t, s, NewRuns(keep.ID, base, time.Second, 10))
	_, err := s.ClaimRuns(ctx(t), claimsFor(runs[:2], "n", base))
	must(t, err)
	must(t, s.FinishRun(ctx(t), model.Result{RunID: runs[0].ID, Node: "n", Attempt: 1, Status: model.RunSucceeded}))
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

func testNodes(t *testing.T, s store.Store) {
	must(t, s.Heartbeat(ctx(t), model.Node{ID: "n1", Addr: "10.0.0.1:8080", StartedAt: base, SeenAt: base, Slices: []string{"0-1", "0-2"}}))
	must(t, s.Heartbeat(ctx(t), model.Node{ID: "n2", Addr: "10.0.0.2:8080", StartedAt: base, SeenAt: base}))
	must(t, s.Heartbeat(ctx(t), model.Node{ID: "n1", Addr: "10.0.0.1:8081", StartedAt: base, SeenAt: base.Add(10 * time.Second), Slices: []string{"0-3"}}))
	ns, err := s.ListNodes(ctx(t), base)
	must(t, err)
	if len(ns) != 2 || ns[0].ID != "n1" || ns[0].Addr != "10.0.0.1:8081" || !slices.Equal(ns[0].Slices, []string{"0-3"}) ||
		!ns[0].SeenAt.Equal(base.Add(10*time.Second)) || !ns[0].StartedAt.Equal(base) || len(ns[1].Slices) != 0 {
		t.Errorf("ListNodes = %+v", ns)
	}
	ns, err = s.ListNodes(ctx(t), base.Add(time.Second))
	must(t, err)
	if len(ns) != 1 || ns[0].ID != "n1" {
		t.Errorf("ListNodes(recent) = %+v", ns)
	}
	must(t, s.DeleteNode(ctx(t), "n1"))
	must(t, s.DeleteNode(ctx(t), "n1"))
	ns, err = s.ListNodes(ctx(t), time.Time{})
	must(t, err)
	if len(ns) != 1 || ns[0].ID != "n2" {
		t.Errorf("ListNodes after delete = %+v", ns)
	}
}

func testStats(t *testing.T, s store.Store) {
	st, err := s.Stats(ctx(t))
	must(t, err)
	if st.TimersEnabled != 0 || st.TimersDisabled != 0 || len(st.Runs) != 0 {
		t.Errorf("empty store stats = %+v", st)
	}
	a := mustTimer(t, s, "app", "s1")
	off := NewTimer("app", "s2")
	off.Enabled = false
	must(t, s.CreateTimer(ctx(t), off))
	runs := NewRuns(a.ID, base, time.Second, 5)
	mustInsert(t, s, runs)
	_, err = s.ClaimRuns(ctx(t), claimsFor(runs[:2], "n", base))
	must(t, err)
	st, err = s.Stats(ctx(t))
	must(t, err)
	if st.TimersEnabled != 1 || st.TimersDisabled != 1 || st.Runs[model.RunPending] != 3 || st.Runs[model.RunRunning] != 2 {
		t.Errorf("stats = %+v", st)
	}
}
