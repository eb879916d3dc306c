package engine_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/base/testenv"

	"github.com/chimehq/chime/internal/coord/index/memindex"
	"github.com/chimehq/chime/internal/coord/lock/memlock"
	"github.com/chimehq/chime/internal/engine"
	"github.com/chimehq/chime/internal/engine/action"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/internal/store/sqlstore"
	"github.com/chimehq/chime/model"
)

// recorder is an action runner that records every attempt it performs.
type recorder struct {
	mu    sync.Mutex
	calls []call
	fail  func(run *model.Run) error
}

type call struct {
	runID   string
	timerID string
	sched   time.Time
	attempt int
	at      time.Time
}

func (r *recorder) Run(_ context.Context, run *model.Run, _ *model.Timer) ([]byte, error) {
	r.mu.Lock()
	r.calls = append(r.calls, call{run.ID, run.TimerID, run.ScheduledAt, run.Attempt, time.Now()})
	fail := r.fail
	r.mu.Unlock()
	if fail != nil {
		if err := fail(run); err != nil {
			return nil, err
		}
	}
	return []byte("ok"), nil
}

func (r *recorder) snapshot() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]call(nil), r.calls...)
}

type env struct {
	store store.Store
	rec   *recorder
	eng   *engine.Engine
}

func openStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlstore.Open(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "chime.db"), sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func startEngine(t *testing.T, st store.Store, rec action.Runner, node string, opts ...func(*engine.Config)) *engine.Engine {
	t.Helper()
	cfg := engine.Config{
		Store: st, Index: memindex.New(4), Locker: memlock.NewLocker(nil), Elector: memlock.NewElector(nil),
		NodeID: node, Runners: map[string]action.Runner{"test": rec},
		Lease: 3 * time.Second, SweepInterval: 500 * time.Millisecond,
	}
	for _, o := range opts {
		o(&cfg)
	}
	eng, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = eng.Shutdown(ctx)
	})
	return eng
}

func newEnv(t *testing.T, opts ...func(*engine.Config)) *env {
	t.Helper()
	st := openStore(t)
	rec := &recorder{}
	return &env{store: st, rec: rec, eng: startEngine(t, st, rec, "node-a", opts...)}
}

func (e *env) createTimer(t *testing.T, name, spec string, mod ...func(*model.Timer)) *model.Timer {
	t.Helper()
	now := time.Now()
	tm := &model.Timer{
		ID: fmt.Sprintf("t-%s-%d", name, now.UnixNano()), App: "test", Name: name, Schedule: spec, Timezone: "UTC",
		Enabled: true, Action: model.Action{Type: "test"}, Timeout: 5 * time.Second,
		Retry: model.RetryPolicy{MaxAttempts: 1, Backoff: 100 * time.Millisecond}, CreatedAt: now, UpdatedAt: now,
	}
	for _, m := range mod {
		m(tm)
	}
	ctx := context.Background()
	if _, err := e.store.SaveTimer(ctx, store.TimerWrite{Timer: tm, Create: true}); err != nil {
		t.Fatal(err)
	}
	if err := e.eng.TimerSaved(ctx, tm, true); err != nil {
		t.Fatal(err)
	}
	return tm
}

// firedAtLeast reports whether rec recorded n fires of every timer.
func firedAtLeast(rec *recorder, timers []*model.Timer, n int) func() bool {
	return func() bool {
		calls := rec.snapshot()
		for _, tm := range timers {
			if len(callsOf(calls, tm.ID)) < n {
				return false
			}
		}
		return true
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, d, what, func() (bool, string) { return cond(), "not yet" })
}

func callsOf(calls []call, timerID string) []call {
	var out []call
	for _, c := range calls {
		if c.timerID == timerID {
			out = append(out, c)
		}
	}
	return out
}

func TestFiresOnTimeAndOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Let the node take its slices first, all of the previous and the
	// current minute: the bound below is about steady operation, not
	// start-up under the race detector.
	waitFor(t, 5*time.Second, "slices held", func() bool {
		cur, n := fmt.Sprintf("%d:", time.Now().Unix()/60), 0
		for _, s := range e.eng.Slices() {
			if strings.HasPrefix(s, cur) {
				n++
			}
		}
		return n == 4 // every bucket of the current minute
	})
	tm := e.createTimer(t, "every", "* * * * * *")
	waitFor(t, 10*time.Second, "4 fires", func() bool { return len(callsOf(e.rec.snapshot(), tm.ID)) >= 4 })
	calls := callsOf(e.rec.snapshot(), tm.ID)
	seen := map[string]bool{}
	for _, c := range calls {
		if seen[c.runID] {
			t.Errorf("run %s executed twice", c.runID)
		}
		seen[c.runID] = true
		if c.sched.Nanosecond() != 0 {
			t.Errorf("scheduled at %v, want a whole second", c.sched)
		}
		// A loose bound: precision is measured by the bench, not here.
		if late := c.at.Sub(c.sched); late < 0 || late > 500*time.Millisecond {
			t.Errorf("run %s fired %v after its instant", c.runID, late)
		}
	}
	waitFor(t, 5*time.Second, "runs recorded", func() bool {
		runs, _, err := e.store.ListRuns(context.Background(), store.RunFilter{TimerID: tm.ID, Status: model.RunSucceeded})
		return err == nil && len(runs) >= 4
	})
	runs, _, err := e.store.ListRuns(context.Background(), store.RunFilter{TimerID: tm.ID, Status: model.RunSucceeded})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		if r.Attempt != 1 || r.Node != "node-a" {
			t.Errorf("run %s recorded at attempt %d by %q, want 1 by node-a", r.ID, r.Attempt, r.Node)
		}
	}
}

func TestOneShotAtSoon(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	at := time.Now().Add(1500 * time.Millisecond).Truncate(time.Millisecond)
	tm := e.createTimer(t, "at", "@at "+at.Format(time.RFC3339Nano))
	waitFor(t, 5*time.Second, "one-shot fire", func() bool { return len(callsOf(e.rec.snapshot(), tm.ID)) == 1 })
	c := callsOf(e.rec.snapshot(), tm.ID)[0]
	if !c.sched.Equal(at) {
		t.Errorf("scheduled %v, want %v", c.sched, at)
	}
	if late := c.at.Sub(at); late < 0 || late > 500*time.Millisecond {
		t.Errorf("fired %v after its instant", late)
	}
	// The wait is the behaviour under test: no second fire comes within it.
	time.Sleep(300 * time.Millisecond) // behaviour under test (see above)
	if n := len(callsOf(e.rec.snapshot(), tm.ID)); n != 1 {
		t.Errorf("one-shot fired %d times", n)
	}
}

func TestRetriesWithSameRunID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.rec.fail = func(run *model.Run) error {
		if run.Attempt < 3 {
			return errors.New("boom")
		}
		return nil
	}
	at := time.Now().Add(time.Second)
	tm := e.createTimer(t, "retry", "@at "+at.Format(time.RFC3339Nano), func(tm *model.Timer) {
		tm.Retry = model.RetryPolicy{MaxAttempts: 3, Backoff: 100 * time.Millisecond}
	})
	waitFor(t, 10*time.Second, "3 attempts", func() bool { return len(callsOf(e.rec.snapshot(), tm.ID)) >= 3 })
	calls := callsOf(e.rec.snapshot(), tm.ID)
	for i, c := range calls {
		if c.runID != calls[0].runID {
			t.Errorf("attempt %d has run id %s, want %s", i+1, c.runID, calls[0].runID)
		}
		if c.attempt != i+1 {
			t.Errorf("call %d has attempt %d", i, c.attempt)
		}
	}
	waitFor(t, 5*time.Second, "run succeeded", func() bool {
		r, err := e.store.GetRun(context.Background(), calls[0].runID)
		return err == nil && r.Status == model.RunSucceeded && r.Attempt == 3
	})
}

