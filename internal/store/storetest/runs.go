package storetest

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// runTests are the tests of pending runs: insert (idempotent, reviving
// cancelled runs), cancel, delete, list, the due and pending windows,
// status changes and counts.
var runTests = []test{
	{"Insert", testInsertRuns},
	{"InsertConcurrent", testInsertRunsConcurrent},
	{"List", testListRuns},
	{"ListAcross", testListRunsAcross},
	{"Counts", testRunCounts},
	{"DisableDropsPlan", testDisableDropsPlan},
	{"Pending", testPendingRuns},
	{"Due", testDueRuns},
	{"SetStatus", testSetRunStatus},
	{"Count", testCountRuns},
	{"MixedIDForms", testMixedRunIDs},
}

// testInsertRuns: InsertRuns in several batches is idempotent, returns only
// the runs it inserted or revived, and revives cancelled runs only, and
// only those cancelled with no attempt.
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

	// Cancelled runs are revived; others (running, finished) stay. A
	// ReplaceFrom past every run cancels them all (none is to come).
	ids5 := runs[:5]
	_, err = s.SaveTimer(ctx(t), store.TimerWrite{Timer: tm, CancelPending: true, ReplaceFrom: base.AddDate(100, 0, 0)})
	must(t, err)
	if cancelled, err := s.CountRuns(ctx(t), tm.ID, model.RunCancelled); err != nil || cancelled != 1202 {
		t.Fatalf("cancelled %d runs (%v), want 1202", cancelled, err)
	}
	// Claim-free way to get a non-pending, non-cancelled run: skip one.
	mustMade(t)(s.SetRunStatus(ctx(t), runs[1].ID, model.RunCancelled, model.RunSkipped, "skipped"))
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

	// A run cancelled after an attempt (an overlap policy's cancel_running
	// of a running run) may have executed: planned again, it stays
	// cancelled, never a fresh attempt 1.
	ran := claimOne(t, s, tm, base.Add(2*time.Hour), "n1")
	_, err = s.SetRunStatus(ctx(t), ran.ID, model.RunRunning, model.RunCancelled, "cancelled by overlap policy")
	must(t, err)
	if got := mustInsert(t, s, []*model.Run{{ID: ran.ID, TimerID: tm.ID, ScheduledAt: ran.ScheduledAt, DueAt: ran.DueAt, CreatedAt: base}}); len(got) != 0 {
		t.Errorf("planning a run cancelled after an attempt returned %v, want none", ids(got))
	}
	r, err = s.GetRun(ctx(t), ran.ID)
	must(t, err)
	if r.Status != model.RunCancelled || r.Attempt != 1 {
		t.Errorf("run cancelled after an attempt, planned again = %s attempt %d, want cancelled attempt 1", r.Status, r.Attempt)
	}
}

// testInsertRunsConcurrent: callers planning the same runs at once, in
// opposite orders, neither deadlock nor double a row.
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

// testListRuns: ListRuns filters and pages newest first, ties broken by id,
// at every page size; a bad cursor is an error.
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
				got := listAllRuns(t, s, f, 70)
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

