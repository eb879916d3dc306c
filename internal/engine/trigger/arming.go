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
func (d *dispatcher) arm(won []store.ClaimedRun) {
	now := d.cfg.Clock.Now()
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
		d.armGroup(at, group, at.Sub(now))
	}
	if len(due) > 0 {
		d.submitAll(due)
		for _, cr := range due {
			d.signals.armed.Signal(cr.Run.ID)
		}
	}
}

// armGroup arms the runs of group, all due at at (in wait), behind the timer
// of that instant.
func (d *dispatcher) armGroup(at time.Time, group []store.ClaimedRun, wait time.Duration) {
	d.armedMu.Lock()
	if d.stopped {
		d.armedMu.Unlock()
		for _, cr := range group {
			d.cfg.Executor.GiveBack(cr)
		}
		return
	}
	key := at.UnixNano()
	if g := d.armed[key]; g != nil {
		g.runs = append(g.runs, group...)
	} else {
		g = &armedGroup{runs: slices.Clone(group)}
		d.armed[key] = g
		g.timer = d.cfg.Clock.AfterFunc(wait, func() { d.fire(key) })
	}
	d.armedMu.Unlock()
	for _, cr := range group {
		d.signals.armed.Signal(cr.Run.ID)
	}
}

// fire submits the runs armed for the instant key (Unix ns), unless Stop
// took them first.
func (d *dispatcher) fire(key int64) {
	d.armedMu.Lock()
	g := d.armed[key]
	delete(d.armed, key)
	d.armedMu.Unlock()
	if g == nil {
		return
	}
	// Runs of several claims of this instant: higher priorities first.
	slices.SortStableFunc(g.runs, func(a, b store.ClaimedRun) int {
		return b.Timer.EffectivePriority() - a.Timer.EffectivePriority()
	})
	d.submitAll(g.runs)
}

// groupSubmitter is an Executor that takes a group of runs in one call
// (executor.Executor.SubmitAll).
type groupSubmitter interface {
	SubmitAll(crs []store.ClaimedRun)
}

// submitAll submits crs in order, in one call when the executor can.
func (d *dispatcher) submitAll(crs []store.ClaimedRun) {
	if gs, ok := d.cfg.Executor.(groupSubmitter); ok {
		gs.SubmitAll(crs)
		return
	}
	for _, cr := range crs {
		d.cfg.Executor.Submit(cr)
	}
}

// stop waits for the claims in progress and gives back the runs armed for
// instants that have not come, so that another node runs them at their
// instants; runs armed from then on are given back at once. The dispatch
// loop has ended.
func (d *dispatcher) stop() {
	d.claims.Wait()
	d.armedMu.Lock()
	d.stopped = true
	armed := d.armed
	d.armed = nil
	d.armedMu.Unlock()
	for _, g := range armed {
		// A group still in the map has not fired: fire takes it out
		// first, under armedMu.
		g.timer.Stop()
		for _, cr := range g.runs {
			d.cfg.Executor.GiveBack(cr)
		}
	}
}
