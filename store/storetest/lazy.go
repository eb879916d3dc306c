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

// lazyTests are the tests of lazy claims (docs/guarantees.md, "Lazy
// claims"): the read that replaces a claim's write (PeekRuns), the claim
// written late (PromoteRuns), the fence of a slice taken over (FenceSlice,
// RescheduleRun's bump) and the lazy result's fence (FinishRun,
// FinishRuns).
var lazyTests = []test{
	{"Peek", testPeekRuns},
	{"Promote", testPromoteRuns},
	{"PromoteConcurrent", testPromoteConcurrent},
	{"FenceSlice", testFenceSlice},
	{"Finish", testFinishLazy},
	{"FinishMixed", testFinishLazyMixed},
	{"Retry", testLazyRetry},
	{"Follow", testLazyFollow},
	{"RescheduleBump", testRescheduleBump},
}

// lazyResult is the result of the lazy attempt of r at attempt on node:
// the run is expected pending at attempt-1.
func lazyResult(r *model.Run, node string, attempt int, status model.RunStatus) model.Result {
	return model.Result{RunID: r.ID, Node: node, Attempt: attempt, Lazy: true, Status: status, TimerID: r.TimerID,
		StartedAt: r.DueAt, FinishedAt: r.DueAt.Add(250 * time.Millisecond), Output: "lazy"}
}

// fenceRun fences off the lazy attempts of r alone (a slice of one
// nanosecond at its DueAt), checking that it counted one run.
func fenceRun(t *testing.T, s store.Store, r *model.Run) {
	t.Helper()
	n, err := s.FenceSlice(ctx(t), r.DueAt, r.DueAt.Add(time.Nanosecond), 1, 0)
	must(t, err)
	if n != 1 {
		t.Fatalf("FenceSlice of run %s = %d, want 1", r.ID, n)
	}
}

// handedTo makes r (pending, attempt 0) a run that only node may claim,
// as a handoff leaves it: pending at attempt 0, target node.
func handedTo(t *testing.T, s store.Store, r *model.Run, node string) {
	t.Helper()
	got, err := s.ClaimRuns(ctx(t), claimsFor([]*model.Run{r}, "other", base))
	must(t, err)
	if len(got) != 1 {
		t.Fatalf("claim of %s: %d runs", r.ID, len(got))
	}
	must(t, s.Handoff(ctx(t), got[0].Run, node, r.DueAt))
}

