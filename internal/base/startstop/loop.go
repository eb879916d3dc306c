package startstop

import (
	"context"
	"errors"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/base/testsignal"
)

// Loop is a Service that runs a pass every Interval of its clock: the
// engine's planning, sweeping and heartbeat loops are Loops. Each pass
// gets a context with a timeout of 2·Interval + 10s, not cancelled by
// Stop: Stop waits for the pass in progress, as a pass cut short could
// leave its work half done.
type Loop struct {
	// Name names the loop in errors.
	Name string
	// Interval is the time between passes; it must be positive.
	Interval time.Duration
	// Clock runs the loop's ticker (default clock.System(0)).
	Clock clock.Clock
	// First, when set, runs in Start before the loop begins, and its error
	// is Start's.
	First func(ctx context.Context) error
	// Pass is the periodic work.
	Pass func(ctx context.Context)

	life Base
	// Passed reports to tests the clock's time of every pass that ended
	// (see internal/base/testsignal).
	Passed testsignal.Signal[time.Time]
}

// Start runs First, if any, then starts the loop; the first periodic pass
// comes one Interval later.
func (l *Loop) Start(ctx context.Context) error {
	return l.life.Start(ctx, l.Name, func(runCtx context.Context) error {
		if l.Interval <= 0 || l.Pass == nil {
			return errors.New("loop needs a positive Interval and a Pass")
		}
		c := clock.Default(l.Clock)
		if l.First != nil {
			if err := l.First(ctx); err != nil {
				return err
			}
		}
		tick := c.NewTicker(l.Interval)
		l.life.Go(func() {
			defer tick.Stop()
			for {
				select {
				case <-runCtx.Done():
					return
				case <-tick.C():
				}
				pctx, cancel := context.WithTimeout(context.Background(), 2*l.Interval+10*time.Second)
				l.Pass(pctx)
				cancel()
				l.Passed.Signal(c.Now())
			}
		})
		return nil
	})
}

// Stop stops the loop and waits for the pass in progress.
func (l *Loop) Stop(ctx context.Context) error { return l.life.Stop(ctx, nil) }

// Running reports whether the loop runs.
func (l *Loop) Running() bool { return l.life.Running() }
