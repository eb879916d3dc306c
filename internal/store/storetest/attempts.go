package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// attemptTests are the tests of the attempts of runs (RunAttempts) and of
// reruns (InsertRerun).
var attemptTests = []test{
	{"Recorded", testAttemptsRecorded},
	{"Deleted", testAttemptsDeleted},
	{"Rerun", testInsertRerun},
}

// testAttemptsRecorded: each result whose fence holds records its attempt,
// through FinishRuns, for one result and for a batch alike, a retried attempt
// included; a result whose fence fails records none; the text is cut to
// model.MaxAttemptText.
func testAttemptsRecorded(t *testing.T, s store.Store) {
	_, runs := pendingRuns(t, s, "att", 4)
	t0 := base.Add(time.Second)
	_, err := s.ClaimRuns(ctx(t), claimsFor(runs, "n1", t0))
	must(t, err)
	long := strings.Repeat("x", model.MaxAttemptText+100)
	retry := t0.Add(time.Minute)
	headers := map[string]string{"Retry-After": "60", "Set-Cookie": model.Redacted}
	// runs[0] alone, failed with a retry; runs[1..2] in a batch with a
	// result that lost its fence (runs[3] claimed by n1, not n9).
	must(t, Finish(ctx(t), s, model.Result{RunID: runs[0].ID, Node: "n1", Attempt: 1, Status: model.RunFailed,
		StartedAt: t0, FinishedAt: t0.Add(250 * time.Millisecond), Error: "http status 503", Output: long,
		RetryAt: retry, HTTPStatus: 503, ResponseHeader: headers}))
	ok, _, err := s.FinishRuns(ctx(t), []model.Result{
		{RunID: runs[1].ID, Node: "n1", Attempt: 1, Status: model.RunSucceeded, StartedAt: t0, FinishedAt: t0.Add(time.Second),
			Output: "ok", HTTPStatus: 200},
		{RunID: runs[2].ID, Node: "n1", Attempt: 1, Status: model.RunSkipped, Reason: model.SkipOverlap,
			StartedAt: t0, FinishedAt: t0, Error: "overlap"},
		{RunID: runs[3].ID, Node: "n9", Attempt: 1, Status: model.RunSucceeded, StartedAt: t0, FinishedAt: t0},
	})
	must(t, err)
	if !ok[0] || !ok[1] || ok[2] {
		t.Fatalf("fences %v, want [true true false]", ok)
	}
	check := func(id string, want ...model.Attempt) {
		t.Helper()
		got, err := s.RunAttempts(ctx(t), id)
		must(t, err)
		if len(got) != len(want) {
			t.Fatalf("run %s: attempts %+v, want %+v", id, got, want)
		}
		for i, g := range got {
			w := want[i]
			if g.Attempt != w.Attempt || g.Node != w.Node || !g.StartedAt.Equal(w.StartedAt) || !g.EndedAt.Equal(w.EndedAt) ||
				g.DurationMS != w.DurationMS || g.Status != w.Status || g.HTTPStatus != w.HTTPStatus ||
				g.Error != w.Error || g.Output != w.Output || len(g.ResponseHeaders) != len(w.ResponseHeaders) {
				t.Errorf("run %s attempt %d: %+v, want %+v", id, i, g, w)
			}
			for k, v := range w.ResponseHeaders {
				if g.ResponseHeaders[k] != v {
					t.Errorf("run %s attempt %d: header %s = %q, want %q", id, i, k, g.ResponseHeaders[k], v)
				}
			}
		}
	}
	first := model.Attempt{Attempt: 1, Node: "n1", StartedAt: t0, EndedAt: t0.Add(250 * time.Millisecond), DurationMS: 250,
		Status: model.RunFailed, HTTPStatus: 503, ResponseHeaders: headers, Error: "http status 503",
		Output: long[:model.MaxAttemptText]}
	check(runs[0].ID, first)
	check(runs[1].ID, model.Attempt{Attempt: 1, Node: "n1", StartedAt: t0, EndedAt: t0.Add(time.Second), DurationMS: 1000,
		Status: model.RunSucceeded, HTTPStatus: 200, Output: "ok"})
	check(runs[2].ID, model.Attempt{Attempt: 1, Node: "n1", StartedAt: t0, EndedAt: t0, Status: model.RunSkipped, Error: "overlap"})
	check(runs[3].ID)
	check("missing")
	if r := getRun(t, s, runs[0].ID); r.Status != model.RunPending || r.Output != long {
		t.Errorf("retried run: status %s, output of %d bytes; want pending with the whole output", r.Status, len(r.Output))
	}

	// The retry, on another node, adds the second attempt.
	t1 := retry.Add(time.Second)
	claimed, err := s.ClaimRuns(ctx(t), claimsFor(runs[:1], "n2", t1))
	must(t, err)
	if len(claimed) != 1 {
		t.Fatalf("claimed %d runs for the retry, want 1", len(claimed))
	}
	a := claimed[0].Run.Attempt
	ok, _, err = s.FinishRuns(ctx(t), []model.Result{{RunID: runs[0].ID, Node: "n2", Attempt: a, Status: model.RunSucceeded,
		StartedAt: t1, FinishedAt: t1.Add(5 * time.Millisecond), HTTPStatus: 204}})
	must(t, err)
	if !ok[0] {
		t.Fatal("the retry's result lost its fence")
	}
	check(runs[0].ID, first, model.Attempt{Attempt: a, Node: "n2", StartedAt: t1, EndedAt: t1.Add(5 * time.Millisecond),
		DurationMS: 5, Status: model.RunSucceeded, HTTPStatus: 204})
}

