package sweeper

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/coord/index/memindex"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/internal/store/sqlstore"
	"github.com/chimehq/chime/model"
)

// setup returns a sweeper on a fresh store holding one run claimed by node
// n1 with a lease ending at the clock's start.
func setup(t *testing.T) (*Sweeper, store.Store, *clock.Fake, *model.Run) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlstore.Open(ctx, "sqlite::memory:", sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := clock.NewFake(time.Now().Truncate(time.Millisecond))
	tm := &model.Timer{ID: "t1", App: "a", Name: "n", Schedule: "@every 1h", Timezone: "UTC", Enabled: true,
		Action: model.Action{Type: "http", HTTP: &model.HTTPAction{Method: "GET", URL: "http://x"}},
		Retry:  model.RetryPolicy{MaxAttempts: 1}, CreatedAt: clk.Now(), UpdatedAt: clk.Now()}
	if _, err := st.SaveTimer(ctx, store.TimerWrite{Timer: tm, Create: true}); err != nil {
		t.Fatal(err)
	}
	at := clk.Now().Add(-time.Second)
	run := &model.Run{ID: model.RunID(tm.ID, at), TimerID: tm.ID, ScheduledAt: at, DueAt: at}
	if _, err := st.InsertRuns(ctx, []*model.Run{run}); err != nil {
		t.Fatal(err)
	}
	won, err := st.ClaimRuns(ctx, []store.Claim{{RunID: run.ID, Node: "n1", LeaseUntil: clk.Now(), Now: at}})
	if err != nil || len(won) != 1 {
		t.Fatalf("claim = %v, %v", won, err)
	}
	sw := New(Config{Store: st, Index: memindex.New(1), Clock: clk, Local: clk,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return sw, st, clk, won[0].Run
}

func status(t *testing.T, st store.Store, id string) model.RunStatus {
	t.Helper()
	r, err := st.GetRun(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r.Status
}

// sweepStep advances the clock by advance, runs a lease pass and wants
// the run in status want.
type sweepStep struct {
	advance time.Duration
	want    model.RunStatus
}

// sweepSteps runs steps against sw, reading run id's status from st.
func sweepSteps(t *testing.T, sw *Sweeper, st store.Store, clk *clock.Fake, id string, steps []sweepStep) {
	t.Helper()
	for i, s := range steps {
		clk.Advance(s.advance)
		if _, err := sw.SweepLeases(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := status(t, st, id); got != s.want {
			t.Fatalf("step %d: status %s, want %s", i, got, s.want)
		}
	}
}

// A lease is taken only after two sightings of it expired, MinGap apart.
func TestSweepLeasesTwoSightings(t *testing.T) {
	sw, st, clk, run := setup(t)
	steps := []sweepStep{
		{time.Millisecond, model.RunRunning},       // first sighting
		{200 * time.Millisecond, model.RunRunning}, // too soon after it
		{200 * time.Millisecond, model.RunRunning}, // still too soon (400ms)
		{200 * time.Millisecond, model.RunPending}, // 600ms: taken
		{time.Second, model.RunPending},            // and only once
	}
	sweepSteps(t, sw, st, clk, run.ID, steps)
}

// A holder that extends its lease between the two sightings keeps it: the
// store came back from a stall and the holder was alive.
func TestSweepLeasesHolderExtends(t *testing.T) {
	sw, st, clk, run := setup(t)
	ctx := context.Background()
	clk.Advance(time.Millisecond)
	if _, err := sw.SweepLeases(ctx); err != nil {
		t.Fatal(err)
	}
	// The holder extends, but the new lease is already over again by the
	// next pass (a second stall): a new sighting starts.
	if _, err := st.ExtendLeases(ctx, "n1", []store.Lease{{RunID: run.ID, Attempt: 1}}, clk.Now().Add(100*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	clk.Advance(600 * time.Millisecond)
	if _, err := sw.SweepLeases(ctx); err != nil {
		t.Fatal(err)
	}
	if got := status(t, st, run.ID); got != model.RunRunning {
		t.Fatalf("status after the holder extended = %s, want running", got)
	}
	clk.Advance(600 * time.Millisecond)
	if _, err := sw.SweepLeases(ctx); err != nil {
		t.Fatal(err)
	}
	if got := status(t, st, run.ID); got != model.RunPending {
		t.Fatalf("status after two sightings of the new lease = %s, want pending", got)
	}
}

// awayStore's ExpiredLeases fails, or takes slow of the clock, when set.
type awayStore struct {
	Store
	clk  *clock.Fake
	fail bool
	slow time.Duration
}

func (s *awayStore) ExpiredLeases(ctx context.Context, since, now time.Time, limit int) ([]*model.Run, error) {
	if s.fail {
		return nil, errors.New("store away")
	}
	s.clk.Advance(s.slow)
	return s.Store.ExpiredLeases(ctx, since, now, limit)
}

// After a pass that found the store away (its read failed, or answered
// slowly), no lease is recovered for ResumeGrace: holders write the
// results of attempts that completed while it was away.
func TestSweepLeasesResumeGrace(t *testing.T) {
	for _, away := range []string{"failed", "slow"} {
		t.Run(away, func(t *testing.T) {
			sw, st, clk, run := setup(t)
			ctx := context.Background()
			as := &awayStore{Store: st, clk: clk}
			sw.cfg.Store = as
			clk.Advance(time.Millisecond)
			if away == "failed" {
				as.fail = true
				if _, err := sw.SweepLeases(ctx); err == nil {
					t.Fatal("SweepLeases with the store away: no error")
				}
				as.fail = false
			} else {
				as.slow = time.Second
				if _, err := sw.SweepLeases(ctx); err != nil {
					t.Fatal(err)
				}
				as.slow = 0
			}
			steps := []sweepStep{
				{time.Millisecond, model.RunRunning},       // a sighting
				{600 * time.Millisecond, model.RunRunning}, // MinGap after it, within the grace
				{ResumeGrace, model.RunPending},            // after the grace
			}
			sweepSteps(t, sw, st, clk, run.ID, steps)
		})
	}
}

// Recover gives back at once what a node's previous process held.
func TestRecoverNode(t *testing.T) {
	sw, st, clk, run := setup(t)
	ctx := context.Background()
	if n, err := sw.Recover(ctx, "n2"); err != nil || n != 0 {
		t.Fatalf("Recover(other node) = %d, %v; want 0", n, err)
	}
	clk.Advance(-time.Hour) // the lease has not even ended
	if n, err := sw.Recover(ctx, "n1"); err != nil || n != 1 {
		t.Fatalf("Recover(n1) = %d, %v; want 1", n, err)
	}
	r, err := st.GetRun(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != model.RunPending || r.Attempt != 1 {
		t.Errorf("recovered run = %s attempt %d, want pending attempt 1", r.Status, r.Attempt)
	}
}

// A run that lost its lease on its last allowed attempt ends failed, with
// the reason, instead of running again.
func TestSweepLeasesLastAttemptFails(t *testing.T) {
	sw, st, clk, run := setup(t)
	ctx := context.Background()
	for run.Attempt < 1+LeaseRecoveries {
		held := *run
		held.LeaseUntil = nil
		if err := st.Requeue(ctx, &held, run.DueAt, clk.Now()); err != nil {
			t.Fatal(err)
		}
		won, err := st.ClaimRuns(ctx, []store.Claim{{RunID: run.ID, Node: "n1", LeaseUntil: clk.Now(), Now: clk.Now()}})
		if err != nil || len(won) != 1 {
			t.Fatalf("claim = %v, %v", won, err)
		}
		run = won[0].Run
	}
	for range 3 {
		clk.Advance(300 * time.Millisecond)
		if _, err := sw.SweepLeases(ctx); err != nil {
			t.Fatal(err)
		}
	}
	r, err := st.GetRun(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != model.RunFailed || r.Attempt != 1+LeaseRecoveries || r.Error == "" {
		t.Errorf("run = %s attempt %d error %q; want failed at attempt %d with a reason", r.Status, r.Attempt, r.Error, 1+LeaseRecoveries)
	}
}

// sinceStore records the lower bound of each ExpiredLeases call.
type sinceStore struct {
	Store
	since []time.Time
}

func (s *sinceStore) ExpiredLeases(ctx context.Context, since, now time.Time, limit int) ([]*model.Run, error) {
	s.since = append(s.since, since)
	return s.Store.ExpiredLeases(ctx, since, now, limit)
}

// A lease pass reads from FloorMargin before the previous pass, unless a
// lease it saw and did not recover ended earlier; every FullEvery, from
// the start.
func TestSweepLeasesFloor(t *testing.T) {
	sw, st, clk, run := setup(t)
	ss := &sinceStore{Store: st}
	sw.cfg.Store = ss
	ctx := context.Background()
	pass := func() time.Time {
		t.Helper()
		now := clk.Now()
		if _, err := sw.SweepLeases(ctx); err != nil {
			t.Fatal(err)
		}
		return now
	}
	clk.Advance(10 * time.Minute) // the lease ended 10 minutes ago
	pass()                        // first sighting, first pass: a full one
	clk.Advance(time.Second)
	second := pass() // reads from the lease it saw, not from a minute ago
	if got := status(t, st, run.ID); got != model.RunPending {
		t.Fatalf("status %s after the second sighting, want pending", got)
	}
	clk.Advance(time.Second)
	pass() // nothing left: the next reads from a minute before this one
	clk.Advance(time.Second)
	third := clk.Now().Add(-time.Second)
	pass()
	clk.Advance(FullEvery)
	pass()
	want := []time.Time{{}, *run.LeaseUntil, second.Add(-FloorMargin), third.Add(-FloorMargin), {}}
	if len(ss.since) != len(want) {
		t.Fatalf("%d passes, want %d", len(ss.since), len(want))
	}
	for i, w := range want {
		if !ss.since[i].Equal(w) {
			t.Errorf("pass %d read from %v, want %v", i+1, ss.since[i], w)
		}
	}
}

// TestSweepOverdueKeepsAttempt: SweepOverdue makes a pending run due
// before the previous minute due now, its attempt count unchanged (no
// attempt of it started: every start writes its claim).
func TestSweepOverdueKeepsAttempt(t *testing.T) {
	sw, st, clk, _ := setup(t)
	ctx := context.Background()
	at := clk.Now().Add(-3 * time.Minute)
	run := &model.Run{ID: model.RunID("t1", at), TimerID: "t1", ScheduledAt: at, DueAt: at}
	if _, err := st.InsertRuns(ctx, []*model.Run{run}); err != nil {
		t.Fatal(err)
	}
	if n, err := sw.SweepOverdue(ctx); err != nil || n != 1 {
		t.Fatalf("SweepOverdue = %d, %v; want 1", n, err)
	}
	r, err := st.GetRun(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != model.RunPending || !r.DueAt.Equal(clk.Now()) || r.Attempt != 0 {
		t.Errorf("overdue run after the sweep = %s due %v attempt %d; want pending, due now, attempt 0", r.Status, r.DueAt, r.Attempt)
	}
}