// testPeekRuns: PeekRuns returns the pending runs of the ids that the node
// may claim, due by dueBy, with their timers (nil for a timer gone), in
// claim order, and changes nothing.
func testPeekRuns(t *testing.T, s store.Store) {
	tm, runs := pendingRuns(t, s, "peek", 6)
	_, err := s.ClaimRuns(ctx(t), claimsFor(runs[:1], "n1", base)) // running: never peeked
	must(t, err)
	handedTo(t, s, runs[5], "n2") // only n2's
	gone := mustTimer(t, s, "app", "peek-gone")
	must(t, s.DeleteTimer(ctx(t), gone.ID))
	orphan := NewRuns(gone.ID, base.Add(2*time.Second), time.Second, 1)[0] // planned as its timer was deleted
	mustInsert(t, s, []*model.Run{orphan})
	all := append(ids(runs), orphan.ID, "missing")
	stored := map[string]*model.Run{}
	for _, r := range append(runs[1:], orphan) {
		stored[r.ID] = getRun(t, s, r.ID)
	}
	// same reports whether a and b are the same pending run, as stored.
	same := func(a, b *model.Run) bool {
		return a.Status == model.RunPending && a.Status == b.Status && a.Attempt == b.Attempt && a.Node == b.Node &&
			a.TargetNode == b.TargetNode && a.DueAt.Equal(b.DueAt) && a.StartedAt == nil && b.StartedAt == nil &&
			a.LeaseUntil == nil && b.LeaseUntil == nil
	}

	tests := []struct {
		name  string
		node  string
		ids   []string
		dueBy time.Time
		want  []*model.Run
	}{
		{"pending only", "n1", all, time.Time{}, []*model.Run{runs[1], runs[2], runs[3], runs[4], orphan}},
		{"due by", "n1", all, runs[2].DueAt, []*model.Run{runs[1], runs[2], orphan}},
		{"due by before all", "n1", all, base.Add(-time.Nanosecond), nil},
		{"target node", "n2", all, time.Time{}, []*model.Run{runs[1], runs[2], runs[3], runs[4], runs[5], orphan}},
		{"some ids", "n1", []string{runs[3].ID, runs[0].ID, runs[3].ID}, time.Time{}, []*model.Run{runs[3]}},
		{"none", "n1", nil, time.Time{}, nil},
	}
	for _, tc := range tests {
		got, err := s.PeekRuns(ctx(t), tc.node, tc.ids, tc.dueBy)
		must(t, err)
		var gotIDs []string
		for _, c := range got {
			gotIDs = append(gotIDs, c.Run.ID)
			r := c.Run
			if w := stored[r.ID]; w == nil || !same(r, w) || r.Attempt != 0 {
				t.Errorf("%s: peeked run = %+v, want it as stored, pending: %+v", tc.name, r, w)
			}
			switch {
			case r.TimerID == gone.ID:
				if c.Timer != nil {
					t.Errorf("%s: run of a deleted timer with timer %+v, want nil", tc.name, c.Timer)
				}
			case c.Timer == nil || c.Timer.ID != tm.ID || c.Timer.Action.HTTP == nil:
				t.Errorf("%s: run %s without its timer: %+v", tc.name, r.ID, c.Timer)
			}
		}
		if !slices.IsSortedFunc(got, store.ClaimOrder) {
			t.Errorf("%s: peeked runs %v not in claim order", tc.name, gotIDs)
		}
		slices.Sort(gotIDs)
		if want := ids(tc.want); !slices.Equal(gotIDs, want) {
			t.Errorf("%s: PeekRuns = %v, want %v", tc.name, gotIDs, want)
		}
	}
	// Nothing was written: the peeked runs are as they were, and a claim
	// takes them at attempt 1.
	for id, w := range stored {
		if got := getRun(t, s, id); !same(got, w) {
			t.Errorf("run %s after peeks = %+v, want %+v", id, got, w)
		}
	}
	claimed, err := s.ClaimRuns(ctx(t), claimsFor(runs[1:2], "n1", base))
	must(t, err)
	if len(claimed) != 1 || claimed[0].Run.Attempt != 1 {
		t.Errorf("claim after peeks = %+v", claimed)
	}
}

