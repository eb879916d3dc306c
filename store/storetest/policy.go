package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/store"
)

func testPolicyRoundTrip(t *testing.T, s store.Store) {
	tm := NewTimer("app", "policy")
	tm.Policy = model.Policy{CatchupWindow: time.Hour, Misfire: model.MisfireLatest, Overlap: model.OverlapBufferOne,
		StartAt: base, EndAt: base.Add(24 * time.Hour), MaxFires: 7}
	must(t, s.CreateTimer(ctx(t), tm))
	got, err := s.GetTimer(ctx(t), tm.ID)
	must(t, err)
	if !got.Policy.StartAt.Equal(tm.Policy.StartAt) || !got.Policy.EndAt.Equal(tm.Policy.EndAt) {
		t.Errorf("policy bounds = %v..%v, want %v..%v", got.Policy.StartAt, got.Policy.EndAt, tm.Policy.StartAt, tm.Policy.EndAt)
	}
	got.Policy.StartAt, got.Policy.EndAt = tm.Policy.StartAt, tm.Policy.EndAt
	if got.Policy != tm.Policy {
		t.Errorf("policy = %+v, want %+v", got.Policy, tm.Policy)
	}
	got.Policy = model.Policy{}
	must(t, s.UpdateTimer(ctx(t), got))
	again, err := s.GetTimer(ctx(t), tm.ID)
	must(t, err)
	if again.Policy != (model.Policy{}) {
		t.Errorf("policy after reset = %+v", again.Policy)
	}
}

func testReleaseAndCount(t *testing.T, s store.Store) {
	tm := mustTimer(t, s, "app", "release")
	runs := NewRuns(tm.ID, base, time.Second, 3)
	mustInsert(t, s, runs)
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
	n, err := s.CountRuns(ctx(t), tm.ID)
	must(t, err)
	if n != 3 {
		t.Errorf("CountRuns() = %d, want 3", n)
	}
	must(t, s.SetRunStatus(ctx(t), runs[2].ID, model.RunPending, model.RunSkipped, "test"))
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

// testClaimSeesUpdatedTimer checks that a claim returns the timer as it is
// now, not as an earlier claim saw it (stores may cache timers).
func testClaimSeesUpdatedTimer(t *testing.T, s store.Store) {
	tm := mustTimer(t, s, "app", "claim-fresh")
	runs := NewRuns(tm.ID, base, time.Second, 2)
	mustInsert(t, s, runs)
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
}