func TestRetriesExhaustedFails(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.rec.fail = func(*model.Run) error { return errors.New("always") }
	tm := e.createTimer(t, "fail", "@at "+time.Now().Add(time.Second).Format(time.RFC3339Nano), func(tm *model.Timer) {
		tm.Retry = model.RetryPolicy{MaxAttempts: 2, Backoff: 50 * time.Millisecond}
	})
	waitFor(t, 10*time.Second, "run failed", func() bool {
		runs, _, err := e.store.ListRuns(context.Background(), store.RunFilter{TimerID: tm.ID, Status: model.RunFailed})
		return err == nil && len(runs) == 1 && runs[0].Attempt == 2 && runs[0].Error == "always"
	})
	if n := len(callsOf(e.rec.snapshot(), tm.ID)); n != 2 {
		t.Errorf("%d attempts, want 2", n)
	}
}

func TestDisableCancelsAndTriggerFiresNow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	tm := e.createTimer(t, "daily", "0 0 9 * * *", func(tm *model.Timer) { tm.Enabled = true })
	tm.Enabled = false
	if err := e.store.UpdateTimer(ctx, tm); err != nil {
		t.Fatal(err)
	}
	if err := e.eng.TimerSaved(ctx, tm, true); err != nil {
		t.Fatal(err)
	}
	if runs, _, _ := e.store.ListRuns(ctx, store.RunFilter{TimerID: tm.ID, Status: model.RunPending}); len(runs) != 0 {
		t.Errorf("%d pending runs after disable", len(runs))
	}
	run, err := e.eng.Trigger(ctx, tm)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "manual run", func() bool {
		r, err := e.store.GetRun(ctx, run.ID)
		return err == nil && r.Status == model.RunSucceeded
	})
}

// TestRerunOfRerun: Rerun starts a new manual run on this node at once,
// which carries the run it runs again; a rerun of that rerun still carries
// the first run's scheduled instant.
func TestRerunOfRerun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	tm := e.createTimer(t, "daily", "0 0 9 * * *")
	first := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	orig := &model.Run{ID: model.RunID(tm.ID, first), TimerID: tm.ID, ScheduledAt: first, DueAt: first, Status: model.RunFailed}
	again, err := e.eng.Rerun(ctx, tm, orig)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Manual || again.RerunOf != orig.ID || !again.RerunScheduledAt.Equal(first) {
		t.Fatalf("rerun = %+v, want a manual run of %s scheduled at %v", again, orig.ID, first)
	}
	waitFor(t, 5*time.Second, "the rerun run", func() bool {
		r, err := e.store.GetRun(ctx, again.ID)
		return err == nil && r.Status == model.RunSucceeded
	})
	stored, err := e.store.GetRun(ctx, again.ID)
	if err != nil {
		t.Fatal(err)
	}
	third, err := e.eng.Rerun(ctx, tm, stored)
	if err != nil {
		t.Fatal(err)
	}
	if third.RerunOf != again.ID || !third.RerunScheduledAt.Equal(first) {
		t.Errorf("rerun of the rerun = %+v, want of %s scheduled at %v", third, again.ID, first)
	}
}

