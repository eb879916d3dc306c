package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/engine"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// runsByStatus counts a timer's runs per status.
func runsByStatus(t *testing.T, st store.Store, timerID string) map[model.RunStatus][]*model.Run {
	t.Helper()
	runs, _, err := st.ListRuns(context.Background(), store.RunFilter{TimerID: timerID, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	out := map[model.RunStatus][]*model.Run{}
	for _, r := range runs {
		out[r.Status] = append(out[r.Status], r)
	}
	return out
}

// slowAction makes the test runner block for d (or until cancelled).
func slowAction(d time.Duration) func(*model.Run) error {
	return func(*model.Run) error {
		// The action's duration is the behaviour under test: the overlap
		// policies act on runs that are still running.
		time.Sleep(d) // behaviour under test (see above)
		return nil
	}
}

func TestOverlapSkip(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.rec.fail = slowAction(1500 * time.Millisecond)
	tm := e.createTimer(t, "overlap-skip", "* * * * * *", func(tm *model.Timer) {
		tm.Policy.Overlap = model.OverlapSkip
	})
	waitFor(t, 15*time.Second, "two skipped fires", func() bool {
		return len(runsByStatus(t, e.store, tm.ID)[model.RunSkipped]) >= 2
	})
	for _, r := range runsByStatus(t, e.store, tm.ID)[model.RunSkipped] {
		if !strings.Contains(r.Error, "overlap") || r.Reason != model.SkipOverlap {
			t.Errorf("skipped run %s: error %q reason %q, want the overlap reason", r.ID, r.Error, r.Reason)
		}
	}
	// Never two actions at once.
	calls := callsOf(e.rec.snapshot(), tm.ID)
	for i := 1; i < len(calls); i++ {
		if calls[i].at.Sub(calls[i-1].at) < 1400*time.Millisecond {
			t.Errorf("calls %d and %d overlap: %v apart", i-1, i, calls[i].at.Sub(calls[i-1].at))
		}
	}
}

func TestOverlapBufferOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.rec.fail = slowAction(2500 * time.Millisecond)
	tm := e.createTimer(t, "overlap-buffer", "* * * * * *", func(tm *model.Timer) {
		tm.Policy.Overlap = model.OverlapBufferOne
	})
	waitFor(t, 15*time.Second, "three finished fires", func() bool {
		return len(runsByStatus(t, e.store, tm.ID)[model.RunSucceeded]) >= 3
	})
	byStatus := runsByStatus(t, e.store, tm.ID)
	if len(byStatus[model.RunSkipped]) == 0 {
		t.Error("no fire skipped while one was buffered")
	}
	// The buffered run started when its predecessor ended, not at its
	// instant: it ran late, never beside another.
	calls := callsOf(e.rec.snapshot(), tm.ID)
	for i := 1; i < len(calls); i++ {
		if gap := calls[i].at.Sub(calls[i-1].at); gap < 2400*time.Millisecond {
			t.Errorf("calls %d and %d overlap: %v apart", i-1, i, gap)
		}
	}
}

func TestOverlapCancelRunning(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *engine.Config) { c.Lease = 600 * time.Millisecond })
	started := make(chan struct{}, 100)
	e.rec.fail = func(*model.Run) error {
		started <- struct{}{}
		// A long action is the behaviour under test (its successor waits).
		time.Sleep(3 * time.Second) // behaviour under test (see above)
		return nil
	}
	tm := e.createTimer(t, "overlap-cancel", "*/2 * * * * *", func(tm *model.Timer) {
		tm.Policy.Overlap = model.OverlapCancelRunning
	})
	waitFor(t, 15*time.Second, "a cancelled run", func() bool {
		return len(runsByStatus(t, e.store, tm.ID)[model.RunCancelled]) >= 1
	})
	r := runsByStatus(t, e.store, tm.ID)[model.RunCancelled][0]
	if !strings.Contains(r.Error, "overlap") {
		t.Errorf("cancelled run error %q, want the overlap reason", r.Error)
	}
}

func TestMaxFiresDisablesTimer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *engine.Config) { c.PlanInterval = 300 * time.Millisecond })
	tm := e.createTimer(t, "max", "* * * * * *", func(tm *model.Timer) { tm.Policy.MaxFires = 3 })
	waitFor(t, 15*time.Second, "the timer disabled", func() bool {
		cur, err := e.store.GetTimer(context.Background(), tm.ID)
		return err == nil && !cur.Enabled
	})
	if n := len(callsOf(e.rec.snapshot(), tm.ID)); n != 3 {
		t.Errorf("%d fires, want 3", n)
	}
}

