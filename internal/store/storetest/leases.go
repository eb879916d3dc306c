package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// leaseTests are the tests of the leases of running runs: extension,
// expiry, requeue and the fences on each.
var leaseTests = []test{
	{"ExtendFenced", testExtendLeasesFenced},
	{"Expired", testExpiredLeases},
	{"RequeueFenced", testRequeueFenced},
	{"RunningOn", testRunningOn},
	{"ExtendWhileFinishing", testExtendWhileFinishing},
}

// testExtendWhileFinishing: lease extensions and result batches over the
// same runs, concurrently and in different orders (as a node's lease
// keeper extends the attempts whose results its recorder is writing),
// neither fail (no deadlock surfaces) nor lose a result.
func testExtendWhileFinishing(t *testing.T, s store.Store) {
	const timers, perTimer = 8, 250
	var runs []*model.Run
	for i := range timers {
		// Inserted timer by timer, so that the rows' physical order is not
		// their ids' (which lead with the instant).
		_, rs := pendingRuns(t, s, fmt.Sprintf("ewf%d", i), perTimer)
		runs = append(runs, rs...)
	}
	claimed, err := s.ClaimRuns(ctx(t), claimsFor(runs, "n1", base))
	must(t, err)
	if len(claimed) != len(runs) {
		t.Fatalf("claimed %d runs, want %d", len(claimed), len(runs))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	leases := make([]store.Lease, len(runs))
	results := make([]model.Result, len(runs))
	for i, r := range runs {
		leases[i] = store.Lease{RunID: r.ID, Attempt: 1}
		results[i] = model.Result{RunID: r.ID, Node: "n1", Attempt: 1, Status: model.RunSucceeded,
			StartedAt: base, FinishedAt: base.Add(time.Millisecond), Output: "ok"}
	}
	rng.Shuffle(len(results), func(i, j int) { results[i], results[j] = results[j], results[i] })
	orders := make([][]store.Lease, 4)
	for i := range orders {
		orders[i] = slices.Clone(leases)
		rng.Shuffle(len(leases), func(a, b int) { orders[i][a], orders[i][b] = orders[i][b], orders[i][a] })
	}

	var finished atomic.Bool
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			for i := 0; !finished.Load(); i++ {
				// Every lease each time, from a different order: those
				// finished meanwhile come back lost, which is no error.
				if _, err := s.ExtendLeases(ctx(t), "n1", orders[(2*i+w)%len(orders)], base.Add(time.Hour)); err != nil {
					t.Errorf("ExtendLeases beside FinishRuns: %v", err)
					return
				}
			}
		})
	}
	var fwg sync.WaitGroup
	const finishers, batch = 4, 200
	for w := range finishers {
		fwg.Go(func() {
			for lo := w * batch; lo < len(results); lo += finishers * batch {
				rs := results[lo:min(lo+batch, len(results))]
				ok, _, err := s.FinishRuns(ctx(t), rs)
				if err != nil {
					t.Errorf("FinishRuns beside ExtendLeases: %v", err)
					return
				}
				for i, o := range ok {
					if !o {
						t.Errorf("result of %s lost its fence", rs[i].RunID)
					}
				}
			}
		})
	}
	fwg.Wait()
	finished.Store(true)
	wg.Wait()
	for i := range timers {
		id := runs[i*perTimer].TimerID
		n, err := s.CountRuns(ctx(t), id, model.RunSucceeded)
		must(t, err)
		if n != perTimer {
			t.Errorf("timer %s: %d runs succeeded, want %d", id, n, perTimer)
		}
	}
}

