package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// depTests are the tests of dependencies between timers (model.Timer.After):
// the edges a save writes, the cycles and deletes refused, and the
// downstream runs an upstream run's end makes, once.
var depTests = []test{
	{"Edges", testDepEdges},
	{"Refused", testDepRefused},
	{"Chain", testDepChain},
	{"Once", testDepOnce},
	{"Join", testDepJoin},
	{"JoinConcurrent", testDepJoinConcurrent},
	{"SetRunStatus", testDepSetRunStatus},
}

// depTimer creates a timer of app "app" named name that runs after ups.
func depTimer(t *testing.T, s store.Store, name string, after ...model.Dependency) *model.Timer {
	t.Helper()
	tm := NewTimer("app", name)
	if len(after) > 0 {
		tm.Schedule = ""
	}
	tm.After = after
	must(t, createTimer(ctx(t), s, tm))
	return tm
}

// endRun makes one run of timer tm (at at), claims it on node and records
// status; it returns the run.
func endRun(t *testing.T, s store.Store, tm *model.Timer, at time.Time, node string, status model.RunStatus) *model.Run {
	t.Helper()
	r := claimOne(t, s, tm, at, node)
	ok, _, err := s.FinishRuns(ctx(t), []model.Result{resultOf(r, node, status)})
	must(t, err)
	if !ok[0] {
		t.Fatalf("result of %s not recorded", r.ID)
	}
	return r
}

// claimOne makes one run of tm at at and claims it on node.
func claimOne(t *testing.T, s store.Store, tm *model.Timer, at time.Time, node string) *model.Run {
	t.Helper()
	r := NewRuns(tm.ID, at, time.Second, 1)[0]
	mustInsert(t, s, []*model.Run{r})
	got, err := s.ClaimRuns(ctx(t), claimsFor([]*model.Run{r}, node, at))
	must(t, err)
	if len(got) != 1 {
		t.Fatalf("claim of %s: %d runs", r.ID, len(got))
	}
	return got[0].Run
}

// resultOf is the result of r's attempt that node records, naming the
// run's timer as the executor does; resultOf(...).TimerID = "" is the
// result of a caller that does not (the store then reads it from the run).
func resultOf(r *model.Run, node string, status model.RunStatus) model.Result {
	return model.Result{RunID: r.ID, Node: node, Attempt: r.Attempt, Status: status, TimerID: r.TimerID,
		StartedAt: r.ScheduledAt, FinishedAt: r.ScheduledAt.Add(100 * time.Millisecond)}
}

// runsOf returns every run of the timer, newest first.
func runsOf(t *testing.T, s store.Store, timerID string) []*model.Run {
	t.Helper()
	runs, _, err := s.ListRuns(ctx(t), store.RunFilter{TimerID: timerID, Limit: 1000})
	must(t, err)
	return runs
}

// wantDependents checks that the timer has exactly the runs made after the
// upstream runs ups (oldest first), pending, due at once.
func wantDependents(t *testing.T, s store.Store, what string, tm *model.Timer, ups ...*model.Run) {
	t.Helper()
	runs := runsOf(t, s, tm.ID)
	if len(runs) != len(ups) {
		var got []string
		for _, r := range runs {
			got = append(got, r.UpstreamRunID)
		}
		t.Fatalf("%s: %s has %d runs (after %v), want %d", what, tm.Name, len(runs), got, len(ups))
	}
	for i, up := range ups {
		r := runs[len(runs)-1-i]
		if r.UpstreamRunID != up.ID || r.Status != model.RunPending || r.Attempt != 0 || r.Manual ||
			!r.DueAt.Equal(r.ScheduledAt) {
			t.Errorf("%s: run %d of %s = %+v, want pending after %s", what, i, tm.Name, r, up.ID)
		}
		if r.ID != model.DependentRunID(tm.ID, up.ID, r.ScheduledAt) {
			t.Errorf("%s: run id %s, want DependentRunID", what, r.ID)
		}
		if got := getRun(t, s, r.ID); got.UpstreamRunID != up.ID {
			t.Errorf("%s: GetRun upstream %q, want %q", what, got.UpstreamRunID, up.ID)
		}
	}
}