// testPromoteRuns: a lease is promoted only while its run is pending at
// the attempt before it (and the node may claim it); the leases returned
// are the others: a wrong attempt, a run another node claimed, a fenced
// run, a run placed on another node, a missing run, a lease promoted
// already.
func testPromoteRuns(t *testing.T, s store.Store) {
	_, runs := pendingRuns(t, s, "promote", 6)
	now := base.Add(time.Second)
	until := now.Add(time.Minute)
	_, err := s.ClaimRuns(ctx(t), claimsFor(runs[2:3], "n2", now))
	must(t, err)
	fenceRun(t, s, runs[3])
	handedTo(t, s, runs[4], "n2")

	leases := []store.Lease{
		{RunID: runs[0].ID, Attempt: 1}, // applies
		{RunID: runs[1].ID, Attempt: 2}, // pending at 0, not 1
		{RunID: runs[2].ID, Attempt: 1}, // running on n2
		{RunID: runs[3].ID, Attempt: 1}, // fenced: pending at 1
		{RunID: runs[4].ID, Attempt: 1}, // n2's
		{RunID: runs[5].ID, Attempt: 1}, // applies
		{RunID: "missing", Attempt: 1},
	}
	lost, err := s.PromoteRuns(ctx(t), "n1", leases, now, until)
	must(t, err)
	want := []store.Lease{leases[1], leases[2], leases[3], leases[4], leases[6]}
	if got := sortLeases(lost); !slices.Equal(got, sortLeases(want)) {
		t.Errorf("PromoteRuns lost %v, want %v", got, want)
	}
	for _, r := range []*model.Run{runs[0], runs[5]} {
		got := getRun(t, s, r.ID)
		if got.Status != model.RunRunning || got.Node != "n1" || got.Attempt != 1 || got.LeaseUntil == nil ||
			!got.LeaseUntil.Equal(until) || got.StartedAt == nil || got.StartedAt.Sub(now).Abs() > time.Microsecond ||
			got.FinishedAt != nil {
			t.Errorf("promoted run = %+v", got)
		}
	}
	checkRun(t, s, "promote of a run pending at 0 at attempt 2", runs[1].ID, wantRun{model.RunPending, 0, nil})
	checkRun(t, s, "promote of another node's run", runs[2].ID, wantRun{model.RunRunning, 1, at(now.Add(time.Minute))})
	checkRun(t, s, "promote of a fenced run", runs[3].ID, wantRun{model.RunPending, 1, nil})
	checkRun(t, s, "promote of a run placed on n2", runs[4].ID, wantRun{model.RunPending, 0, nil})
	if r := getRun(t, s, runs[2].ID); r.Node != "n2" {
		t.Errorf("another node's run taken over by a promote: node %s", r.Node)
	}

	// Promoted already: lost, and the claim is unchanged.
	lost, err = s.PromoteRuns(ctx(t), "n1", leases[:1], now.Add(time.Second), until.Add(time.Second))
	must(t, err)
	if !slices.Equal(lost, leases[:1]) {
		t.Errorf("second promote lost %v, want %v", lost, leases[:1])
	}
	checkRun(t, s, "second promote", runs[0].ID, wantRun{model.RunRunning, 1, at(until)})
	// The next attempt of the fenced run, and the placed run by its node.
	lost, err = s.PromoteRuns(ctx(t), "n1", []store.Lease{{RunID: runs[3].ID, Attempt: 2}}, now, until)
	must(t, err)
	if len(lost) != 0 {
		t.Errorf("promote of the fenced run's next attempt lost %v", lost)
	}
	checkRun(t, s, "promote after a fence", runs[3].ID, wantRun{model.RunRunning, 2, at(until)})
	lost, err = s.PromoteRuns(ctx(t), "n2", []store.Lease{{RunID: runs[4].ID, Attempt: 1}}, now, until)
	must(t, err)
	if len(lost) != 0 {
		t.Errorf("promote of a placed run by its node lost %v", lost)
	}
	// A promoted attempt's result applies as a claimed attempt's, and
	// also as a lazy one (the executor may promote an attempt while its
	// lazy result is on its way); another node's lazy result does not.
	ok, err := s.FinishRuns(ctx(t), []model.Result{
		{RunID: runs[0].ID, Node: "n1", Attempt: 1, Status: model.RunSucceeded, StartedAt: now, FinishedAt: now.Add(time.Second)},
		lazyResult(runs[5], "n1", 1, model.RunSucceeded),
		lazyResult(runs[2], "n1", 1, model.RunSucceeded),
	})
	must(t, err)
	if !ok[0] || !ok[1] || ok[2] {
		t.Errorf("results of promoted attempts: ok = %v, want [true true false]", ok)
	}
	if lost, err := s.PromoteRuns(ctx(t), "n1", nil, now, until); err != nil || len(lost) != 0 {
		t.Errorf("PromoteRuns(nil) = %v, %v", lost, err)
	}
}

// testPromoteConcurrent: two nodes promoting the same leases at once, in
// opposite orders and in several calls: each run is promoted once, and
// stored for its winner.
func testPromoteConcurrent(t *testing.T, s store.Store) {
	var runs []*model.Run
	for i := range 3 {
		tm := mustTimer(t, s, "app", fmt.Sprintf("pc%d", i))
		runs = append(runs, NewRuns(tm.ID, base, time.Second, 200)...)
	}
	mustInsert(t, s, runs)
	const nodes = 2
	var wg sync.WaitGroup
	won := make([][]store.Lease, nodes)
	for w := range nodes {
		wg.Go(func() {
			in := leasesOf(runs, 1)
			if w%2 == 1 {
				slices.Reverse(in)
			}
			for len(in) > 0 {
				n := min(150, len(in))
				lost, err := s.PromoteRuns(ctx(t), fmt.Sprintf("node%d", w), in[:n], base, base.Add(time.Minute))
				if err != nil {
					t.Error(err)
					return
				}
				for _, l := range in[:n] {
					if !slices.Contains(lost, l) {
						won[w] = append(won[w], l)
					}
				}
				in = in[n:]
			}
		})
	}
	wg.Wait()
	owner := map[string]string{}
	for w := range nodes {
		for _, l := range won[w] {
			if prev, dup := owner[l.RunID]; dup {
				t.Errorf("run %s promoted by %s and node%d", l.RunID, prev, w)
			}
			owner[l.RunID] = fmt.Sprintf("node%d", w)
		}
	}
	if len(owner) != len(runs) {
		t.Errorf("%d runs promoted, want %d", len(owner), len(runs))
	}
	for _, r := range runs[:50] {
		got := getRun(t, s, r.ID)
		if got.Status != model.RunRunning || got.Node != owner[r.ID] || got.Attempt != 1 {
			t.Errorf("run %s: %s on %s attempt %d, promoted by %s", r.ID, got.Status, got.Node, got.Attempt, owner[r.ID])
		}
	}
}