// testPendingRuns: PendingRuns returns the pending runs due in a window, by
// DueAt, up to a limit; RescheduleRun moves a pending run only.
func testPendingRuns(t *testing.T, s store.Store) {
	_, runs := pendingRuns(t, s, "pr", 20)
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

// testDueRuns checks the bucket selection of DueRuns against BucketOf.
func testDueRuns(t *testing.T, s store.Store) {
	const buckets = 4
	want := map[int]int{}
	var all []*model.Run
	for i := range 12 {
		tm := mustTimer(t, s, "app", fmt.Sprintf("due-%d", i))
		runs := NewRuns(tm.ID, base.Add(time.Duration(i)*time.Second), time.Minute, 2) // one in this minute, one in the next
		all = append(all, runs...)
		want[int(model.TimerHash(tm.ID)%buckets)]++
	}
	mustInsert(t, s, all)
	total := 0
	for b := range buckets {
		got, err := s.DueRuns(ctx(t), base, base.Add(time.Minute), buckets, b)
		must(t, err)
		for _, r := range got {
			if int(model.TimerHash(r.TimerID)%buckets) != b || r.DueAt.Before(base) || !r.DueAt.Before(base.Add(time.Minute)) {
				t.Errorf("DueRuns(bucket %d) returned run %s of timer %s due %v", b, r.ID, r.TimerID, r.DueAt)
			}
		}
		if len(got) != want[b] {
			t.Errorf("DueRuns(bucket %d) = %d runs, want %d", b, len(got), want[b])
		}
		total += len(got)
	}
	got, err := s.DueRuns(ctx(t), base, base.Add(time.Minute), 1, 0)
	must(t, err)
	if len(got) != total || total != 12 {
		t.Errorf("DueRuns(all) = %d runs, buckets add up to %d, want 12", len(got), total)
	}
	// Several buckets in one read, repeats ignored; all of them is no filter.
	got, err = s.DueRuns(ctx(t), base, base.Add(time.Minute), buckets, 3, 1, 3)
	must(t, err)
	for _, r := range got {
		if b := int(model.TimerHash(r.TimerID) % buckets); b != 1 && b != 3 {
			t.Errorf("DueRuns(buckets 1, 3) returned run %s of bucket %d", r.ID, b)
		}
	}
	if len(got) != want[1]+want[3] {
		t.Errorf("DueRuns(buckets 1, 3) = %d runs, want %d", len(got), want[1]+want[3])
	}
	got, err = s.DueRuns(ctx(t), base, base.Add(time.Minute), buckets, 0, 1, 2, 3)
	must(t, err)
	if len(got) != 12 {
		t.Errorf("DueRuns(every bucket) = %d runs, want 12", len(got))
	}
}

// testSetRunStatus: SetRunStatus applies only from the status it names, with
// its reason; the same status is a no-op.
func testSetRunStatus(t *testing.T, s store.Store) {
	_, runs := pendingRuns(t, s, "srs", 2)
	mustMade(t)(s.SetRunStatus(ctx(t), runs[0].ID, model.RunPending, model.RunSkipped, "overlap"))
	r, err := s.GetRun(ctx(t), runs[0].ID)
	must(t, err)
	if r.Status != model.RunSkipped || r.Error != "overlap" {
		t.Errorf("run = %+v", r)
	}
	if _, err := s.SetRunStatus(ctx(t), runs[0].ID, model.RunPending, model.RunCancelled, ""); !errors.Is(err, model.ErrNotClaimed) {
		t.Errorf("SetRunStatus(wrong from) = %v, want ErrNotClaimed", err)
	}
	if _, err := s.SetRunStatus(ctx(t), "missing", model.RunPending, model.RunCancelled, ""); err == nil {
		t.Error("SetRunStatus(missing): no error")
	}
	// Same from and to: a no-op that still succeeds.
	mustMade(t)(s.SetRunStatus(ctx(t), runs[1].ID, model.RunPending, model.RunPending, ""))
}

// testCountRuns: CountRuns counts a timer's runs, of some statuses or all;
// ListRuns honours ScheduledBefore; PendingRuns with limit 0 returns all.
func testCountRuns(t *testing.T, s store.Store) {
	tm, runs := pendingRuns(t, s, "count", 3)
	n, err := s.CountRuns(ctx(t), tm.ID)
	must(t, err)
	if n != 3 {
		t.Errorf("CountRuns() = %d, want 3", n)
	}
	mustMade(t)(s.SetRunStatus(ctx(t), runs[2].ID, model.RunPending, model.RunSkipped, "test"))
	n, err = s.CountRuns(ctx(t), tm.ID, model.RunSkipped, model.RunCancelled)
	must(t, err)
	if n != 1 {
		t.Errorf("CountRuns(skipped, cancelled) = %d, want 1", n)
	}
	before, _, err := s.ListRuns(ctx(t), store.RunFilter{TimerID: tm.ID, Status: model.RunPending, ScheduledBefore: runs[1].ScheduledAt})
	must(t, err)
	if len(before) != 1 || before[0].ID != runs[0].ID {
		t.Errorf("ListRuns(ScheduledBefore) = %v, want [%s]", ids(before), runs[0].ID)
	}
	all, err := s.PendingRuns(ctx(t), base, base.Add(time.Hour), 0)
	must(t, err)
	if len(all) < 2 {
		t.Errorf("PendingRuns(limit 0) = %d runs, want all (2)", len(all))
	}
}

// legacyRunID is model.RunID as nodes before migration 0015 computed it:
// 32 hex digits, the instant's second and 12 bytes of SHA-256 of (timer,
// instant). A cluster in a rolling upgrade has nodes of both forms.
func legacyRunID(timerID string, at time.Time) string {
	h := sha256.New()
	h.Write([]byte(timerID))
	var b [9]byte
	binary.BigEndian.PutUint64(b[1:], uint64(at.UnixNano()))
	h.Write(b[:])
	var id [16]byte
	binary.BigEndian.PutUint32(id[:4], uint32(at.Unix()))
	copy(id[4:], h.Sum(nil))
	return hex.EncodeToString(id[:])
}

// testMixedRunIDs: in a rolling upgrade, nodes of the old run id form (32
// digits) and of the new (40) plan, claim and record the same fires. The
// store keeps one row per (timer, instant) whichever form wrote it first:
// the other form's insert is ignored, its claim and peek find nothing,
// and the row's own id claims and records as usual.
func testMixedRunIDs(t *testing.T, s store.Store) {
	tm := mustTimer(t, s, "app", "mixed")
	at := base.Add(10 * time.Second)
	oldFirst := &model.Run{ID: legacyRunID(tm.ID, at), TimerID: tm.ID, ScheduledAt: at, DueAt: at,
		Status: model.RunPending, CreatedAt: base}
	if len(oldFirst.ID) != 32 {
		t.Fatalf("legacy id %q", oldFirst.ID)
	}
	got := mustInsert(t, s, []*model.Run{oldFirst})
	if len(got) != 1 {
		t.Fatalf("old-form insert returned %d runs", len(got))
	}
	// A new node plans the same instant and the next one.
	planned := NewRuns(tm.ID, at, time.Second, 2)
	got, err := s.InsertPlanned(ctx(t), planned, map[string]int64{tm.ID: tm.Version})
	must(t, err)
	if !slices.Equal(ids(got), []string{planned[1].ID}) {
		t.Fatalf("new-form plan inserted %v, want only the next instant's %s", ids(got), planned[1].ID)
	}
	// And an old node plans the new form's instant: ignored too.
	late := &model.Run{ID: legacyRunID(tm.ID, planned[1].ScheduledAt), TimerID: tm.ID, ScheduledAt: planned[1].ScheduledAt,
		DueAt: planned[1].DueAt, Status: model.RunPending, CreatedAt: base}
	if got := mustInsert(t, s, []*model.Run{late}); len(got) != 0 {
		t.Fatalf("old-form insert of a planned instant returned %v", ids(got))
	}
	if n, err := s.CountRuns(ctx(t), tm.ID); err != nil || n != 2 {
		t.Fatalf("CountRuns = %d, %v; want 2 rows", n, err)
	}
	for _, id := range []string{planned[0].ID, late.ID} {
		if _, err := s.GetRun(ctx(t), id); !errors.Is(err, model.ErrNotFound) {
			t.Errorf("GetRun(%s) = %v, want ErrNotFound", id, err)
		}
	}
	now := at
	// Both forms' nodes claim both forms' ids: each row is claimed once,
	// by its own id.
	claimed, err := s.ClaimRuns(ctx(t), claimsFor([]*model.Run{planned[0], oldFirst, late, planned[1]}, "n1", now))
	must(t, err)
	if got, want := claimedIDs(claimed), ids([]*model.Run{oldFirst, planned[1]}); !slices.Equal(got, want) {
		t.Fatalf("claimed %v, want %v", got, want)
	}
	again, err := s.ClaimRuns(ctx(t), claimsFor([]*model.Run{planned[0], oldFirst, late, planned[1]}, "n2", now))
	must(t, err)
	if len(again) != 0 {
		t.Errorf("claimed %d runs again", len(again))
	}
	done, _, err := s.FinishRuns(ctx(t), []model.Result{
		{RunID: oldFirst.ID, Node: "n1", Attempt: 1, Status: model.RunSucceeded, StartedAt: now, FinishedAt: now},
		{RunID: planned[1].ID, Node: "n1", Attempt: 1, Status: model.RunSucceeded, StartedAt: now, FinishedAt: now},
		{RunID: planned[0].ID, Node: "n1", Attempt: 1, Status: model.RunSucceeded, StartedAt: now, FinishedAt: now},
	})
	must(t, err)
	if !slices.Equal(done, []bool{true, true, false}) {
		t.Errorf("FinishRuns = %v, want the two stored ids recorded and the absent one not", done)
	}
	if n, err := s.CountRuns(ctx(t), tm.ID, model.RunSucceeded); err != nil || n != 2 {
		t.Errorf("succeeded runs = %d, %v; want 2", n, err)
	}
}

// claimedIDs returns the sorted run ids of cs.
func claimedIDs(cs []store.ClaimedRun) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Run.ID
	}
	slices.Sort(out)
	return out
}

