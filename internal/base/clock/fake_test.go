package clock

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

var epoch = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// received reports whether ch holds a value now.
func received(ch <-chan time.Time) (time.Time, bool) {
	select {
	case v := <-ch:
		return v, true
	default:
		return time.Time{}, false
	}
}

func TestFakeTimer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		after   time.Duration // timer
		advance []time.Duration
		fires   bool
	}{
		{"not yet", time.Second, []time.Duration{999 * time.Millisecond}, false},
		{"exactly", time.Second, []time.Duration{time.Second}, true},
		{"in steps", time.Second, []time.Duration{500 * time.Millisecond, 600 * time.Millisecond}, true},
		{"zero fires at once", 0, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := NewFake(epoch)
			tm := c.NewTimer(tt.after)
			for _, d := range tt.advance {
				c.Advance(d)
			}
			v, ok := received(tm.C())
			if ok != tt.fires {
				t.Fatalf("fired = %v, want %v", ok, tt.fires)
			}
			if ok && !v.Equal(epoch.Add(tt.after)) {
				t.Errorf("fired with %v, want its instant %v", v, epoch.Add(tt.after))
			}
		})
	}
}

func TestFakeTimerStopReset(t *testing.T) {
	t.Parallel()
	c := NewFake(epoch)
	tm := c.NewTimer(time.Second)
	if !tm.Stop() {
		t.Error("Stop of an armed timer = false")
	}
	if tm.Stop() {
		t.Error("second Stop = true")
	}
	c.Advance(2 * time.Second)
	if _, ok := received(tm.C()); ok {
		t.Error("a stopped timer fired")
	}
	if tm.Reset(time.Second) {
		t.Error("Reset of a stopped timer reported it active")
	}
	c.Advance(time.Second)
	// Fired and not read: Reset drops the stale value.
	tm.Reset(time.Second)
	if _, ok := received(tm.C()); ok {
		t.Error("a stale value was received after Reset")
	}
	if c.Waiters() != 1 {
		t.Errorf("Waiters = %d, want 1", c.Waiters())
	}
	c.Set(epoch.Add(time.Hour))
	if _, ok := received(tm.C()); !ok {
		t.Error("Set past the instant did not fire the timer")
	}
	if c.Waiters() != 0 {
		t.Errorf("Waiters after firing = %d, want 0", c.Waiters())
	}
}

func TestFakeTicker(t *testing.T) {
	t.Parallel()
	c := NewFake(epoch)
	tk := c.NewTicker(100 * time.Millisecond)
	defer tk.Stop()
	for i := range 3 {
		c.Advance(100 * time.Millisecond)
		if _, ok := received(tk.C()); !ok {
			t.Fatalf("tick %d missing", i)
		}
	}
	c.Advance(time.Second) // ten periods behind: one tick, as time.Ticker
	if _, ok := received(tk.C()); !ok {
		t.Fatal("no tick after a long advance")
	}
	if _, ok := received(tk.C()); ok {
		t.Fatal("more than one tick buffered")
	}
	tk.Reset(time.Second)
	c.Advance(999 * time.Millisecond)
	if _, ok := received(tk.C()); ok {
		t.Fatal("tick before the reset period")
	}
	c.Advance(time.Millisecond)
	if _, ok := received(tk.C()); !ok {
		t.Fatal("no tick at the reset period")
	}
	tk.Stop()
	c.Advance(time.Hour)
	if _, ok := received(tk.C()); ok {
		t.Fatal("tick after Stop")
	}
}

func TestFakeAfterFuncAndOrder(t *testing.T) {
	t.Parallel()
	c := NewFake(epoch)
	var calls atomic.Int32
	done := make(chan struct{})
	c.AfterFunc(2*time.Second, func() {
		calls.Add(1)
		close(done)
	})
	stopped := c.AfterFunc(time.Second, func() { calls.Add(10) })
	if !stopped.Stop() {
		t.Fatal("Stop of an armed AfterFunc = false")
	}
	armed := c.Armed()
	go c.NewTimer(time.Minute)
	select {
	case <-armed:
	case <-time.After(10 * time.Second):
		t.Fatal("Armed was not signalled")
	}
	c.Advance(2 * time.Second)
	<-done
	if n := calls.Load(); n != 1 {
		t.Errorf("calls = %d, want 1 (the stopped func must not run)", n)
	}
}

func TestSleep(t *testing.T) {
	t.Parallel()
	c := NewFake(epoch)
	done := make(chan error, 1)
	armed := c.Armed()
	go func() { done <- Sleep(context.Background(), c, time.Second) }()
	<-armed
	c.Advance(time.Second)
	if err := <-done; err != nil {
		t.Errorf("Sleep = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, c, time.Hour); err == nil {
		t.Error("Sleep with a cancelled context returned nil")
	}
}

func TestCorrectedTimersRunOnBase(t *testing.T) {
	t.Parallel()
	base := NewFake(epoch)
	c := NewCorrected(base)
	c.SetOffset(time.Hour) // an offset moves the time, not the timers
	tm := c.NewTimer(time.Second)
	c.SetOffset(-time.Hour)
	base.Advance(time.Second)
	if _, ok := received(tm.C()); !ok {
		t.Error("a Corrected timer did not fire with its base")
	}
}
