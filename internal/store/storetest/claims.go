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

// claimTests are the tests of claims: pending to running for one node,
// under contention, with the timer as it is now, and released back.
var claimTests = []test{
	{"Claim", testClaimRuns},
	{"Concurrent", testClaimConcurrent},
	{"ConcurrentWithResults", testClaimFinishConcurrent},
	{"SeesUpdatedTimer", testClaimSeesUpdatedTimer},
	{"Release", testRelease},
	{"AheadKeepsInstant", testClaimAheadKeepsInstant},
}

// testClaimRuns: a claim moves a pending run to running on one node, at
// attempt 1 with its lease, and returns it with its timer; a running run, a
// missing one and one due after the claim's DueBy are not claimed.
func testClaimRuns(t *testing.T, s store.Store) {
	tm, runs := pendingRuns(t, s, "cf", 5)
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
	// Nor by the same node at the same instant (a store must not take the
	// rows its earlier claim left for this claim's).
	again, err = s.ClaimRuns(ctx(t), claimsFor(runs[:4], "n1", now))
	must(t, err)
	if len(again) != 1 || again[0].Run.ID != runs[3].ID {
		t.Errorf("claim by the same node at the same instant = %d runs, want only the pending one", len(again))
	}
	if len(again) > 0 {
		if _, _, err := s.FinishRuns(ctx(t), []model.Result{{RunID: runs[3].ID, Node: "n1", Attempt: 1, Status: model.RunSucceeded,
			StartedAt: now, FinishedAt: now}}); err != nil {
			t.Fatal(err)
		}
	}
	runs = append(runs[:3], runs[4:]...) // runs[3] is done
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
}

// testClaimConcurrent: 8 nodes claiming the same runs in batches, in
// opposite orders, claim each run once, and the store records the winner.
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