// testExtendLeasesFenced: an extension applies to the attempt it names and
// to nothing else, and reports every lease it did not extend.
func testExtendLeasesFenced(t *testing.T, s store.Store) {
	_, runs := pendingRuns(t, s, "elf", 5)
	_, err := s.ClaimRuns(ctx(t), claimsFor(runs, "n1", base))
	must(t, err)
	first := base.Add(time.Minute) // every attempt 1's lease

	// Run 0: its lease expired, the sweeper requeued it and the same node
	// claimed it again: attempt 2 with a lease of its own.
	now := base.Add(2 * time.Minute)
	must(t, s.Requeue(ctx(t), getRun(t, s, runs[0].ID), now, now))
	got, err := s.ClaimRuns(ctx(t), claimsFor(runs[:1], "n1", now))
	must(t, err)
	if len(got) != 1 || got[0].Run.Attempt != 2 {
		t.Fatalf("second claim of run 0 = %+v, want attempt 2", got)
	}
	second := now.Add(time.Minute)
	// Run 1: finished. Run 4: requeued, pending.
	must(t, Finish(ctx(t), s, model.Result{RunID: runs[1].ID, Node: "n1", Attempt: 1, Status: model.RunSucceeded,
		StartedAt: base, FinishedAt: base}))
	r4 := getRun(t, s, runs[4].ID)
	r4.LeaseUntil = nil
	must(t, s.Requeue(ctx(t), r4, now, now))

	r := func(i, attempt int) store.Lease { return store.Lease{RunID: runs[i].ID, Attempt: attempt} }
	steps := []struct {
		name   string
		node   string
		leases []store.Lease
		until  time.Time
		lost   []store.Lease
		after  map[int]wantRun
	}{
		{
			name: "earlier attempt of a run claimed again by the same node", node: "n1",
			leases: []store.Lease{r(0, 1)}, until: base.Add(time.Hour),
			lost:  []store.Lease{r(0, 1)},
			after: map[int]wantRun{0: {model.RunRunning, 2, at(second)}},
		},
		{
			name: "later attempt held by another node's name", node: "n2",
			leases: []store.Lease{r(0, 2), r(2, 1)}, until: base.Add(time.Hour),
			lost:  []store.Lease{r(0, 2), r(2, 1)},
			after: map[int]wantRun{0: {model.RunRunning, 2, at(second)}, 2: {model.RunRunning, 1, at(first)}},
		},
		{
			name: "finished, pending and missing runs", node: "n1",
			leases: []store.Lease{r(1, 1), r(4, 1), {RunID: "missing", Attempt: 1}}, until: base.Add(time.Hour),
			lost: []store.Lease{r(1, 1), r(4, 1), {RunID: "missing", Attempt: 1}},
			after: map[int]wantRun{
				1: {model.RunSucceeded, 1, nil},
				4: {model.RunPending, 1, nil},
			},
		},
		{
			name: "attempt from the future", node: "n1",
			leases: []store.Lease{r(2, 2)}, until: base.Add(time.Hour),
			lost:  []store.Lease{r(2, 2)},
			after: map[int]wantRun{2: {model.RunRunning, 1, at(first)}},
		},
		{
			// Both attempts of run 0 in one call: only the one held moves.
			// Runs 2 and 3 have expired leases that nobody requeued: they
			// are extended.
			name: "mixed batch", node: "n1",
			leases: []store.Lease{r(0, 1), r(0, 2), r(1, 1), r(2, 1), r(3, 2), r(3, 1), {RunID: "missing", Attempt: 3}},
			until:  base.Add(2 * time.Hour),
			lost:   []store.Lease{r(0, 1), r(1, 1), r(3, 2), {RunID: "missing", Attempt: 3}},
			after: map[int]wantRun{
				0: {model.RunRunning, 2, at(base.Add(2 * time.Hour))},
				1: {model.RunSucceeded, 1, nil},
				2: {model.RunRunning, 1, at(base.Add(2 * time.Hour))},
				3: {model.RunRunning, 1, at(base.Add(2 * time.Hour))},
			},
		},
		{
			name: "nothing to extend", node: "n1",
		},
	}
	for _, st := range steps {
		lost, err := s.ExtendLeases(ctx(t), st.node, st.leases, st.until)
		if err != nil {
			t.Errorf("%s: ExtendLeases: %v", st.name, err)
			continue
		}
		if !slices.Equal(sortLeases(lost), sortLeases(st.lost)) {
			t.Errorf("%s: lost = %v, want %v", st.name, lost, st.lost)
		}
		for i, w := range st.after {
			checkRun(t, s, st.name, runs[i].ID, w)
		}
	}
}