// testFenceSlice: FenceSlice adds one to the attempt count of the pending
// runs due in [from, to) of one bucket (every bucket with buckets <= 1),
// and counts them; running runs and runs out of the window are left as
// they are.
func testFenceSlice(t *testing.T, s store.Store) {
	const buckets = 4
	from, to := base, base.Add(time.Minute)
	var in, out []*model.Run
	for i := range 12 {
		tm := mustTimer(t, s, "app", fmt.Sprintf("fence-%d", i))
		// One in the window (the first at from), one in the next (the
		// first at to, its end).
		runs := NewRuns(tm.ID, from.Add(time.Duration(i)*time.Second), time.Minute, 2)
		in, out = append(in, runs[0]), append(out, runs[1])
	}
	early := mustTimer(t, s, "app", "fence-early")
	out = append(out, NewRuns(early.ID, from.Add(-time.Nanosecond), time.Second, 1)...)
	mustInsert(t, s, append(slices.Clone(in), out...))
	running := in[1] // not fenced
	in = slices.Delete(slices.Clone(in), 1, 2)
	_, err := s.ClaimRuns(ctx(t), claimsFor([]*model.Run{running}, "n1", base))
	must(t, err)

	attempts := map[string]int{}
	bucketOf := func(r *model.Run) int { return int(model.TimerHash(r.TimerID) % buckets) }
	for b := range buckets {
		want := 0
		for _, r := range in {
			if bucketOf(r) == b {
				want++
				attempts[r.ID]++
			}
		}
		n, err := s.FenceSlice(ctx(t), from, to, buckets, b)
		must(t, err)
		if n != want {
			t.Errorf("FenceSlice(bucket %d of %d) = %d, want %d", b, buckets, n, want)
		}
		for _, r := range in {
			checkRun(t, s, fmt.Sprintf("after fencing bucket %d", b), r.ID, wantRun{model.RunPending, attempts[r.ID], nil})
		}
	}
	n, err := s.FenceSlice(ctx(t), from, to, 1, 0)
	must(t, err)
	if n != len(in) {
		t.Errorf("FenceSlice(every bucket) = %d, want %d", n, len(in))
	}
	for _, r := range in {
		checkRun(t, s, "after fencing every bucket", r.ID, wantRun{model.RunPending, 2, nil})
	}
	for _, r := range out {
		checkRun(t, s, "out of the window", r.ID, wantRun{model.RunPending, 0, nil})
	}
	checkRun(t, s, "running", running.ID, wantRun{model.RunRunning, 1, at(base.Add(time.Minute))})
	if n, err := s.FenceSlice(ctx(t), to.Add(time.Hour), to.Add(2*time.Hour), buckets, 0); err != nil || n != 0 {
		t.Errorf("FenceSlice(empty window) = %d, %v", n, err)
	}
}