// testAttemptsDeleted: retention and the delete of a timer delete the
// attempts with their runs.
func testAttemptsDeleted(t *testing.T, s store.Store) {
	now := base.Add(time.Second)
	finish := func(name string) (*model.Timer, []*model.Run) {
		tm, runs := pendingRuns(t, s, name, 3)
		_, err := s.ClaimRuns(ctx(t), claimsFor(runs, "n1", now))
		must(t, err)
		rs := make([]model.Result, len(runs))
		for i, r := range runs {
			rs[i] = model.Result{RunID: r.ID, Node: "n1", Attempt: 1, Status: model.RunSucceeded, StartedAt: now, FinishedAt: now}
		}
		_, _, err = s.FinishRuns(ctx(t), rs)
		must(t, err)
		return tm, runs
	}
	count := func(runs []*model.Run) (n int) {
		t.Helper()
		for _, r := range runs {
			as, err := s.RunAttempts(ctx(t), r.ID)
			must(t, err)
			n += len(as)
		}
		return n
	}
	pruned, runs := finish("attp")
	if n := count(runs); n != 3 {
		t.Fatalf("%d attempts recorded, want 3", n)
	}
	n, err := s.PruneRuns(ctx(t), store.RunPrune{TimerID: pruned.ID, Keep: 1})
	must(t, err)
	if n != 2 {
		t.Fatalf("pruned %d runs, want 2", n)
	}
	if n := count(runs[:2]); n != 0 {
		t.Errorf("%d attempts left of the pruned runs", n)
	}
	if n := count(runs[2:]); n != 1 {
		t.Errorf("%d attempts left of the kept run, want 1", n)
	}
	deleted, runs := finish("attd")
	must(t, s.DeleteTimer(ctx(t), deleted.ID))
	if n := count(runs); n != 0 {
		t.Errorf("%d attempts left of the runs of a deleted timer", n)
	}
}

// testInsertRerun: a rerun reads back, from GetRun and from a claim, with
// the run it reruns and that run's instant; it is one run more of its
// timer.
func testInsertRerun(t *testing.T, s store.Store) {
	tm, runs := pendingRuns(t, s, "rr", 1)
	now := base.Add(time.Hour)
	r := &model.Run{ID: model.RunID(tm.ID, now), TimerID: tm.ID, ScheduledAt: now, DueAt: now, Status: model.RunPending,
		Manual: true, CreatedAt: now, RerunOf: runs[0].ID, RerunScheduledAt: runs[0].ScheduledAt}
	must(t, s.InsertRerun(ctx(t), r))
	got := getRun(t, s, r.ID)
	if got.RerunOf != runs[0].ID || !got.RerunScheduledAt.Equal(runs[0].ScheduledAt) || !got.Manual ||
		got.Status != model.RunPending || !got.ScheduledAt.Equal(now) || !got.DueAt.Equal(now) {
		t.Fatalf("rerun read back as %+v", got)
	}
	if err := s.InsertRerun(ctx(t), r); err == nil {
		t.Error("a second rerun with the same id was inserted")
	}
	claimed, err := s.ClaimRuns(ctx(t), claimsFor([]*model.Run{r}, "n1", now))
	must(t, err)
	if len(claimed) != 1 || claimed[0].Run.RerunOf != runs[0].ID || !claimed[0].Run.RerunScheduledAt.Equal(runs[0].ScheduledAt) {
		t.Fatalf("claimed rerun %+v", claimed)
	}
	if plain := getRun(t, s, runs[0].ID); plain.RerunOf != "" || !plain.RerunScheduledAt.IsZero() {
		t.Errorf("a run that is no rerun reads back with rerun_of %q at %v", plain.RerunOf, plain.RerunScheduledAt)
	}
}