// testExpiredLeases: only the holder extends a lease, a finished run's
// lease is reported lost, leases expire at their end, and Requeue of an
// expired run applies once, for its holder and attempt, and fences off the
// old holder's late result.
func testExpiredLeases(t *testing.T, s store.Store) {
	_, runs := pendingRuns(t, s, "rr", 3)
	_, err := s.ClaimRuns(ctx(t), claimsFor(runs, "n1", base))
	must(t, err)
	must(t, Finish(ctx(t), s, model.Result{RunID: runs[0].ID, Node: "n1", Attempt: 1, Status: model.RunSucceeded,
		StartedAt: base, FinishedAt: base}))

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
	if exp, err := s.ExpiredLeases(ctx(t), time.Time{}, base.Add(time.Hour), 10); err != nil || len(exp) != 0 {
		t.Errorf("ExpiredLeases after ExtendLeases = %v, %v; want none", ids(exp), err)
	}
	_, err = s.ExtendLeases(ctx(t), "n1", leasesOf(runs[1:], 1), base.Add(time.Minute))
	must(t, err)

	// Leases: runs 1 and 2 expire at base+1m.
	exp, err := s.ExpiredLeases(ctx(t), time.Time{}, base.Add(time.Minute), 10)
	must(t, err)
	if len(exp) != 0 {
		t.Errorf("%d leases expired before their end", len(exp))
	}
	exp, err = s.ExpiredLeases(ctx(t), time.Time{}, base.Add(2*time.Minute), 10)
	must(t, err)
	if !slices.Equal(ids(exp), ids(runs[1:])) {
		t.Fatalf("ExpiredLeases = %v, want %v", ids(exp), ids(runs[1:]))
	}
	// since bounds the lease ends from below, inclusive.
	for _, tc := range []struct {
		since time.Time
		want  int
	}{{base.Add(time.Minute), 2}, {base.Add(time.Minute + time.Nanosecond), 0}} {
		got, err := s.ExpiredLeases(ctx(t), tc.since, base.Add(2*time.Minute), 10)
		must(t, err)
		if len(got) != tc.want {
			t.Errorf("ExpiredLeases(since %v) = %v, want %d", tc.since.Sub(base), ids(got), tc.want)
		}
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
	r, err := s.GetRun(ctx(t), exp[0].ID)
	must(t, err)
	if r.Status != model.RunPending || !r.DueAt.Equal(due) || r.LeaseUntil != nil || r.Attempt != 1 {
		t.Errorf("requeued run = %+v", r)
	}
	// The old holder's late finish is fenced off.
	if err := Finish(ctx(t), s, model.Result{RunID: exp[0].ID, Node: "n1", Attempt: 1, Status: model.RunSucceeded}); !errors.Is(err, model.ErrNotClaimed) {
		t.Errorf("finish after requeue = %v, want ErrNotClaimed", err)
	}
}

// testRequeueFenced: Requeue applies only on the condition it was decided
// on.
func testRequeueFenced(t *testing.T, s store.Store) {
	_, runs := pendingRuns(t, s, "rqf", 8)
	_, err := s.ClaimRuns(ctx(t), claimsFor(runs, "n1", base))
	must(t, err)
	lease := base.Add(time.Minute) // every claim's lease
	due := base.Add(5 * time.Minute)
	tests := []struct {
		name string
		// prep runs before the requeue (the holder acts in the meantime).
		prep func(t *testing.T, id string)
		// caller turns the run as read back into what the caller passes.
		caller func(r *model.Run)
		now    time.Time
		ok     bool
		after  wantRun
	}{
		{
			name: "lease expired and unchanged", now: lease.Add(time.Second), ok: true,
			after: wantRun{model.RunPending, 1, nil},
		},
		{
			name: "holder extended the lease after the sweeper read it",
			prep: func(t *testing.T, id string) {
				lost, err := s.ExtendLeases(ctx(t), "n1", []store.Lease{{RunID: id, Attempt: 1}}, base.Add(time.Hour))
				must(t, err)
				if len(lost) != 0 {
					t.Fatalf("ExtendLeases lost %v", lost)
				}
			},
			now:   lease.Add(time.Second),
			after: wantRun{model.RunRunning, 1, at(base.Add(time.Hour))},
		},
		{
			name:   "lease seen earlier than it is",
			caller: func(r *model.Run) { r.LeaseUntil = at(lease.Add(-time.Second)) },
			now:    lease.Add(time.Second),
			after:  wantRun{model.RunRunning, 1, at(lease)},
		},
		{
			name: "lease not ended yet", now: lease.Add(-time.Second),
			after: wantRun{model.RunRunning, 1, at(lease)},
		},
		{
			name: "lease ends exactly now", now: lease,
			after: wantRun{model.RunRunning, 1, at(lease)},
		},
		{
			name:   "no lease condition: node and attempt only",
			caller: func(r *model.Run) { r.LeaseUntil = nil },
			now:    base, ok: true,
			after: wantRun{model.RunPending, 1, nil},
		},
		{
			name:   "no lease condition, other node",
			caller: func(r *model.Run) { r.LeaseUntil, r.Node = nil, "n2" },
			now:    base,
			after:  wantRun{model.RunRunning, 1, at(lease)},
		},
		{
			name:   "no lease condition, other attempt",
			caller: func(r *model.Run) { r.LeaseUntil, r.Attempt = nil, 2 },
			now:    base,
			after:  wantRun{model.RunRunning, 1, at(lease)},
		},
	}
	if len(tests) > len(runs) {
		t.Fatalf("%d cases for %d runs", len(tests), len(runs))
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id := runs[i].ID
			r := getRun(t, s, id) // what a sweeper reads
			if tc.prep != nil {
				tc.prep(t, id)
			}
			if tc.caller != nil {
				tc.caller(r)
			}
			err := s.Requeue(ctx(t), r, due, tc.now)
			switch {
			case tc.ok && err != nil:
				t.Errorf("Requeue = %v, want nil", err)
			case !tc.ok && !errors.Is(err, model.ErrNotClaimed):
				t.Errorf("Requeue = %v, want ErrNotClaimed", err)
			}
			checkRun(t, s, tc.name, id, tc.after)
			if tc.ok {
				if got := getRun(t, s, id); !got.DueAt.Equal(due) {
					t.Errorf("requeued run due %v, want %v", got.DueAt, due)
				}
			}
		})
	}
}