// testDepEdges: After is stored with its order, read by GetTimer,
// GetTimerByName and ListTimers, changed by UpdateTimer and SaveTimer,
// and answered from the other side by Downstreams.
func testDepEdges(t *testing.T, s store.Store) {
	a := mustTimer(t, s, "app", "a")
	b := mustTimer(t, s, "app", "b")
	c := depTimer(t, s, "c", model.Dependency{Timer: b.ID, On: model.OnFailure}, model.Dependency{Timer: a.ID, On: model.OnSuccess})
	want := []model.Dependency{{Timer: b.ID, On: model.OnFailure}, {Timer: a.ID, On: model.OnSuccess}}
	same := func(what string, got []model.Dependency, want []model.Dependency) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: after %v, want %v", what, got, want)
		}
	}
	got, err := s.GetTimer(ctx(t), c.ID)
	must(t, err)
	same("GetTimer", got.After, want)
	if got.Schedule != "" {
		t.Errorf("schedule %q, want empty", got.Schedule)
	}
	got, err = s.GetTimerByName(ctx(t), "app", "c")
	must(t, err)
	same("GetTimerByName", got.After, want)
	list, _, err := s.ListTimers(ctx(t), store.TimerFilter{})
	must(t, err)
	for _, tm := range list {
		switch tm.ID {
		case c.ID:
			same("ListTimers c", tm.After, want)
		default:
			same("ListTimers "+tm.Name, tm.After, nil)
		}
	}
	for _, tc := range []struct {
		id   string
		want []model.Edge
	}{
		{a.ID, []model.Edge{{Downstream: c.ID, Upstream: a.ID, On: model.OnSuccess}}},
		{b.ID, []model.Edge{{Downstream: c.ID, Upstream: b.ID, On: model.OnFailure}}},
		{c.ID, nil},
	} {
		down, err := s.Downstreams(ctx(t), tc.id)
		must(t, err)
		if fmt.Sprint(down) != fmt.Sprint(tc.want) && !(len(down) == 0 && len(tc.want) == 0) {
			t.Errorf("Downstreams(%s) = %v, want %v", tc.id, down, tc.want)
		}
	}
	// Update: a stays with another on, b goes.
	got.After = []model.Dependency{{Timer: a.ID, On: model.OnFinish}}
	must(t, s.UpdateTimer(ctx(t), got))
	got, err = s.GetTimer(ctx(t), c.ID)
	must(t, err)
	same("after UpdateTimer", got.After, []model.Dependency{{Timer: a.ID, On: model.OnFinish}})
	if down, err := s.Downstreams(ctx(t), b.ID); err != nil || len(down) != 0 {
		t.Errorf("Downstreams(b) after the update = %v, %v; want none", down, err)
	}
	// SaveTimer writes After too.
	got.After = append(got.After, model.Dependency{Timer: b.ID, On: model.OnSuccess})
	_, err = s.SaveTimer(ctx(t), store.TimerWrite{Timer: got})
	must(t, err)
	got, err = s.GetTimer(ctx(t), c.ID)
	must(t, err)
	same("after SaveTimer", got.After, []model.Dependency{{Timer: a.ID, On: model.OnFinish}, {Timer: b.ID, On: model.OnSuccess}})
	// Detach, then delete.
	detached, err := s.DetachDependents(ctx(t), a.ID)
	must(t, err)
	if fmt.Sprint(detached) != fmt.Sprint([]string{c.ID}) {
		t.Errorf("DetachDependents = %v, want [%s]", detached, c.ID)
	}
	must(t, s.DeleteTimer(ctx(t), a.ID))
	got, err = s.GetTimer(ctx(t), c.ID)
	must(t, err)
	same("after detach", got.After, []model.Dependency{{Timer: b.ID, On: model.OnSuccess}})
	// Deleting the downstream removes its edges.
	must(t, s.DeleteTimer(ctx(t), c.ID))
	if down, err := s.Downstreams(ctx(t), b.ID); err != nil || len(down) != 0 {
		t.Errorf("Downstreams(b) after deleting c = %v, %v; want none", down, err)
	}
	must(t, s.DeleteTimer(ctx(t), b.ID))
}