// testListRunsAcross: ListRuns lists the runs of every timer, or of one
// app's timers, or of the apps of a token (both: both must hold), within
// instants, newest first or oldest first, paged at every page size.
func testListRunsAcross(t *testing.T, s store.Store) {
	a := mustTimer(t, s, "billing", "a")
	b := mustTimer(t, s, "billing", "b")
	c := mustTimer(t, s, "mail", "c")
	var all []*model.Run
	for _, tm := range []*model.Timer{a, b, c} {
		all = append(all, NewRuns(tm.ID, base, time.Second, 10)...)
	}
	mustInsert(t, s, all)
	_, err := s.ClaimRuns(ctx(t), claimsFor(all[:3], "n", base))
	must(t, err)
	tests := []struct {
		name   string
		filter store.RunFilter
		want   int
	}{
		{"all", store.RunFilter{}, 30},
		{"app", store.RunFilter{App: "billing"}, 20},
		{"token apps", store.RunFilter{Apps: []string{"mail", "other"}}, 10},
		{"app outside the token's", store.RunFilter{App: "billing", Apps: []string{"mail"}}, 0},
		{"unknown app", store.RunFilter{App: "nope"}, 0},
		{"from", store.RunFilter{ScheduledFrom: base.Add(8 * time.Second)}, 6},
		{"window", store.RunFilter{ScheduledFrom: base.Add(2 * time.Second), ScheduledBefore: base.Add(4 * time.Second)}, 6},
		{"status of an app", store.RunFilter{App: "billing", Status: model.RunRunning}, 3},
		{"upcoming", store.RunFilter{TimerID: a.ID, Status: model.RunPending, ScheduledFrom: base.Add(5 * time.Second), Ascending: true}, 5},
		{"ascending", store.RunFilter{Ascending: true}, 30},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, limit := range []int{0, 1, 4, 30} {
				f := tc.filter
				f.Limit = limit
				got := listAllRuns(t, s, f, 40)
				if len(got) != tc.want {
					t.Errorf("limit %d: %d runs, want %d", limit, len(got), tc.want)
				}
				for i := 1; i < len(got); i++ {
					p, c := got[i-1], got[i]
					if f.Ascending {
						p, c = c, p
					}
					if p.ScheduledAt.Before(c.ScheduledAt) || (p.ScheduledAt.Equal(c.ScheduledAt) && p.ID <= c.ID) {
						t.Fatalf("limit %d: out of order at %d: %v/%s then %v/%s", limit, i, got[i-1].ScheduledAt, got[i-1].ID, got[i].ScheduledAt, got[i].ID)
					}
				}
			}
		})
	}
}