// testRunningOn: exactly the runs the node holds, oldest claim first.
func testRunningOn(t *testing.T, s store.Store) {
	_, runs := pendingRuns(t, s, "ron", 7)
	claim := func(i int, node string, now time.Time) {
		t.Helper()
		got, err := s.ClaimRuns(ctx(t), claimsFor(runs[i:i+1], node, now))
		must(t, err)
		if len(got) != 1 {
			t.Fatalf("claim of run %d: %d claimed", i, len(got))
		}
	}
	claim(2, "n1", base)
	claim(0, "n1", base.Add(time.Second))
	claim(1, "n1", base.Add(2*time.Second))
	claim(3, "n2", base)
	claim(4, "n1", base) // then finished
	must(t, Finish(ctx(t), s, model.Result{RunID: runs[4].ID, Node: "n1", Attempt: 1, Status: model.RunFailed,
		StartedAt: base, FinishedAt: base}))
	claim(5, "n1", base) // then requeued
	r5 := getRun(t, s, runs[5].ID)
	r5.LeaseUntil = nil
	must(t, s.Requeue(ctx(t), r5, base, base))
	// Run 6 stays pending. The oldest claim's lease moves past the others:
	// the order is the claims', not the leases'.
	_, err := s.ExtendLeases(ctx(t), "n1", []store.Lease{{RunID: runs[2].ID, Attempt: 1}}, base.Add(time.Hour))
	must(t, err)

	tests := []struct {
		node  string
		limit int
		want  []string
	}{
		{"n1", 0, []string{runs[2].ID, runs[0].ID, runs[1].ID}},
		{"n1", 2, []string{runs[2].ID, runs[0].ID}},
		{"n2", 10, []string{runs[3].ID}},
		{"n3", 0, nil},
	}
	for _, tc := range tests {
		got, err := s.RunningOn(ctx(t), tc.node, tc.limit)
		if err != nil {
			t.Errorf("RunningOn(%s, %d): %v", tc.node, tc.limit, err)
			continue
		}
		var gotIDs []string
		for _, r := range got {
			gotIDs = append(gotIDs, r.ID)
			if r.Status != model.RunRunning || r.Node != tc.node || r.Attempt != 1 || r.LeaseUntil == nil {
				t.Errorf("RunningOn(%s): run %+v", tc.node, r)
			}
		}
		if !slices.Equal(gotIDs, tc.want) {
			t.Errorf("RunningOn(%s, %d) = %v, want %v", tc.node, tc.limit, gotIDs, tc.want)
		}
	}
}