// testDepRefused: a cycle (named in order), an upstream that does not
// exist and a timer after itself are refused with a *model.FieldError and
// write nothing; an upstream with dependents is not deleted.
func testDepRefused(t *testing.T, s store.Store) {
	a := mustTimer(t, s, "app", "a")
	b := depTimer(t, s, "b", model.Dependency{Timer: a.ID, On: model.OnSuccess})
	c := depTimer(t, s, "c", model.Dependency{Timer: b.ID, On: model.OnSuccess})

	fieldErr := func(what string, err error, field, contains string) {
		t.Helper()
		var fe *model.FieldError
		if !errors.As(err, &fe) || fe.Field != field || !strings.Contains(fe.Message, contains) {
			t.Errorf("%s: %v, want a field error on %s containing %q", what, err, field, contains)
		}
	}
	cyc := *a
	cyc.After = []model.Dependency{{Timer: c.ID, On: model.OnFinish}}
	fieldErr("cycle (UpdateTimer)", s.UpdateTimer(ctx(t), &cyc), "after", "app/a → app/b → app/c → app/a")
	_, err := s.SaveTimer(ctx(t), store.TimerWrite{Timer: &cyc})
	fieldErr("cycle (SaveTimer)", err, "after", "app/a → app/b → app/c → app/a")
	self := *a
	self.After = []model.Dependency{{Timer: a.ID, On: model.OnFinish}}
	fieldErr("self", s.UpdateTimer(ctx(t), &self), "after[0].timer", "itself")
	missing := NewTimer("app", "m")
	missing.After = []model.Dependency{{Timer: a.ID, On: model.OnSuccess}, {Timer: "nope", On: model.OnSuccess}}
	fieldErr("missing upstream", createTimer(ctx(t), s, missing), "after[1].timer", `"nope"`)
	if _, err := s.GetTimer(ctx(t), missing.ID); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("a timer refused for its after was written: %v", err)
	}
	got, err := s.GetTimer(ctx(t), a.ID)
	must(t, err)
	if len(got.After) != 0 {
		t.Errorf("refused after written: %v", got.After)
	}
	// An upstream with dependents stays.
	err = s.DeleteTimer(ctx(t), a.ID)
	if !errors.Is(err, model.ErrHasDependents) || !strings.Contains(err.Error(), "app/b") {
		t.Errorf("DeleteTimer(upstream) = %v, want ErrHasDependents naming app/b", err)
	}
	if _, err := s.GetTimer(ctx(t), a.ID); err != nil {
		t.Errorf("refused delete deleted: %v", err)
	}
}

// testDepChain: A → B → C: each end that meets the edge makes one run of
// the next timer, due at once, naming the upstream run; an end of the
// other kind, a retried attempt and a disabled downstream make none.
func testDepChain(t *testing.T, s store.Store) {
	a := mustTimer(t, s, "app", "a")
	b := depTimer(t, s, "b", model.Dependency{Timer: a.ID, On: model.OnSuccess})
	c := depTimer(t, s, "c", model.Dependency{Timer: b.ID, On: model.OnFailure})
	other := depTimer(t, s, "other", model.Dependency{Timer: a.ID, On: model.OnFailure})

	at := base.Add(time.Second)
	ra := endRun(t, s, a, at, "n1", model.RunSucceeded)
	wantDependents(t, s, "A succeeded", b, ra)
	wantDependents(t, s, "A succeeded (on failure)", other)
	wantDependents(t, s, "A succeeded (C)", c)

	// B's run, claimed and failed, makes C's.
	rb := runsOf(t, s, b.ID)[0]
	got, err := s.ClaimRuns(ctx(t), claimsFor([]*model.Run{rb}, "n2", at.Add(time.Second)))
	must(t, err)
	if len(got) != 1 {
		t.Fatalf("claim B's run: %d", len(got))
	}
	if got[0].Run.UpstreamRunID != ra.ID {
		t.Errorf("claimed run upstream %q, want %q", got[0].Run.UpstreamRunID, ra.ID)
	}
	bFailed := resultOf(got[0].Run, "n2", model.RunFailed)
	bFailed.TimerID = "" // the store reads B from the run
	must(t, Finish(ctx(t), s, bFailed))
	wantDependents(t, s, "B failed", c, got[0].Run)

	// A failed attempt that is retried is no end.
	r := claimOne(t, s, a, at.Add(10*time.Second), "n1")
	res := resultOf(r, "n1", model.RunFailed)
	res.RetryAt = at.Add(20 * time.Second)
	_, _, err = s.FinishRuns(ctx(t), []model.Result{res})
	must(t, err)
	wantDependents(t, s, "A retried", other)
	// A disabled downstream gets no run.
	bt, err := s.GetTimer(ctx(t), b.ID)
	must(t, err)
	bt.Enabled = false
	must(t, s.UpdateTimer(ctx(t), bt))
	endRun(t, s, a, at.Add(30*time.Second), "n1", model.RunSucceeded)
	if runs := runsOf(t, s, b.ID); len(runs) != 1 {
		t.Errorf("B disabled: %d runs, want the one before", len(runs))
	}
}

