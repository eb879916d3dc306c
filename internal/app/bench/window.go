package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/engine/planner"
	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/schedule"
)

// measureWindow waits for ws, then measures the node n until we: a CPU
// profile and a trace if cfg asks for them, the process's resources, and
// the store calls. It returns errInterrupted if ctx ends first.
func measureWindow(ctx context.Context, cfg Config, n *node, ws, we time.Time) (map[string]OpStats, Resources, error) {
	if err := clock.Sleep(ctx, nil, time.Until(ws)); err != nil {
		return nil, Resources{}, errInterrupted
	}
	stopProf, err := startCPUProfile(cfg.CPUProfile)
	if err != nil {
		return nil, Resources{}, err
	}
	stopTrace, err := startTrace(cfg.Trace)
	if err != nil {
		stopProf()
		return nil, Resources{}, err
	}
	defer stopTrace()
	smp := startSampler(peakProfile(cfg, ".peak"))
	n.store.record(true)
	if err := clock.Sleep(ctx, nil, time.Until(we)); err != nil {
		stopProf()
		smp.done()
		return nil, Resources{}, errInterrupted
	}
	n.store.record(false)
	ops, res := n.store.stats(), smp.done()
	if err := stopProf(); err != nil {
		return nil, Resources{}, fmt.Errorf("bench: cpu profile: %w", err)
	}
	// The heap as the window ends, the node still running (Run writes the
	// other scenarios' at the end).
	if cfg.MemProfile != "" {
		if err := writeHeapProfile(cfg.MemProfile); err != nil {
			return nil, Resources{}, err
		}
	}
	return ops, res, nil
}

// expectedFires returns every fire of timers due in [ws, we), by run id.
func expectedFires(timers []timerFires, ws, we time.Time) map[string]time.Time {
	expected := map[string]time.Time{}
	for _, t := range timers {
		for f := t.s.Next(ws.Add(-time.Nanosecond)); !f.IsZero() && f.Before(we); f = t.s.Next(f) {
			expected[model.RunID(t.id, f)] = f
		}
	}
	return expected
}

// timerFires is what expectedFires needs of a timer: its id and schedule.
// The scenarios keep these, not the timers, while the node runs: 12,500
// model.Timers with their actions were 8 MiB of the heap the bench
// reports as the node's.
type timerFires struct {
	id string
	s  schedule.Schedule
}

// firesOf returns the ids and schedules of timers.
func firesOf(timers []*model.Timer) ([]timerFires, error) {
	out := make([]timerFires, len(timers))
	for i, t := range timers {
		s, err := planner.ScheduleOf(t)
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		out[i] = timerFires{t.ID, s}
	}
	return out, nil
}

// drainExpected waits, at most drain, until the receiver of n has received
// every fire of expected.
func drainExpected(ctx context.Context, drain time.Duration, n *node, expected map[string]time.Time) error {
	var recvErr error
	got := map[string]bool{} // expected fires received
	read := 0                // fires looked at: a snapshot extends the one before
	waitFor(ctx, drain, func() bool {
		fires, err := n.recv.snapshot(ctx)
		if err != nil {
			recvErr = err
			return true
		}
		for _, f := range fires[min(read, len(fires)):] {
			if _, ok := expected[f.runID]; ok {
				got[f.runID] = true
			}
		}
		read = len(fires)
		return len(got) == len(expected)
	})
	return recvErr
}