func TestBoundsAndBackfill(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	start := time.Now().Add(1500 * time.Millisecond).Truncate(time.Second)
	tm := e.createTimer(t, "bounded", "* * * * * *", func(tm *model.Timer) {
		tm.Policy.StartAt = start
		tm.Policy.EndAt = start.Add(2 * time.Second)
	})
	waitFor(t, 10*time.Second, "three fires", func() bool { return len(callsOf(e.rec.snapshot(), tm.ID)) >= 3 })
	for _, c := range callsOf(e.rec.snapshot(), tm.ID) {
		if c.sched.Before(start) || c.sched.After(start.Add(2*time.Second)) {
			t.Errorf("fire at %v outside [%v, %v]", c.sched, start, start.Add(2*time.Second))
		}
	}
	// Backfill three fires of the past, before the start bound.
	from := start.Add(-time.Hour)
	runs, err := e.eng.Backfill(context.Background(), tm, from, from.Add(2*time.Second), 10)
	if err != nil || len(runs) != 3 {
		t.Fatalf("Backfill = %d runs, %v", len(runs), err)
	}
	waitFor(t, 10*time.Second, "backfilled fires", func() bool { return len(callsOf(e.rec.snapshot(), tm.ID)) >= 6 })
	// Backfilling the same range again runs nothing twice.
	runs, err = e.eng.Backfill(context.Background(), tm, from, from.Add(2*time.Second), 10)
	if err != nil || len(runs) != 0 {
		t.Errorf("second Backfill = %d runs, %v; want none", len(runs), err)
	}
}

// TestMisfirePolicies stops a node for longer than the misfire grace and
// checks what each policy does with the fires missed meanwhile.
func TestMisfirePolicies(t *testing.T) {
	t.Parallel()
	grace := func(c *engine.Config) { c.MisfireGrace = 500 * time.Millisecond }
	st := openStore(t)
	rec := &recorder{}
	eng := startEngine(t, st, rec, "node-a", grace)
	e := &env{store: st, rec: rec, eng: eng}
	all := e.createTimer(t, "all", "* * * * * *")
	latest := e.createTimer(t, "latest", "* * * * * *", func(tm *model.Timer) { tm.Policy.Misfire = model.MisfireLatest })
	skip := e.createTimer(t, "skip", "* * * * * *", func(tm *model.Timer) { tm.Policy.Misfire = model.MisfireSkip })
	window := e.createTimer(t, "window", "* * * * * *", func(tm *model.Timer) { tm.Policy.CatchupWindow = 1500 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := eng.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	// The outage, on the store's real clock, is the behaviour under test.
	time.Sleep(3 * time.Second) // behaviour under test (see above)
	startEngine(t, st, &recorder{}, "node-b", grace)
	missed := func(tm *model.Timer) (ran, skipped int) {
		for _, r := range runsByStatus(t, st, tm.ID)[model.RunSucceeded] {
			if r.ScheduledAt.After(down) && r.ScheduledAt.Before(down.Add(2*time.Second)) {
				ran++
			}
		}
		for _, r := range runsByStatus(t, st, tm.ID)[model.RunSkipped] {
			if r.ScheduledAt.After(down) && r.ScheduledAt.Before(down.Add(2*time.Second)) {
				skipped++
			}
		}
		return ran, skipped
	}
	waitFor(t, 10*time.Second, "missed fires settled", func() bool {
		for _, tm := range []*model.Timer{all, latest, skip, window} {
			if ran, skipped := missed(tm); ran+skipped < 2 {
				return false
			}
		}
		return true
	})
	if ran, skipped := missed(all); skipped != 0 {
		t.Errorf("misfire all: %d ran, %d skipped; want none skipped", ran, skipped)
	}
	if ran, skipped := missed(skip); ran != 0 {
		t.Errorf("misfire skip: %d ran, %d skipped; want none ran", ran, skipped)
	}
	if ran, _ := missed(latest); ran > 1 {
		t.Errorf("misfire latest: %d of the missed fires ran, want at most the latest", ran)
	}
	if _, skipped := missed(window); skipped == 0 {
		t.Errorf("catchup window: no missed fire skipped")
	}
	// Each skip says why.
	for tm, want := range map[*model.Timer]string{skip: model.SkipMisfire, latest: model.SkipMisfire, window: model.SkipCatchupWindow} {
		for _, r := range runsByStatus(t, st, tm.ID)[model.RunSkipped] {
			if r.Reason != want {
				t.Errorf("timer %s: skipped run at %v has reason %q (%s), want %q", tm.Name, r.ScheduledAt, r.Reason, r.Error, want)
			}
		}
	}
}
