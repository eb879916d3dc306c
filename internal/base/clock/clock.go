// Package clock gives chime's parts one clock to tell time by. Decisions
// between nodes — whether a lease has ended, whether a run is due — must be
// made by one clock, or a node whose clock runs ahead takes over healthy
// runs of other nodes and fires early. That one clock is the store's
// (store.Store.Now): each node measures its offset against it at every
// heartbeat and a Corrected clock adds the offset to the machine's clock.
//
// Durations and deadlines that only this process judges (how long to wait,
// when its own lease confirmation runs out) use time.Now's monotonic
// reading instead, which no clock step moves.
//
// A Clock also makes the timers and tickers the parts wait with, so that a
// test drives every part with one Fake: Advance and Set fire what came due.
// Timers measure durations, not instants: a Corrected clock's timers are
// its base's, and a change of offset moves no timer.
package clock

import (
	"context"
	"sync/atomic"
	"time"
)

// Clock tells the time and makes timers and tickers that run by it.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a timer that sends on its channel once d has
	// passed, like time.NewTimer.
	NewTimer(d time.Duration) Timer
	// NewTicker returns a ticker that sends on its channel every d, like
	// time.NewTicker; it panics if d <= 0.
	NewTicker(d time.Duration) Ticker
	// AfterFunc calls f in its own goroutine once d has passed, like
	// time.AfterFunc; the timer's C is nil.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a timer made by a Clock. Stop and Reset have Go 1.23 semantics:
// after either returns, no stale value is received from C.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it stopped
	// the timer (false: it had fired or been stopped).
	Stop() bool
	// Reset makes the timer fire d from now; it reports whether the timer
	// was active.
	Reset(d time.Duration) bool
}

// Ticker is a ticker made by a Clock.
type Ticker interface {
	C() <-chan time.Time
	Stop()
	Reset(d time.Duration)
}

// Func adapts a function to Clock: Now calls it, and timers and tickers
// run on this machine's clock (their durations are the same on any
// clock that only differs from it by an offset).
type Func func() time.Time

// Now calls f.
func (f Func) Now() time.Time { return f() }

// NewTimer returns a time.Timer.
func (f Func) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

// NewTicker returns a time.Ticker.
func (f Func) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

// AfterFunc calls time.AfterFunc.
func (f Func) AfterFunc(d time.Duration, fn func()) Timer { return realTimer{time.AfterFunc(d, fn)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

type realTicker struct{ t *time.Ticker }

func (r realTicker) C() <-chan time.Time   { return r.t.C }
func (r realTicker) Stop()                 { r.t.Stop() }
func (r realTicker) Reset(d time.Duration) { r.t.Reset(d) }

// Sleep waits d on c (nil: the machine's clock), or until ctx is done, and
// returns ctx's error then.
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := Default(c).NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Default returns c, or the machine's clock when c is nil.
func Default(c Clock) Clock {
	if c == nil {
		return System(0)
	}
	return c
}

// System returns this machine's clock, shifted by offset (0 in
// production; tests shift it to run a node whose clock is wrong).
func System(offset time.Duration) Clock {
	if offset == 0 {
		return Func(time.Now)
	}
	return Func(func() time.Time { return time.Now().Add(offset) })
}

// Corrected is a base clock corrected by an offset measured against a
// reference clock (the store's). It is safe for concurrent use.
type Corrected struct {
	base   Clock
	offset atomic.Int64 // reference minus base, ns
}

// NewCorrected returns base corrected by a zero offset until SetOffset.
func NewCorrected(base Clock) *Corrected { return &Corrected{base: base} }

// Now returns the base clock's time plus the offset.
func (c *Corrected) Now() time.Time { return c.base.Now().Add(time.Duration(c.offset.Load())) }

// Base returns the uncorrected clock.
func (c *Corrected) Base() Clock { return c.base }

// NewTimer returns a timer of the base clock.
func (c *Corrected) NewTimer(d time.Duration) Timer { return c.base.NewTimer(d) }

// NewTicker returns a ticker of the base clock.
func (c *Corrected) NewTicker(d time.Duration) Ticker { return c.base.NewTicker(d) }

// AfterFunc calls AfterFunc of the base clock.
func (c *Corrected) AfterFunc(d time.Duration, f func()) Timer { return c.base.AfterFunc(d, f) }

// Offset returns the reference clock minus the base clock.
func (c *Corrected) Offset() time.Duration { return time.Duration(c.offset.Load()) }

// SetOffset sets the correction.
func (c *Corrected) SetOffset(d time.Duration) { c.offset.Store(int64(d)) }

// Estimate measures the offset samples times, NTP-style: the sample with the
// shortest round trip wins (its error bound, half the round trip, is the
// smallest: a read that waited for a connection or a busy server answers
// late and skews its sample), and an offset within that bound is taken as
// zero, since the measurement cannot tell it from zero. It returns the
// winning round trip too.
func Estimate(base Clock, samples int, read func() (time.Time, error)) (offset, rtt time.Duration, err error) {
	best := time.Duration(-1)
	for range max(samples, 1) {
		off, r, err := measure(base, read)
		if err != nil {
			return 0, 0, err
		}
		if best < 0 || r < best {
			offset, best = off, r
		}
	}
	if offset.Abs() <= best/2 {
		offset = 0
	}
	return offset, best, nil
}

// measure reads the reference clock with read and returns its offset
// against base (reference minus base) and the read's round trip. The
// reference is taken to be read half-way through the round trip, so the
// error is at most half the round trip.
func measure(base Clock, read func() (time.Time, error)) (offset, rtt time.Duration, err error) {
	t0 := base.Now()
	ref, err := read()
	t1 := base.Now()
	if err != nil {
		return 0, 0, err
	}
	rtt = t1.Sub(t0)
	mid := t0.Add(rtt / 2)
	return ref.Sub(mid), rtt, nil
}