// testDepOnce: one upstream run's end makes one downstream run, whoever
// records it and however often: a result recorded twice, one from a
// node fenced out, and eight concurrent recorders of the same result.
func testDepOnce(t *testing.T, s store.Store) {
	a := mustTimer(t, s, "app", "a")
	b := depTimer(t, s, "b", model.Dependency{Timer: a.ID, On: model.OnFinish})
	at := base.Add(time.Second)

	r := claimOne(t, s, a, at, "n1")
	// Fenced out: another node, an older attempt.
	for _, res := range []model.Result{resultOf(r, "n2", model.RunSucceeded), func() model.Result {
		x := resultOf(r, "n1", model.RunSucceeded)
		x.Attempt = r.Attempt + 1
		return x
	}()} {
		ok, _, err := s.FinishRuns(ctx(t), []model.Result{res})
		must(t, err)
		if ok[0] {
			t.Fatalf("fenced-out result %+v recorded", res)
		}
		if err := Finish(ctx(t), s, res); !errors.Is(err, model.ErrNotClaimed) {
			t.Fatalf("FinishRun(fenced out) = %v", err)
		}
	}
	wantDependents(t, s, "fenced out", b)
	// The holder's result, twice in one batch and again alone.
	// FinishRuns returns the run made, once.
	res := resultOf(r, "n1", model.RunSucceeded)
	ok, got, err := s.FinishRuns(ctx(t), []model.Result{res, res})
	must(t, err)
	if !ok[0] && !ok[1] {
		t.Errorf("a result twice in one batch: ok %v, want it recorded", ok)
	}
	if len(got) != 1 || got[0].TimerID != b.ID || got[0].UpstreamRunID != r.ID || got[0].Status != model.RunPending {
		t.Errorf("made %+v, want the one run of b after %s", got, r.ID)
	}
	ok, got, err = s.FinishRuns(ctx(t), []model.Result{res})
	must(t, err)
	if ok[0] {
		t.Error("a result recorded again")
	}
	if len(got) != 0 {
		t.Errorf("made %d runs from a result recorded again", len(got))
	}
	if err := Finish(ctx(t), s, res); !errors.Is(err, model.ErrNotClaimed) {
		t.Errorf("FinishRun again = %v", err)
	}
	wantDependents(t, s, "recorded twice", b, r)

	// Eight recorders of one result at once (nodes that each think they
	// hold it): one applies, one run follows.
	r2 := claimOne(t, s, a, at.Add(time.Minute), "n1")
	res2 := resultOf(r2, "n1", model.RunFailed)
	var wg sync.WaitGroup
	var mu sync.Mutex
	applied := 0
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ok bool
			if i%2 == 0 {
				got, _, err := s.FinishRuns(ctx(t), []model.Result{res2})
				if err != nil {
					t.Errorf("FinishRuns: %v", err)
					return
				}
				ok = got[0]
			} else {
				err := Finish(ctx(t), s, res2)
				if err != nil && !errors.Is(err, model.ErrNotClaimed) {
					t.Errorf("FinishRun: %v", err)
					return
				}
				ok = err == nil
			}
			if ok {
				mu.Lock()
				applied++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if applied != 1 {
		t.Errorf("%d recorders applied, want 1", applied)
	}
	wantDependents(t, s, "eight recorders", b, r, r2)
}

// testDepJoin: a timer after two upstreams runs once each has ended as
// it asks since its last run: ends of one upstream alone do not add up,
// and the run names the upstream run that completed the join.
func testDepJoin(t *testing.T, s store.Store) {
	a := mustTimer(t, s, "app", "a")
	b := mustTimer(t, s, "app", "b")
	d := depTimer(t, s, "d", model.Dependency{Timer: a.ID, On: model.OnSuccess}, model.Dependency{Timer: b.ID, On: model.OnFinish})
	at := base.Add(time.Second)
	step := func(i int) time.Time { return at.Add(time.Duration(i) * time.Second) }

	endRun(t, s, a, step(0), "n1", model.RunSucceeded)
	endRun(t, s, a, step(1), "n1", model.RunSucceeded)
	wantDependents(t, s, "A twice", d)
	endRun(t, s, a, step(2), "n1", model.RunFailed) // not A's way: no change
	wantDependents(t, s, "A failed", d)
	rb := endRun(t, s, b, step(3), "n1", model.RunFailed) // finish: failed counts
	wantDependents(t, s, "A then B", d, rb)
	// Cleared: B again is not enough.
	endRun(t, s, b, step(4), "n1", model.RunSucceeded)
	wantDependents(t, s, "B again", d, rb)
	ra := endRun(t, s, a, step(5), "n1", model.RunSucceeded)
	wantDependents(t, s, "B then A", d, rb, ra)
	// Both in one batch: one run, after the later end.
	r1 := claimOne(t, s, a, step(6), "n1")
	r2 := claimOne(t, s, b, step(7), "n1")
	ok, _, err := s.FinishRuns(ctx(t), []model.Result{resultOf(r2, "n1", model.RunSucceeded), resultOf(r1, "n1", model.RunSucceeded)})
	must(t, err)
	if !ok[0] || !ok[1] {
		t.Fatalf("batch: %v", ok)
	}
	wantDependents(t, s, "one batch", d, rb, ra, r2)
}

// testDepJoinConcurrent: the two upstreams of a join ending at once, in
// concurrent transactions, make exactly one run each round: neither misses
// the other's mark, neither both take it.
func testDepJoinConcurrent(t *testing.T, s store.Store) {
	a := mustTimer(t, s, "app", "a")
	b := mustTimer(t, s, "app", "b")
	d := depTimer(t, s, "d", model.Dependency{Timer: a.ID, On: model.OnSuccess}, model.Dependency{Timer: b.ID, On: model.OnSuccess})
	const rounds = 10
	for i := range rounds {
		at := base.Add(time.Duration(i+1) * time.Minute)
		ra := claimOne(t, s, a, at, "n1")
		rb := claimOne(t, s, b, at, "n2")
		var wg sync.WaitGroup
		for _, x := range []struct {
			r    *model.Run
			node string
		}{{ra, "n1"}, {rb, "n2"}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, _, err := s.FinishRuns(ctx(t), []model.Result{resultOf(x.r, x.node, model.RunSucceeded)}); err != nil {
					t.Errorf("FinishRuns: %v", err)
				}
			}()
		}
		wg.Wait()
		if n := len(runsOf(t, s, d.ID)); n != i+1 {
			t.Fatalf("round %d: %d runs of the join, want %d", i, n, i+1)
		}
	}
}

