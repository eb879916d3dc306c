package memlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/coord/lock"
	"github.com/chimehq/chime/internal/coord/lock/locktest"
	"github.com/chimehq/chime/internal/coord/lock/memlock"
)

func TestLocker(t *testing.T) {
	t.Parallel()
	locktest.RunLocker(t, func(t *testing.T) lock.Locker { return memlock.NewLocker(nil) })
}

func TestElector(t *testing.T) {
	t.Parallel()
	locktest.RunElector(t, func(t *testing.T) func() lock.Elector {
		e := memlock.NewElector(nil)
		return func() lock.Elector { return e }
	})
}

func TestInjectedClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	l := memlock.NewLocker(clk)
	e := memlock.NewElector(clk)
	tests := []struct {
		advance  time.Duration
		bLocks   bool
		bLeader  string
		describe string
	}{
		{0, false, "a", "fresh"},
		{9 * time.Second, false, "a", "before expiry"},
		{time.Second, true, "b", "at expiry"},
	}
	if ok, _ := l.TryLock(ctx, "k", "a", 10*time.Second); !ok {
		t.Fatal("TryLock failed")
	}
	if id, _ := e.Select(ctx, "s", "a", 10*time.Second); id != "a" {
		t.Fatal("Select failed")
	}
	for _, tc := range tests {
		clk.Advance(tc.advance)
		if ok, _ := l.TryLock(ctx, "k", "b", time.Hour); ok != tc.bLocks {
			t.Errorf("%s: TryLock by b = %v, want %v", tc.describe, ok, tc.bLocks)
		}
		if id, _ := e.Select(ctx, "s", "b", time.Hour); id != tc.bLeader {
			t.Errorf("%s: leader = %q, want %q", tc.describe, id, tc.bLeader)
		}
	}
}