// TestSaveInOneWrite drives the save path's planning (PlanSave, one
// SaveTimer, Saved): a created every-second timer fires from its own write,
// with no planning pass; its disable cancels its pending runs in the same
// write; its enable plans it again.
func TestSaveInOneWrite(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	waitFor(t, 5*time.Second, "slices held", func() bool { return len(e.eng.Slices()) > 0 })
	now := time.Now()
	tm := &model.Timer{
		ID: fmt.Sprintf("t-save-%d", now.UnixNano()), App: "test", Name: "save", Schedule: "* * * * * *", Timezone: "UTC",
		Enabled: true, Action: model.Action{Type: "test"}, Timeout: 5 * time.Second,
		Retry: model.RetryPolicy{MaxAttempts: 1}, CreatedAt: now, UpdatedAt: now,
	}
	save := func(w store.TimerWrite) {
		t.Helper()
		e.eng.PlanSave(ctx, &w, true)
		inserted, err := e.store.SaveTimer(ctx, w)
		if err != nil {
			t.Fatal(err)
		}
		e.eng.Saved(ctx, w.Timer, true, inserted)
	}
	save(store.TimerWrite{Timer: tm, Create: true})
	if tm.PlannedUntil.Before(now.Add(engine.DefaultPlanAhead - time.Second)) {
		t.Errorf("PlannedUntil %v, want about %v from now", tm.PlannedUntil.Sub(now), engine.DefaultPlanAhead)
	}
	if n, err := e.store.CountRuns(ctx, tm.ID, model.RunPending); err != nil || n < int(engine.DefaultPlanAhead/time.Second)-3 {
		t.Errorf("pending runs after the create: %d, %v; want the plan's (about %d)", n, err, int(engine.DefaultPlanAhead/time.Second))
	}
	waitFor(t, 10*time.Second, "2 fires", func() bool { return len(callsOf(e.rec.snapshot(), tm.ID)) >= 2 })

	tm.Enabled = false
	save(store.TimerWrite{Timer: tm})
	if n, err := e.store.CountRuns(ctx, tm.ID, model.RunPending); err != nil || n != 0 {
		t.Errorf("pending runs after the disable: %d, %v; want 0", n, err)
	}
	if got, err := e.store.GetTimer(ctx, tm.ID); err != nil || got.Enabled || !got.PlannedUntil.IsZero() {
		t.Errorf("disabled timer stored as %+v, %v", got, err)
	}
	fired := len(callsOf(e.rec.snapshot(), tm.ID))
	tm.Enabled = true
	save(store.TimerWrite{Timer: tm})
	waitFor(t, 10*time.Second, "fires after the enable", func() bool { return len(callsOf(e.rec.snapshot(), tm.ID)) >= fired+2 })
}

