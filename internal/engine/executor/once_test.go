package executor

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/coord/index"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// failRunner fails every action at once.
type failRunner struct{}

func (failRunner) Run(context.Context, *model.Run, *model.Timer) ([]byte, error) {
	return nil, errors.New("boom")
}

// TestRetriesCountFailuresNotRecoveries: with max_attempts 2, an attempt
// lost with its node (the sweeper recovers it) is no failure: the next
// attempt's failure is the run's first, and it is retried; the retry's
// failure is the second and ends the run.
func TestRetriesCountFailuresNotRecoveries(t *testing.T) {
	env := newLeaseEnv(t, func(c *Config) { c.Runners["fail"] = failRunner{} })
	ctx := context.Background()
	env.timer.Action.Type = "fail"
	env.timer.Retry = model.RetryPolicy{MaxAttempts: 2, Backoff: time.Second}
	if err := env.db.UpdateTimer(ctx, env.timer); err != nil {
		t.Fatal(err)
	}
	at := env.clock.Now()
	cr := env.claim(at)
	// Attempt 1's node dies: the sweeper requeues the run past its lease.
	env.exec.keep.forget(leaseOf(cr.Run))
	env.clock.Advance(testLease + time.Second)
	now := env.clock.Now()
	if err := env.store.Requeue(ctx, env.stored(cr.Run.ID), now, now); err != nil {
		t.Fatal(err)
	}
	attempt := func(n int) {
		t.Helper()
		cr := env.claimAgain(cr.Run.ID)
		if cr.Run.Attempt != n {
			t.Fatalf("claimed attempt %d, want %d", cr.Run.Attempt, n)
		}
		env.exec.execute(cr)
		waitFor(t, "the result to be recorded", func() bool {
			r := env.stored(cr.Run.ID)
			return r.Status != model.RunRunning
		})
	}
	attempt(2)
	r := env.stored(cr.Run.ID)
	if r.Status != model.RunPending || r.Failures != 1 {
		t.Fatalf("after attempt 2 (the first failure): %s with %d failures, want pending (a retry) with 1", r.Status, r.Failures)
	}
	env.clock.Set(r.DueAt)
	attempt(3)
	if r := env.stored(cr.Run.ID); r.Status != model.RunFailed || r.Failures != 2 {
		t.Fatalf("after attempt 3 (the second failure): %s with %d failures, want failed with 2", r.Status, r.Failures)
	}
}

// claimAgain claims the pending run id for the executor, at its due time.
func (env *leaseEnv) claimAgain(id string) store.ClaimedRun {
	env.t.Helper()
	r := env.stored(id)
	won, err := env.exec.Claim(context.Background(), []index.Entry{{RunID: r.ID, TimerID: r.TimerID, DueAt: r.DueAt}})
	if err != nil || len(won) != 1 {
		env.t.Fatalf("claim again = %v, %v", won, err)
	}
	return won[0]
}
