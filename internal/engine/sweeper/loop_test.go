package sweeper

import (
	"context"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/base/startstop/startstoptest"
	"github.com/chimehq/chime/internal/base/testenv"
	"github.com/chimehq/chime/model"
)

// TestLoopRecoversExpiredLease: the lease loop, ticking on the clock, takes
// a run whose lease expired once two of its passes MinGap apart saw it so,
// and not while the node stands by.
func TestLoopRecoversExpiredLease(t *testing.T) {
	for _, standby := range []bool{false, true} {
		t.Run(map[bool]string{false: "running", true: "standby"}[standby], func(t *testing.T) {
			sw, st, clk, run := setup(t)
			l := NewLoop(sw, LoopConfig{Overdue: time.Hour, Leases: 100 * time.Millisecond, Clock: clk,
				Standby: func() bool { return standby }})
			l.leases.Passed.Init(t)
			ctx := context.Background()
			if err := l.Start(ctx); err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := l.Stop(ctx); err != nil {
					t.Error(err)
				}
			}()
			testenv.Eventually(t, 10*time.Second, "the three tickers", func() (bool, string) { return clk.Waiters() == 3, "" })
			for range 8 { // 800ms: past MinGap (500ms) after the first sighting
				clk.Advance(100 * time.Millisecond)
				l.leases.Passed.Wait()
			}
			want := model.RunPending
			if standby {
				want = model.RunRunning
			}
			if got := status(t, st, run.ID); got != want {
				t.Errorf("run %s, want %s", got, want)
			}
		})
	}
}

// TestLoopLifecycle: Start and Stop are safe twice, Stop without Start, and
// a stopped loop does not start again.
func TestLoopLifecycle(t *testing.T) {
	sw, _, clk, _ := setup(t)
	startstoptest.Lifecycle(t, func() *Loop { return NewLoop(sw, LoopConfig{Clock: clk}) })
}
