package trigger

import (
	"slices"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/store"
)

// armedGroup is the claimed runs of one instant, waiting for it behind one
// timer. A herd (a thousand every-second cron timers due at the same
// millisecond) is one timer and one goroutine at its instant, which
// submits the runs one after the other in the order they were claimed,
// rather than a thousand timers whose thousand goroutines all become
// runnable at once and compete for the cores with the callbacks already
// on their way.
type armedGroup struct {
	timer clock.Timer
	runs  []store.ClaimedRun
}

// armNow is how close to its instant a claimed run is submitted at once
// rather than armed.
const armNow = 200 * time.Microsecond

// arm submits the claimed runs won at their instants, or gives them back
// if the trigger stopped. Runs due at the same instant share one timer
// (one armedGroup), with those of earlier claims of that instant.
func (t *Trigger) arm(won []store.ClaimedRun) {
	now := t.cfg.Clock.Now()
	var due []store.ClaimedRun
	for i := 0; i < len(won); {
		at := won[i].Run.DueAt
		j := i + 1
		for j < len(won) && won[j].Run.DueAt.Equal(at) {
			j++
		}
		group := won[i:j]
		i = j
		if at.Sub(now) <= armNow {
			due = append(due, group...)
			continue
		}
		t.armGroup(at, group, at.Sub(now))
	}
	if len(due) > 0 {
		t.submitAll(due)
		for _, cr := range due {
			t.signals.armed.Signal(cr.Run.ID)
		}
	}
}

// armGroup arms the runs of group, all due at at (in d), behind the timer
// of that instant.
func (t *Trigger) armGroup(at time.Time, group []store.ClaimedRun, d time.Duration) {
	t.armedMu.Lock()
	if t.stopped {
		t.armedMu.Unlock()
		for _, cr := range group {
			t.cfg.Executor.GiveBack(cr)
		}
		return
	}
	key := at.UnixNano()
	if g := t.armed[key]; g != nil {
		g.runs = append(g.runs, group...)
	} else {
		g = &armedGroup{runs: slices.Clone(group)}
		t.armed[key] = g
		g.timer = t.cfg.Clock.AfterFunc(d, func() { t.fire(key) })
	}
	t.armedMu.Unlock()
	for _, cr := range group {
		t.signals.armed.Signal(cr.Run.ID)
	}
}

// fire submits the runs armed for the instant key (Unix ns), unless Stop
// took them first.
func (t *Trigger) fire(key int64) {
	t.armedMu.Lock()
	g := t.armed[key]
	delete(t.armed, key)
	t.armedMu.Unlock()
	if g == nil {
		return
	}
	// Runs of several claims of this instant: higher priorities first.
	slices.SortStableFunc(g.runs, func(a, b store.ClaimedRun) int {
		return b.Timer.EffectivePriority() - a.Timer.EffectivePriority()
	})
	t.submitAll(g.runs)
}

// groupSubmitter is an Executor that takes a group of runs in one call
// (executor.Executor.SubmitAll).
type groupSubmitter interface {
	SubmitAll(crs []store.ClaimedRun)
}

// submitAll submits crs in order, in one call when the executor can.
func (t *Trigger) submitAll(crs []store.ClaimedRun) {
	if gs, ok := t.cfg.Executor.(groupSubmitter); ok {
		gs.SubmitAll(crs)
		return
	}
	for _, cr := range crs {
		t.cfg.Executor.Submit(cr)
	}
}