// testClaimFinishConcurrent: 8 nodes claiming the same runs in batches and
// recording the result of each run they won, all at once (a store may
// combine such calls in one transaction): each run is claimed once, every
// result's fence holds, every run ends succeeded.
func testClaimFinishConcurrent(t *testing.T, s store.Store) {
	tm := mustTimer(t, s, "app", "ccf")
	runs := NewRuns(tm.ID, base, time.Second, 300)
	mustInsert(t, s, runs)
	const workers = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	owner := map[string]string{}
	for w := range workers {
		wg.Go(func() {
			node := fmt.Sprintf("node%d", w)
			in := slices.Clone(runs)
			if w%2 == 1 {
				slices.Reverse(in)
			}
			for len(in) > 0 {
				n := min(30, len(in))
				got, err := s.ClaimRuns(ctx(t), claimsFor(in[:n], node, base))
				in = in[n:]
				if err != nil {
					t.Error(err)
					return
				}
				rs := make([]model.Result, len(got))
				mu.Lock()
				for i, c := range got {
					if prev, dup := owner[c.Run.ID]; dup {
						t.Errorf("run %s claimed by %s and %s", c.Run.ID, prev, node)
					}
					owner[c.Run.ID] = node
					rs[i] = model.Result{RunID: c.Run.ID, Node: node, Attempt: c.Run.Attempt, Status: model.RunSucceeded,
						StartedAt: base, FinishedAt: base.Add(time.Millisecond)}
				}
				mu.Unlock()
				ok, _, err := s.FinishRuns(ctx(t), rs)
				if err != nil {
					t.Error(err)
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
	wg.Wait()
	if len(owner) != len(runs) {
		t.Errorf("%d runs claimed, want %d", len(owner), len(runs))
	}
	n, err := s.CountRuns(ctx(t), tm.ID, model.RunSucceeded)
	must(t, err)
	if n != len(runs) {
		t.Errorf("%d runs succeeded, want %d", n, len(runs))
	}
}

// testClaimSeesUpdatedTimer checks that a claim returns the timer as it is
// now, not as an earlier claim saw it (stores may cache timers).
func testClaimSeesUpdatedTimer(t *testing.T, s store.Store) {
	tm, runs := pendingRuns(t, s, "claim-fresh", 2)
	got, err := s.ClaimRuns(ctx(t), claimsFor(runs[:1], "n1", base))
	must(t, err)
	if len(got) != 1 || got[0].Timer.Description != tm.Description {
		t.Fatalf("first claim = %+v", got)
	}
	cur, err := s.GetTimer(ctx(t), tm.ID)
	must(t, err)
	cur.Description = "changed" // UpdatedAt left as it was
	must(t, s.UpdateTimer(ctx(t), cur))
	got, err = s.ClaimRuns(ctx(t), claimsFor(runs[1:], "n1", base))
	must(t, err)
	if len(got) != 1 || got[0].Timer.Description != "changed" {
		t.Errorf("claim after an update returned the timer %+v, want the changed one", got[0].Timer)
	}
}

// testRelease: the holder gives a claimed run back, pending at a new DueAt
// and at attempt 0 again; another node cannot.
func testRelease(t *testing.T, s store.Store) {
	_, runs := pendingRuns(t, s, "release", 3)
	got, err := s.ClaimRuns(ctx(t), claimsFor(runs[:1], "n1", base))
	must(t, err)
	if len(got) != 1 {
		t.Fatalf("claimed %d runs", len(got))
	}
	claimed := got[0].Run
	wrong := *claimed
	wrong.Node = "n2"
	if err := s.Release(ctx(t), &wrong, base); !errors.Is(err, model.ErrNotClaimed) {
		t.Errorf("Release(wrong node) = %v, want ErrNotClaimed", err)
	}
	due := base.Add(5 * time.Second)
	must(t, s.Release(ctx(t), claimed, due))
	r, err := s.GetRun(ctx(t), claimed.ID)
	must(t, err)
	if r.Status != model.RunPending || r.Attempt != 0 || !r.DueAt.Equal(due) || r.StartedAt != nil {
		t.Errorf("released run = %+v", r)
	}
}

// testClaimAheadKeepsInstant: a replan that moves a fire's due time (a
// jitter change) leaves a run claimed ahead of its instant as it is, one
// row under its old due time, which no claim takes a second time; given
// back, it is due at its old instant still, and claimed once.
func testClaimAheadKeepsInstant(t *testing.T, s store.Store) {
	tm, runs := pendingRuns(t, s, "ahead", 1)
	r := runs[0]
	if _, err := s.ClaimRuns(ctx(t), claimsFor(runs, "n1", base.Add(-time.Second))); err != nil {
		t.Fatal(err)
	}
	moved := *r
	moved.DueAt = r.ScheduledAt.Add(90 * time.Second) // another minute
	cur, err := s.GetTimer(ctx(t), tm.ID)
	must(t, err)
	cur.Policy.Jitter = 2 * time.Minute
	if _, err := s.SaveTimer(ctx(t), store.TimerWrite{Timer: cur, ReplaceFrom: base.Add(-time.Hour), Runs: []*model.Run{&moved}}); err != nil {
		t.Fatal(err)
	}
	got := getRun(t, s, r.ID)
	if got.Status != model.RunRunning || !got.DueAt.Equal(r.DueAt) || got.Attempt != 1 {
		t.Fatalf("claimed run after the replan = %s due %s attempt %d; want running, due %s, attempt 1", got.Status, got.DueAt, got.Attempt, r.DueAt)
	}
	if n, err := s.CountRuns(ctx(t), tm.ID); err != nil || n != 1 {
		t.Fatalf("runs of the timer = %d, %v; want 1", n, err)
	}
	for _, at := range []time.Time{r.DueAt, moved.DueAt} {
		if won, err := s.ClaimRuns(ctx(t), claimsFor(runs, "n2", at)); err != nil || len(won) != 0 {
			t.Errorf("second claim at %s = %d runs, %v; want none", at, len(won), err)
		}
	}
	must(t, s.Release(ctx(t), got, got.DueAt))
	if back := getRun(t, s, r.ID); back.Status != model.RunPending || !back.DueAt.Equal(r.DueAt) {
		t.Errorf("given back = %s due %s, want pending due %s", back.Status, back.DueAt, r.DueAt)
	}
	won, err := s.ClaimRuns(ctx(t), claimsFor(runs, "n2", moved.DueAt))
	must(t, err)
	if len(won) != 1 || won[0].Run.Attempt != 1 || !won[0].Run.DueAt.Equal(r.DueAt) {
		t.Errorf("claim after the give-back = %+v, want attempt 1 due at the old instant", won)
	}
}