// testFinishLazy: a lazy result applies to a run pending at the attempt
// before it, and records the node and attempt with the result; it is
// fenced off once the run is fenced, bumped, claimed by another node,
// finished, or at another attempt. The same through FinishRun and
// FinishRuns.
func testFinishLazy(t *testing.T, s store.Store) {
	recorders := []struct {
		name   string
		record func(model.Result) bool
	}{
		{"FinishRun", func(r model.Result) bool {
			err := s.FinishRun(ctx(t), r)
			if err != nil && !errors.Is(err, model.ErrNotClaimed) {
				t.Fatalf("FinishRun: %v", err)
			}
			return err == nil
		}},
		{"FinishRuns", func(r model.Result) bool {
			ok, err := s.FinishRuns(ctx(t), []model.Result{r})
			must(t, err)
			return ok[0]
		}},
	}
	for _, rec := range recorders {
		_, runs := pendingRuns(t, s, "lazy-"+rec.name, 8)
		cases := []struct {
			name    string
			run     *model.Run
			prepare func(r *model.Run)
			attempt int
			want    bool
			after   wantRun
		}{
			{"pending at attempt-1", runs[0], nil, 1, true, wantRun{model.RunSucceeded, 1, nil}},
			{"recorded already", runs[0], nil, 1, false, wantRun{model.RunSucceeded, 1, nil}},
			{"next attempt of a finished run", runs[0], nil, 2, false, wantRun{model.RunSucceeded, 1, nil}},
			{"after FenceSlice", runs[1], func(r *model.Run) { fenceRun(t, s, r) }, 1, false, wantRun{model.RunPending, 1, nil}},
			{"next attempt after FenceSlice", runs[1], nil, 2, true, wantRun{model.RunSucceeded, 2, nil}},
			{"after a bumping RescheduleRun", runs[2], func(r *model.Run) {
				must(t, s.RescheduleRun(ctx(t), r.ID, r.DueAt, 0))
			}, 1, false, wantRun{model.RunPending, 1, nil}},
			{"after another node's claim", runs[3], func(r *model.Run) {
				_, err := s.ClaimRuns(ctx(t), claimsFor([]*model.Run{r}, "n2", base))
				must(t, err)
			}, 1, false, wantRun{model.RunRunning, 1, at(base.Add(time.Minute))}},
			{"wrong attempt", runs[4], nil, 2, false, wantRun{model.RunPending, 0, nil}},
			{"attempt 0", runs[5], nil, 0, false, wantRun{model.RunPending, 0, nil}},
			{"missing", &model.Run{ID: "missing", DueAt: base}, nil, 1, false, wantRun{}},
		}
		for _, c := range cases {
			if c.prepare != nil {
				c.prepare(c.run)
			}
			if got := rec.record(lazyResult(c.run, "n1", c.attempt, model.RunSucceeded)); got != c.want {
				t.Errorf("%s, %s: applied = %v, want %v", rec.name, c.name, got, c.want)
			}
			if c.run.ID != "missing" {
				checkRun(t, s, rec.name+", "+c.name, c.run.ID, c.after)
			}
		}
		r := getRun(t, s, runs[0].ID)
		if r.Node != "n1" || r.Output != "lazy" || r.DurationMS != 250 || r.StartedAt == nil || !r.StartedAt.Equal(runs[0].DueAt) ||
			r.FinishedAt == nil || !r.FinishedAt.Equal(runs[0].DueAt.Add(250*time.Millisecond)) {
			t.Errorf("%s: lazily recorded run = %+v", rec.name, r)
		}
		if r := getRun(t, s, runs[3].ID); r.Node != "n2" || r.Output != "" {
			t.Errorf("%s: another node's claimed run written by a lazy result: %+v", rec.name, r)
		}
		// A lazy result applies to its own attempt's claim (promoted on
		// its way) but not to another node's; a lazy result not marked so
		// is fenced off.
		_, err := s.ClaimRuns(ctx(t), claimsFor(runs[6:7], "n2", base))
		must(t, err)
		if rec.record(lazyResult(runs[6], "n1", 1, model.RunSucceeded)) {
			t.Errorf("%s: a lazy result applied to another node's claimed run", rec.name)
		}
		checkRun(t, s, rec.name+", lazy result of another node's claimed run", runs[6].ID, wantRun{model.RunRunning, 1, at(base.Add(time.Minute))})
		_, err = s.ClaimRuns(ctx(t), claimsFor(runs[7:8], "n1", base))
		must(t, err)
		if !rec.record(lazyResult(runs[7], "n1", 1, model.RunSucceeded)) {
			t.Errorf("%s: a lazy result did not apply to its own attempt's claim", rec.name)
		}
		notLazy := lazyResult(runs[4], "n1", 1, model.RunSucceeded)
		notLazy.Lazy = false
		if rec.record(notLazy) {
			t.Errorf("%s: a claim's result applied to a pending run", rec.name)
		}
	}
}

