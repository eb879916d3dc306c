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
package clock

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Clock tells the time.
type Clock interface {
	Now() time.Time
}

// Func adapts a function to Clock.
type Func func() time.Time

// Now calls f.
func (f Func) Now() time.Time { return f() }

// EnvTestOffset names the test-only environment variable that shifts
// System's clock by a Go duration ("5s", "-5s"), so that tests and the chaos
// tool can run a node whose clock is wrong. Never set it in production.
const EnvTestOffset = "CHIME_TEST_CLOCK_OFFSET"

// TestOffset returns the offset given by EnvTestOffset (0 when unset) and an
// error when it does not parse.
func TestOffset() (time.Duration, error) {
	v := os.Getenv(EnvTestOffset)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: %w", EnvTestOffset, v, err)
	}
	return d, nil
}

// System returns this machine's clock, shifted by offset (use TestOffset;
// 0 in production).
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

// Fake is a clock that only tests move. It is safe for concurrent use.
type Fake struct {
	mu sync.Mutex
	t  time.Time
}

// NewFake returns a Fake set to t.
func NewFake(t time.Time) *Fake { return &Fake{t: t} }

// Now returns the fake time.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Set sets the fake time.
func (c *Fake) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// Advance moves the fake time by d.
func (c *Fake) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
