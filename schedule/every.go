package schedule

import (
	"math"
	"math/big"
	"time"
)

// everySchedule is an @every interval. It fires at anchor+d, anchor+2d, ...
// counting real elapsed time; without an anchor, Next(t) is t+d.
type everySchedule struct {
	spec     string
	d        time.Duration
	loc      *time.Location
	anchor   time.Time
	anchored bool
}

// String returns the spec the schedule was parsed from.
func (e *everySchedule) String() string { return e.spec }

// Interval returns the interval of an @every schedule, and false for other
// kinds.
func Interval(s Schedule) (time.Duration, bool) {
	if e, ok := s.(*everySchedule); ok {
		return e.d, true
	}
	return 0, false
}

// Anchor returns the anchor of an @every schedule set by WithAnchor, and
// false if it has none or s is another kind.
func Anchor(s Schedule) (time.Time, bool) {
	if e, ok := s.(*everySchedule); ok && e.anchored {
		return e.anchor, true
	}
	return time.Time{}, false
}

// Next returns the first anchor+k*d (k >= 1) strictly after after; without
// an anchor, it returns after+d.
func (e *everySchedule) Next(after time.Time) time.Time {
	if !e.anchored {
		return e.in(after.Add(e.d))
	}
	first := e.anchor.Add(e.d)
	if after.Before(first) {
		return e.in(first)
	}
	t := e.step(first, after)
	for range 3 {
		if t.After(after) {
			return e.in(t)
		}
		t = t.Add(e.d)
	}
	return time.Time{}
}

// Prev returns the last anchor+k*d (k >= 1) strictly before before; without
// an anchor, it returns before-d.
func (e *everySchedule) Prev(before time.Time) time.Time {
	if !e.anchored {
		return e.in(before.Add(-e.d))
	}
	first := e.anchor.Add(e.d)
	if !first.Before(before) {
		return time.Time{}
	}
	t := e.step(first, before)
	for range 3 {
		if t.Before(before) {
			return e.in(t)
		}
		t = t.Add(-e.d)
	}
	return time.Time{}
}

// step returns first+k*d for the largest k >= 0 with first+k*d <= t, for
// t not before first. Far from first, where time.Duration overflows, it uses
// exact big-number arithmetic.
func (e *everySchedule) step(first, t time.Time) time.Time {
	if diff := t.Sub(first); diff < math.MaxInt64/2 {
		return first.Add(diff / e.d * e.d)
	}
	ns := new(big.Int).Mul(big.NewInt(t.Unix()-first.Unix()), big.NewInt(1e9))
	ns.Add(ns, big.NewInt(int64(t.Nanosecond()-first.Nanosecond())))
	k := ns.Quo(ns, big.NewInt(int64(e.d)))
	// first + k*d, added in whole seconds and a remainder.
	off := k.Mul(k, big.NewInt(int64(e.d)))
	sec, rem := new(big.Int).QuoRem(off, big.NewInt(1e9), new(big.Int))
	if !sec.IsInt64() {
		return time.Time{}
	}
	return time.Unix(first.Unix()+sec.Int64(), int64(first.Nanosecond())+rem.Int64())
}

func (e *everySchedule) in(t time.Time) time.Time { return t.In(e.loc) }

// atSchedule is an @at one-shot.
type atSchedule struct {
	spec string
	at   time.Time
	loc  *time.Location
}

// String returns the spec the schedule was parsed from.
func (a *atSchedule) String() string { return a.spec }

// At returns the instant of an @at schedule, and false for other kinds.
func At(s Schedule) (time.Time, bool) {
	if a, ok := s.(*atSchedule); ok {
		return a.at, true
	}
	return time.Time{}, false
}

// Next returns the instant of the schedule if it is after after.
func (a *atSchedule) Next(after time.Time) time.Time {
	if a.at.After(after) {
		return a.at
	}
	return time.Time{}
}

// Prev returns the instant of the schedule if it is before before.
func (a *atSchedule) Prev(before time.Time) time.Time {
	if a.at.Before(before) {
		return a.at
	}
	return time.Time{}
}