// testFinishLazyMixed: one FinishRuns call of lazy results and results
// of claims, in several batches, some of each fenced off and some retried:
// each is checked against its own fence and recorded as it should be.
func testFinishLazyMixed(t *testing.T, s store.Store) {
	_, runs := pendingRuns(t, s, "mixed", 800)
	// The even runs are claimed, the odd ones started lazily.
	var claimed []*model.Run
	for i, r := range runs {
		if i%2 == 0 {
			claimed = append(claimed, r)
		}
	}
	_, err := s.ClaimRuns(ctx(t), claimsFor(claimed, "n1", base))
	must(t, err)
	// The first call's fences all hold (one statement of results that all
	// apply); the second's (two batches) some are lost.
	lost := func(i int) bool { return i >= 200 && i%5 < 2 }
	var rs []model.Result
	for i, r := range runs {
		res := lazyResult(r, "n1", 1, model.RunSucceeded)
		res.Lazy = i%2 == 1
		if lost(i) && res.Lazy {
			res.Attempt = 2 // a lazy result of the wrong attempt
		} else if lost(i) {
			res.Node = "n2" // a claim's result of another node
		}
		if i%3 == 2 {
			res.Status, res.Error, res.RetryAt = model.RunFailed, "again", base.Add(time.Hour)
		}
		rs = append(rs, res)
	}
	// In an order other than the runs'.
	slices.Reverse(rs)
	split := len(rs) - 200
	ok1, err := s.FinishRuns(ctx(t), rs[split:])
	must(t, err)
	ok2, err := s.FinishRuns(ctx(t), rs[:split])
	must(t, err)
	ok := append(ok2, ok1...)
	for j, res := range rs {
		i := len(runs) - 1 - j
		want := !lost(i)
		if ok[j] != want {
			t.Errorf("result %d (lazy %v): ok = %v, want %v", i, res.Lazy, ok[j], want)
		}
		r := getRun(t, s, runs[i].ID)
		switch {
		case !want && res.Lazy:
			if r.Status != model.RunPending || r.Attempt != 0 || r.Node != "" {
				t.Errorf("fenced-off lazy run %d = %s attempt %d node %q", i, r.Status, r.Attempt, r.Node)
			}
		case !want:
			if r.Status != model.RunRunning || r.Attempt != 1 || r.Node != "n1" {
				t.Errorf("fenced-off claimed run %d = %s attempt %d node %q", i, r.Status, r.Attempt, r.Node)
			}
		case i%3 == 2:
			if r.Status != model.RunPending || r.Attempt != 1 || r.Node != "n1" || !r.DueAt.Equal(base.Add(time.Hour)) ||
				r.Error != "again" || r.LeaseUntil != nil {
				t.Errorf("retried run %d (lazy %v) = %+v", i, res.Lazy, r)
			}
		default:
			if r.Status != model.RunSucceeded || r.Attempt != 1 || r.Node != "n1" || r.Output != "lazy" || r.LeaseUntil != nil {
				t.Errorf("recorded run %d (lazy %v) = %+v", i, res.Lazy, r)
			}
		}
	}
}

// testLazyRetry: a lazy failed result with RetryAt puts the run back to
// pending at RetryAt with the result's attempt and node; the next lazy
// attempt then applies, and the stale one is fenced off.
func testLazyRetry(t *testing.T, s store.Store) {
	_, runs := pendingRuns(t, s, "lazy-retry", 1)
	r := runs[0]
	retryAt := base.Add(10 * time.Second)
	first := lazyResult(r, "n1", 1, model.RunFailed)
	first.Error, first.RetryAt = "HTTP 500", retryAt
	must(t, s.FinishRun(ctx(t), first))
	got := getRun(t, s, r.ID)
	if got.Status != model.RunPending || got.Attempt != 1 || got.Node != "n1" || !got.DueAt.Equal(retryAt) ||
		got.Error != "HTTP 500" || got.Output != "lazy" || got.DurationMS != 250 || got.LeaseUntil != nil {
		t.Errorf("retried run = %+v", got)
	}
	// Found by the reads of due runs at its new DueAt, at its new attempt.
	peeked, err := s.PeekRuns(ctx(t), "n2", []string{r.ID}, retryAt)
	must(t, err)
	if len(peeked) != 1 || peeked[0].Run.Attempt != 1 {
		t.Errorf("PeekRuns of the retried run = %+v", peeked)
	}
	if err := s.FinishRun(ctx(t), first); !errors.Is(err, model.ErrNotClaimed) {
		t.Errorf("stale lazy result = %v, want ErrNotClaimed", err)
	}
	second := lazyResult(r, "n2", 2, model.RunSucceeded)
	ok, err := s.FinishRuns(ctx(t), []model.Result{second})
	must(t, err)
	if !ok[0] {
		t.Fatal("second lazy attempt fenced off")
	}
	checkRun(t, s, "second attempt", r.ID, wantRun{model.RunSucceeded, 2, nil})
	if got := getRun(t, s, r.ID); got.Node != "n2" || got.Error != "" {
		t.Errorf("run after its second attempt = %+v", got)
	}
}