// TestRestartFiresMissedRunsLate stops the engine with runs due, starts a
// new one on the same store later, and checks that each missed run fires
// once, late.
func TestRestartFiresMissedRunsLate(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	rec := &recorder{}
	eng := startEngine(t, st, rec, "node-a")
	e := &env{store: st, rec: rec, eng: eng}
	tm := e.createTimer(t, "every", "@every 1s")
	waitFor(t, 5*time.Second, "a first fire", func() bool { return len(callsOf(rec.snapshot(), tm.ID)) >= 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := eng.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	// The outage itself, on the store's real clock, is the behaviour under
	// test: the node must recover what it missed.
	time.Sleep(2500 * time.Millisecond) // behaviour under test (see above)
	rec2 := &recorder{}
	startEngine(t, st, rec2, "node-b")
	waitFor(t, 5*time.Second, "missed fires", func() bool { return len(callsOf(rec2.snapshot(), tm.ID)) >= 4 })
	ids := map[string]bool{}
	for _, c := range callsOf(rec.snapshot(), tm.ID) {
		ids[c.runID] = true
	}
	late := 0
	for _, c := range callsOf(rec2.snapshot(), tm.ID) {
		if ids[c.runID] {
			t.Errorf("run %s fired on both nodes", c.runID)
		}
		ids[c.runID] = true
		if c.sched.After(down) && c.sched.Before(down.Add(2*time.Second)) {
			late++
		}
	}
	if late < 2 {
		t.Errorf("%d runs from the outage fired, want at least 2", late)
	}
}

// TestNodesShareWorkOnce runs three engines on one store, one index and one
// locker (as a cluster shares a database and Redis): every fire happens
// once, and the slices spread over the nodes.
func TestNodesShareWorkOnce(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	idx := memindex.New(8)
	locker, elector := memlock.NewLocker(nil), memlock.NewElector(nil)
	rec := &recorder{}
	var engines []*engine.Engine
	for i := range 3 {
		eng, err := engine.New(engine.Config{
			Store: st, Index: idx, Locker: locker, Elector: elector,
			NodeID: fmt.Sprintf("node-%d", i), Runners: map[string]action.Runner{"test": rec},
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := eng.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		engines = append(engines, eng)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = eng.Shutdown(ctx)
		})
	}
	e := &env{store: st, rec: rec, eng: engines[0]}
	var timers []*model.Timer
	for i := range 16 {
		timers = append(timers, e.createTimer(t, fmt.Sprintf("t%d", i), "* * * * * *"))
	}
	waitFor(t, 15*time.Second, "3 fires of every timer", firedAtLeast(rec, timers, 3))
	seen := map[string]call{}
	for _, c := range rec.snapshot() {
		if p, ok := seen[c.runID]; ok {
			t.Errorf("run %s (scheduled %s) executed twice: attempt %d at %s, attempt %d at %s", c.runID,
				c.sched.Format("15:04:05.000"), p.attempt, p.at.Format("15:04:05.000"), c.attempt, c.at.Format("15:04:05.000"))
		}
		seen[c.runID] = c
	}
	// Bound: a rebalance hands a slice of this minute over within seconds;
	// on a loaded machine the next minute's slices, left to nodes under
	// their share until the minute starts, spread them by then.
	waitFor(t, 70*time.Second, "slices on every node", func() bool {
		nodes, err := st.ListNodes(context.Background(), time.Now().Add(-10*time.Second))
		if err != nil || len(nodes) != 3 {
			return false
		}
		for _, n := range nodes {
			if len(n.Slices) == 0 {
				return false
			}
		}
		return true
	})
}

// TestExpiredLeaseIsRecovered claims a run as a node that then dies: once
// the lease expires, the sweeper hands the run back and it runs again with
// the same run id and the next attempt number.
func TestExpiredLeaseIsRecovered(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	at := time.Now().Add(2 * time.Second)
	tm := e.createTimer(t, "ghost", "@at "+at.Format(time.RFC3339Nano))
	runID := model.RunID(tm.ID, at)
	now := time.Now()
	won, err := e.store.ClaimRuns(ctx, []store.Claim{{RunID: runID, Node: "ghost", LeaseUntil: now.Add(500 * time.Millisecond), Now: now}})
	if err != nil || len(won) != 1 {
		t.Fatalf("ghost claim = %v, %v", won, err)
	}
	waitFor(t, 10*time.Second, "the run recovered", func() bool { return len(callsOf(e.rec.snapshot(), tm.ID)) == 1 })
	c := callsOf(e.rec.snapshot(), tm.ID)[0]
	if c.at.Before(at) {
		t.Errorf("recovered run fired at %v, before its instant %v", c.at, at)
	}
	if c.runID != runID || c.attempt != 2 {
		t.Errorf("recovered call = run %s attempt %d, want run %s attempt 2", c.runID, c.attempt, runID)
	}
	waitFor(t, 5*time.Second, "run succeeded", func() bool {
		r, err := e.store.GetRun(ctx, runID)
		return err == nil && r.Status == model.RunSucceeded && r.Node == "node-a"
	})
}

// TestRetentionDeletesOldRuns: the engine's retention loop deletes the
// finished runs beyond Config.HistoryKeep and leaves the pending ones.
func TestRetentionDeletesOldRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *engine.Config) { c.HistoryKeep = 3; c.RetentionInterval = 100 * time.Millisecond })
	tm := e.createTimer(t, "kept", "@every 1m")
	ctx := context.Background()
	var runs []*model.Run
	for i := range 10 {
		at := time.Now().Add(-3 * time.Hour).Add(time.Duration(i) * time.Minute)
		runs = append(runs, &model.Run{ID: model.RunID(tm.ID, at), TimerID: tm.ID, ScheduledAt: at, DueAt: at,
			Status: model.RunPending, CreatedAt: at})
	}
	if _, err := e.store.InsertRuns(ctx, runs); err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		if _, err := e.store.SetRunStatus(ctx, r.ID, model.RunPending, model.RunSkipped, "test"); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 10*time.Second, "retention", func() (bool, string) {
		n, err := e.store.CountRuns(ctx, tm.ID, model.RunSkipped)
		return err == nil && n == 3, fmt.Sprintf("%d skipped runs (%v)", n, err)
	})
	if n, err := e.store.CountRuns(ctx, tm.ID, model.RunPending); err != nil || n == 0 {
		t.Errorf("pending runs = %d, %v; want the planned one kept", n, err)
	}
}
