package startstop

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/base/testenv"
)

func TestLoop(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	var first, passes atomic.Int32
	l := &Loop{Name: "test loop", Interval: time.Second, Clock: clk,
		First: func(context.Context) error { first.Add(1); return nil },
		Pass:  func(context.Context) { passes.Add(1) }}
	l.Passed.Init(t)
	ctx := context.Background()
	if err := l.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if first.Load() != 1 || passes.Load() != 0 {
		t.Fatalf("after Start: first %d, passes %d; want 1, 0", first.Load(), passes.Load())
	}
	testenv.Eventually(t, 10*time.Second, "the loop's ticker", func() (bool, string) { return clk.Waiters() == 1, "" })
	for i := range 3 {
		clk.Advance(time.Second)
		l.Passed.Wait()
		if n := passes.Load(); n != int32(i+1) {
			t.Fatalf("passes = %d, want %d", n, i+1)
		}
	}
	if err := l.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour)
	l.Passed.RequireEmpty()
	if err := l.Start(ctx); !errors.Is(err, ErrStopped) {
		t.Errorf("Start after Stop = %v, want ErrStopped", err)
	}
}

func TestLoopFirstError(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	fail := true
	l := &Loop{Name: "failing", Interval: time.Second,
		First: func(context.Context) error {
			if fail {
				return boom
			}
			return nil
		},
		Pass: func(context.Context) {}}
	if err := l.Start(context.Background()); !errors.Is(err, boom) {
		t.Fatalf("Start = %v, want boom", err)
	}
	if l.Running() {
		t.Fatal("running after a failed start")
	}
	fail = false
	if err := l.Start(context.Background()); err != nil {
		t.Fatalf("Start again = %v", err)
	}
	if err := l.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := (&Loop{}).Start(context.Background()); err == nil {
		t.Error("a loop without Interval and Pass started")
	}
}