// testLazyFollow: a lazy result that ends its run makes the runs of the
// timers after its timer, once; one fenced off makes none.
func testLazyFollow(t *testing.T, s store.Store) {
	a := mustTimer(t, s, "app", "a")
	b := depTimer(t, s, "b", model.Dependency{Timer: a.ID, On: model.OnFinish})
	runs := NewRuns(a.ID, base.Add(time.Second), time.Second, 3)
	mustInsert(t, s, runs)

	ok, err := s.FinishRuns(ctx(t), []model.Result{lazyResult(runs[0], "n1", 1, model.RunSucceeded)})
	must(t, err)
	if !ok[0] {
		t.Fatal("lazy result fenced off")
	}
	wantDependents(t, s, "after a lazy end", b, runs[0])
	// Recorded again, and fenced off by a new owner of the slice: nothing.
	fenceRun(t, s, runs[1])
	ok, err = s.FinishRuns(ctx(t), []model.Result{lazyResult(runs[0], "n1", 1, model.RunSucceeded),
		lazyResult(runs[1], "n1", 1, model.RunSucceeded)})
	must(t, err)
	if ok[0] || ok[1] {
		t.Errorf("fenced-off lazy results applied: %v", ok)
	}
	if err := s.FinishRun(ctx(t), lazyResult(runs[1], "n1", 1, model.RunFailed)); !errors.Is(err, model.ErrNotClaimed) {
		t.Errorf("FinishRun(fenced-off lazy) = %v, want ErrNotClaimed", err)
	}
	wantDependents(t, s, "after fenced-off lazy results", b, runs[0])
	// A lazy retry is no end; the next attempt's end is.
	retry := lazyResult(runs[2], "n1", 1, model.RunFailed)
	retry.RetryAt = runs[2].DueAt.Add(time.Second)
	must(t, s.FinishRun(ctx(t), retry))
	wantDependents(t, s, "after a lazy retry", b, runs[0])
	must(t, s.FinishRun(ctx(t), lazyResult(runs[1], "n1", 2, model.RunFailed)))
	wantDependents(t, s, "after the fenced run's next attempt", b, runs[0], runs[1])
}

// testRescheduleBump: RescheduleRun with a bump moves a pending run and
// adds one to its attempt count when the count is the one given (a retry
// of a bump applied already changes nothing); without, the count is kept;
// a run not pending is neither moved nor bumped.
func testRescheduleBump(t *testing.T, s store.Store) {
	_, runs := pendingRuns(t, s, "bump", 2)
	_, err := s.ClaimRuns(ctx(t), claimsFor(runs[1:], "n1", base))
	must(t, err)
	steps := []struct {
		bumpFrom int
		attempt  int
	}{{0, 1}, {1, 2}, {store.NoBump, 2}}
	for i, st := range steps {
		due := base.Add(time.Duration(i+1) * time.Minute)
		must(t, s.RescheduleRun(ctx(t), runs[0].ID, due, st.bumpFrom))
		r := getRun(t, s, runs[0].ID)
		if r.Status != model.RunPending || r.Attempt != st.attempt || !r.DueAt.Equal(due) {
			t.Errorf("step %d (bump from %d): run %s attempt %d due %v, want pending attempt %d due %v",
				i, st.bumpFrom, r.Status, r.Attempt, r.DueAt, st.attempt, due)
		}
	}
	// The bump from 1 again, as a retry whose first try was applied.
	if err := s.RescheduleRun(ctx(t), runs[0].ID, base, 1); !errors.Is(err, model.ErrNotClaimed) {
		t.Errorf("RescheduleRun(bump from 1) of a run at attempt 2 = %v, want ErrNotClaimed", err)
	}
	checkRun(t, s, "a retried bump", runs[0].ID, wantRun{model.RunPending, 2, nil})
	if err := s.RescheduleRun(ctx(t), runs[1].ID, base, 0); !errors.Is(err, model.ErrNotClaimed) {
		t.Errorf("RescheduleRun(running, bump) = %v, want ErrNotClaimed", err)
	}
	checkRun(t, s, "bump of a running run", runs[1].ID, wantRun{model.RunRunning, 1, at(base.Add(time.Minute))})
}
