package clock

import (
	"sort"
	"sync"
	"time"
)

// Fake is a clock that only tests move: Advance and Set fire, in the order
// of their instants, the timers and tickers that came due, and start the
// functions of AfterFunc in their own goroutines. A ticker behind by
// several periods sends once, as a time.Ticker whose reader is slow does.
// Setting the time back fires nothing. It is safe for concurrent use.
type Fake struct {
	mu      sync.Mutex
	t       time.Time
	waiters map[*fakeTimer]struct{}
	// armed is signalled whenever a timer or ticker is armed.
	armed chan struct{}
}

// NewFake returns a Fake set to t.
func NewFake(t time.Time) *Fake {
	return &Fake{t: t, waiters: map[*fakeTimer]struct{}{}, armed: make(chan struct{})}
}

// Now returns the fake time.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Set sets the fake time and fires what came due.
func (c *Fake) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.fireLocked()
	c.mu.Unlock()
}

// Advance moves the fake time by d and fires what came due.
func (c *Fake) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.fireLocked()
	c.mu.Unlock()
}

// Waiters returns how many timers and tickers are armed: a test waits for
// a part to arm its timer before it advances the clock past it.
func (c *Fake) Waiters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters)
}

// Armed returns a channel closed the next time a timer or ticker is armed
// (made, or reset).
func (c *Fake) Armed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.armed
}

// NewTimer returns a timer that fires when the fake time reaches now+d.
func (c *Fake) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{c: c, ch: make(chan time.Time, 1)}
	c.mu.Lock()
	c.armLocked(t, d)
	c.mu.Unlock()
	return t
}

// AfterFunc returns a timer that calls f, in its own goroutine, when the
// fake time reaches now+d.
func (c *Fake) AfterFunc(d time.Duration, f func()) Timer {
	t := &fakeTimer{c: c, f: f}
	c.mu.Lock()
	c.armLocked(t, d)
	c.mu.Unlock()
	return t
}

// NewTicker returns a ticker that fires every d of fake time.
func (c *Fake) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("clock: non-positive interval for NewTicker")
	}
	t := &fakeTimer{c: c, ch: make(chan time.Time, 1), period: d}
	c.mu.Lock()
	c.armLocked(t, d)
	c.mu.Unlock()
	return fakeTicker{t}
}

func (c *Fake) armLocked(t *fakeTimer, d time.Duration) {
	t.at = c.t.Add(d)
	c.waiters[t] = struct{}{}
	close(c.armed)
	c.armed = make(chan struct{})
	c.fireLocked() // d <= 0 fires at once
}

// fireLocked fires the waiters due, earliest first. c.mu must be held.
func (c *Fake) fireLocked() {
	var due []*fakeTimer
	for t := range c.waiters {
		if !t.at.After(c.t) {
			due = append(due, t)
		}
	}
	sort.Slice(due, func(i, j int) bool { return due[i].at.Before(due[j].at) })
	for _, t := range due {
		at := t.at
		if t.period > 0 {
			for !t.at.After(c.t) {
				t.at = t.at.Add(t.period)
			}
		} else {
			delete(c.waiters, t)
		}
		if t.f != nil {
			go t.f()
			continue
		}
		select {
		case t.ch <- at:
		default: // the reader is behind: drop, as time.Ticker does
		}
	}
}

type fakeTimer struct {
	c      *Fake
	ch     chan time.Time
	f      func()
	at     time.Time
	period time.Duration // tickers
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	_, active := t.c.waiters[t]
	delete(t.c.waiters, t)
	t.drain()
	return active
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	_, active := t.c.waiters[t]
	t.drain()
	t.c.armLocked(t, d)
	return active
}

func (t *fakeTimer) drain() {
	if t.ch == nil {
		return
	}
	select {
	case <-t.ch:
	default:
	}
}

type fakeTicker struct{ t *fakeTimer }

func (k fakeTicker) C() <-chan time.Time { return k.t.ch }
func (k fakeTicker) Stop()               { k.t.Stop() }
func (k fakeTicker) Reset(d time.Duration) {
	if d <= 0 {
		panic("clock: non-positive interval for Ticker.Reset")
	}
	k.t.c.mu.Lock()
	k.t.period = d
	k.t.c.mu.Unlock()
	k.t.Reset(d)
}