// testRunCounts: RunCounts counts the runs a filter selects by status,
// leaving out the statuses without runs.
func testRunCounts(t *testing.T, s store.Store) {
	a := mustTimer(t, s, "billing", "a")
	c := mustTimer(t, s, "mail", "c")
	runs := NewRuns(a.ID, base, time.Second, 10)
	mustInsert(t, s, append(slices.Clone(runs), NewRuns(c.ID, base, time.Second, 4)...))
	_, err := s.ClaimRuns(ctx(t), claimsFor(runs[:3], "n", base))
	must(t, err)
	must(t, Finish(ctx(t), s, model.Result{RunID: runs[0].ID, Node: "n", Attempt: 1, Status: model.RunFailed, StartedAt: base, FinishedAt: base}))
	for _, tc := range []struct {
		name string
		f    store.RunFilter
		want map[model.RunStatus]int64
	}{
		{"all", store.RunFilter{}, map[model.RunStatus]int64{model.RunPending: 11, model.RunRunning: 2, model.RunFailed: 1}},
		{"app", store.RunFilter{App: "billing", Status: model.RunFailed}, map[model.RunStatus]int64{model.RunPending: 7, model.RunRunning: 2, model.RunFailed: 1}},
		{"token apps", store.RunFilter{Apps: []string{"mail"}}, map[model.RunStatus]int64{model.RunPending: 4}},
		{"timer from", store.RunFilter{TimerID: a.ID, ScheduledFrom: base.Add(time.Second)}, map[model.RunStatus]int64{model.RunPending: 7, model.RunRunning: 2}},
		{"none", store.RunFilter{ScheduledBefore: base}, map[model.RunStatus]int64{}},
	} {
		got, err := s.RunCounts(ctx(t), tc.f)
		must(t, err)
		if !maps.Equal(got, tc.want) {
			t.Errorf("%s: RunCounts = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// testDisableDropsPlan: a save with CancelPending deletes the timer's
// planned fires from ReplaceFrom on and cancels the runs that came before
// (and the manual ones, and those attempted); a claimed run is left
// running, and a claim after the save finds nothing to claim.
func testDisableDropsPlan(t *testing.T, s store.Store) {
	tm, runs := pendingRuns(t, s, "disable", 6)
	_, err := s.ClaimRuns(ctx(t), claimsFor(runs[4:5], "n", base)) // claimed ahead
	must(t, err)
	manual := &model.Run{ID: model.RunID(tm.ID, base.Add(time.Hour)), TimerID: tm.ID, ScheduledAt: base.Add(time.Hour),
		DueAt: base.Add(time.Hour), Status: model.RunPending, Manual: true, CreatedAt: base}
	mustInsert(t, s, []*model.Run{manual})
	tm.Enabled = false
	_, err = s.SaveTimer(ctx(t), store.TimerWrite{Timer: tm, CancelPending: true, ReplaceFrom: runs[2].ScheduledAt})
	must(t, err)
	checkRun(t, s, "came before the disable", runs[0].ID, wantRun{status: model.RunCancelled})
	checkRun(t, s, "came before the disable", runs[1].ID, wantRun{status: model.RunCancelled})
	checkRun(t, s, "claimed ahead", runs[4].ID, wantRun{status: model.RunRunning, attempt: 1, lease: at(base.Add(time.Minute))})
	checkRun(t, s, "manual", manual.ID, wantRun{status: model.RunCancelled})
	wantGone(t, s, "a planned fire to come", []*model.Run{runs[2], runs[3], runs[5]})
	claimed, err := s.ClaimRuns(ctx(t), claimsFor(runs, "n2", base))
	must(t, err)
	if len(claimed) != 0 {
		t.Errorf("claims after the disable got %d runs, want none", len(claimed))
	}
}

// listAllRuns follows f's pages to the last and returns their runs in
// order; it fails t after maxPages pages.
func listAllRuns(t *testing.T, s store.Store, f store.RunFilter, maxPages int) []*model.Run {
	t.Helper()
	var got []*model.Run
	for pages := 0; ; pages++ {
		if pages > maxPages {
			t.Fatal("pagination does not end")
		}
		rs, next, err := s.ListRuns(ctx(t), f)
		must(t, err)
		got = append(got, rs...)
		if next == "" {
			return got
		}
		f.Before = next
	}
}
