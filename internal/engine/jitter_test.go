package engine_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/engine"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// runLog is an action runner that keeps the run of every attempt and when
// it started.
type runLog struct {
	mu   sync.Mutex
	runs []model.Run
	at   []time.Time
}

func (l *runLog) Run(_ context.Context, run *model.Run, _ *model.Timer) ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs = append(l.runs, *run)
	l.at = append(l.at, time.Now())
	return nil, nil
}

func (l *runLog) snapshot() ([]model.Run, []time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]model.Run(nil), l.runs...), append([]time.Time(nil), l.at...)
}

// TestJitterFiresAtDueAt: a jittered timer's runs keep their nominal
// instant and id, are due at the jittered instant, start then and not at
// the nominal one, and are not misfires for being later than the nominal
// instant by more than the misfire grace.
func TestJitterFiresAtDueAt(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	log := &runLog{}
	// A grace well under most offsets of the window: lateness counted
	// from the nominal instant would skip most fires.
	grace := func(c *engine.Config) { c.MisfireGrace = 300 * time.Millisecond }
	eng := startEngine(t, st, log, "node-a", grace)
	waitFor(t, 5*time.Second, "slices held", func() bool { return len(eng.Slices()) > 0 })
	e := &env{store: st, eng: eng}
	const window = 900 * time.Millisecond
	tm := e.createTimer(t, "jitter", "* * * * * *", func(tm *model.Timer) {
		tm.Policy.Jitter = window
		tm.Policy.Misfire = model.MisfireSkip
	})
	waitFor(t, 15*time.Second, "5 fires", func() bool { runs, _ := log.snapshot(); return len(runs) >= 5 })
	runs, starts := log.snapshot()
	late := 0
	for i, r := range runs {
		if r.ScheduledAt.Nanosecond() != 0 || r.ID != model.RunID(tm.ID, r.ScheduledAt) {
			t.Errorf("run %s: scheduled_at %v, want a whole second and the id of that instant", r.ID, r.ScheduledAt)
		}
		want := r.ScheduledAt.Add(model.JitterOffset(tm.ID, r.ScheduledAt, window))
		if !r.DueAt.Equal(want) {
			t.Errorf("run %s: due_at %v, want %v", r.ID, r.DueAt, want)
		}
		if early := r.DueAt.Sub(starts[i]); early > 5*time.Millisecond {
			t.Errorf("run %s started %s before its due_at", r.ID, early)
		}
		if starts[i].Sub(r.ScheduledAt) > 50*time.Millisecond {
			late++
		}
	}
	if late == 0 {
		t.Errorf("no run of %d started more than 50ms after its nominal instant: jitter not applied", len(runs))
	}
	ctx := context.Background()
	skipped, _, err := st.ListRuns(ctx, store.RunFilter{TimerID: tm.ID, Status: model.RunSkipped})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range skipped {
		t.Errorf("run %s due %s after its instant skipped: %s", r.ID, r.DueAt.Sub(r.ScheduledAt), r.Error)
	}
	pending, _, err := st.ListRuns(ctx, store.RunFilter{TimerID: tm.ID, Status: model.RunPending, Limit: 3})
	if err != nil || len(pending) == 0 {
		t.Fatalf("pending runs: %v, %v", pending, err)
	}
	for _, r := range pending {
		if want := tm.Policy.DueAt(tm.ID, r.ScheduledAt); !r.DueAt.Equal(want) {
			t.Errorf("stored run %s: due_at %v, want %v", r.ID, r.DueAt, want)
		}
	}
}

// TestJitterSameOnEveryNode: two engines with stores of their own plan the
// same timer with the same run ids and the same jittered instants.
func TestJitterSameOnEveryNode(t *testing.T) {
	t.Parallel()
	created := time.Now().Truncate(time.Second)
	plan := func(node string) []*model.Run {
		st := openStore(t)
		e := &env{store: st, eng: startEngine(t, st, &runLog{}, node)}
		e.createTimer(t, "herd", "0 * * * * *", func(tm *model.Timer) {
			tm.ID, tm.CreatedAt, tm.UpdatedAt = "01SAMEONEVERYNODE", created, created
			tm.Policy.Jitter = 30 * time.Second
		})
		runs, _, err := st.ListRuns(context.Background(), store.RunFilter{TimerID: "01SAMEONEVERYNODE", Status: model.RunPending})
		if err != nil || len(runs) == 0 {
			t.Fatalf("%s: pending runs %v, %v", node, runs, err)
		}
		return runs
	}
	a, b := plan("node-a"), plan("node-b")
	if len(a) != len(b) {
		t.Fatalf("node-a planned %d runs, node-b %d", len(a), len(b))
	}
	for i := range a {
		if a[i].ID != b[i].ID || !a[i].ScheduledAt.Equal(b[i].ScheduledAt) || !a[i].DueAt.Equal(b[i].DueAt) {
			t.Errorf("run %d: node-a %s due %v, node-b %s due %v", i, a[i].ID, a[i].DueAt, b[i].ID, b[i].DueAt)
		}
		if a[i].DueAt.Equal(a[i].ScheduledAt) && model.JitterOffset(a[i].TimerID, a[i].ScheduledAt, 30*time.Second) != 0 {
			t.Errorf("run %d not jittered", i)
		}
	}
}