// testDepSetRunStatus: a run the sweeper fails (SetRunStatus to failed)
// is an end; a skip or a cancel is not.
func testDepSetRunStatus(t *testing.T, s store.Store) {
	a := mustTimer(t, s, "app", "a")
	b := depTimer(t, s, "b", model.Dependency{Timer: a.ID, On: model.OnFailure})
	c := depTimer(t, s, "c", model.Dependency{Timer: a.ID, On: model.OnFinish})
	runs := mustInsert(t, s, NewRuns(a.ID, base, time.Second, 3))
	for i, to := range []model.RunStatus{model.RunSkipped, model.RunCancelled} {
		made, err := s.SetRunStatus(ctx(t), runs[i].ID, model.RunPending, to, string(to))
		must(t, err)
		if len(made) != 0 {
			t.Errorf("SetRunStatus to %s made %+v, want none", to, made)
		}
	}
	wantDependents(t, s, "skipped and cancelled", b)
	made, err := s.SetRunStatus(ctx(t), runs[2].ID, model.RunPending, model.RunFailed, "lease expired")
	must(t, err)
	madeOf := map[string]bool{}
	for _, r := range made {
		if r.UpstreamRunID == runs[2].ID {
			madeOf[r.TimerID] = true
		}
	}
	if len(made) != 2 || !madeOf[b.ID] || !madeOf[c.ID] {
		t.Errorf("SetRunStatus to failed made %+v, want one run of b and one of c after %s", made, runs[2].ID)
	}
	wantDependents(t, s, "failed", b, runs[2])
	wantDependents(t, s, "failed (finish)", c, runs[2])
	if _, err := s.SetRunStatus(ctx(t), runs[2].ID, model.RunPending, model.RunFailed, "again"); !errors.Is(err, model.ErrNotClaimed) {
		t.Errorf("SetRunStatus again = %v", err)
	}
	wantDependents(t, s, "failed again", b, runs[2])
}
