package schedule

import (
	"fmt"
	"sync"
	"time"
)

// Schedule computes the fire instants of a timer.
type Schedule interface {
	// Next returns the first fire instant strictly after after, or the zero
	// Time if there is none.
	Next(after time.Time) time.Time
	// Prev returns the last fire instant strictly before before, or the zero
	// Time if there is none.
	Prev(before time.Time) time.Time
}

// Kind tells the three kinds of schedule apart.
type Kind int

const (
	// KindCron is a cron expression or a calendar descriptor (@daily ...).
	KindCron Kind = iota
	// KindEvery is an @every interval.
	KindEvery
	// KindAt is an @at one-shot.
	KindAt
)

// String returns "cron", "every" or "at".
func (k Kind) String() string {
	switch k {
	case KindCron:
		return "cron"
	case KindEvery:
		return "every"
	case KindAt:
		return "at"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// ParseError describes a spec that does not parse. Field is one of second,
// minute, hour, day-of-month, month, day-of-week, year, spec, timezone, every
// and at; Token is the offending part of the spec; Reason is a complete phrase
// that names the token and says what is wrong with it.
type ParseError struct {
	Field  string
	Token  string
	Reason string
}

// Error returns "field: reason", for example "hour: 24 is out of range 0-23".
func (e *ParseError) Error() string { return e.Field + ": " + e.Reason }

func errorf(field, token, format string, args ...any) *ParseError {
	return &ParseError{Field: field, Token: token, Reason: fmt.Sprintf(format, args...)}
}

// Parse parses spec with UTC as the default time zone. See the package
// documentation for the syntax.
func Parse(spec string) (Schedule, error) { return ParseInLocation(spec, time.UTC) }

// ParseInLocation parses spec; loc is the time zone of a spec without a
// CRON_TZ= or TZ= prefix. A nil loc means UTC.
func ParseInLocation(spec string, loc *time.Location) (Schedule, error) {
	if loc == nil {
		loc = time.UTC
	}
	return parse(spec, loc)
}

// MustParse is like Parse but panics if spec does not parse. It is meant for
// specs that are constants of a program.
func MustParse(spec string) Schedule {
	s, err := Parse(spec)
	if err != nil {
		panic(fmt.Sprintf("schedule: MustParse(%q): %v", spec, err))
	}
	return s
}

// NextN returns up to n successive fire instants after after. It returns
// fewer if the schedule runs out of fires.
func NextN(s Schedule, after time.Time, n int) []time.Time {
	if n <= 0 {
		return nil
	}
	out := make([]time.Time, 0, min(n, 1024))
	t := after
	for range n {
		t = s.Next(t)
		if t.IsZero() {
			break
		}
		out = append(out, t)
	}
	return out
}

// WithAnchor returns a copy of an @every schedule anchored at anchor: it fires
// at anchor+d, anchor+2d, and so on. It returns s unchanged for other kinds.
// An @every without an anchor is anchored at the instant passed to Next, so
// that Next(t) is t+d.
func WithAnchor(s Schedule, anchor time.Time) Schedule {
	if e, ok := s.(*everySchedule); ok {
		c := *e
		c.anchor = anchor
		c.anchored = true
		return &c
	}
	return s
}

// KindOf returns the kind of s; schedules not made by this package are
// reported as KindCron.
func KindOf(s Schedule) Kind {
	switch s.(type) {
	case *everySchedule:
		return KindEvery
	case *atSchedule:
		return KindAt
	}
	return KindCron
}

// IsOneShot reports whether s is an @at schedule, which fires at most once.
func IsOneShot(s Schedule) bool { return KindOf(s) == KindAt }

// IsFixedTime reports whether s is a cron schedule none of whose second,
// minute and hour fields starts with "*". Fixed-time schedules fire once for a
// wall time skipped or repeated by a daylight-saving change; see the package
// documentation.
func IsFixedTime(s Schedule) bool {
	c, ok := s.(*cronSchedule)
	return ok && c.fixed
}

// Location returns the time zone of s: the zone of its CRON_TZ= or TZ=
// prefix, else the default zone it was parsed with. Next and Prev return
// instants in this zone. It returns UTC for schedules not made by this
// package.
func Location(s Schedule) *time.Location {
	switch s := s.(type) {
	case *cronSchedule:
		return s.loc
	case *everySchedule:
		return s.loc
	case *atSchedule:
		return s.loc
	}
	return time.UTC
}

var locCache sync.Map // string -> *time.Location

// LoadLocation returns the IANA time zone name, caching it. Errors are
// *ParseError with Field "timezone". "Local" and "" are refused, because the
// nodes of a cluster must agree on the zone.
func LoadLocation(name string) (*time.Location, error) {
	if v, ok := locCache.Load(name); ok {
		return v.(*time.Location), nil
	}
	if name == "" || name == "Local" {
		return nil, errorf("timezone", name, "%q is not an IANA time zone name", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, errorf("timezone", name, "unknown time zone %q", name)
	}
	locCache.Store(name, loc)
	return loc, nil
}

// minIntervalFires is how many fires MinInterval measures a cron spec on.
const minIntervalFires = 1000

// minIntervalFrom is where MinInterval starts measuring: a fixed instant, so
// that its answer does not depend on when it is asked.
var minIntervalFrom = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// MinInterval returns the shortest time between two consecutive fires of s
// as its wall clock reads them, daylight saving aside: the interval of an
// @every; for a cron spec, the shortest gap between consecutive matching
// wall times among its first 1,000 from 2000-01-01 (so a pattern rarer than
// that, such as a gap that only leap years make, may be missed). It returns
// 0 for an @at and for a cron spec with fewer than two fires.
func MinInterval(s Schedule) time.Duration {
	switch s := s.(type) {
	case *everySchedule:
		return s.d
	case *atSchedule:
		return 0
	case *cronSchedule:
		var best int64
		from := minIntervalFrom.Unix()
		prev, ok := s.nextWall(from, maxSec+maxOffset)
		for i := 1; ok && i < minIntervalFires && best != 1; i++ {
			var w int64
			if w, ok = s.nextWall(prev+1, maxSec+maxOffset); ok {
				if d := w - prev; best == 0 || d < best {
					best = d
				}
				prev = w
			}
		}
		return time.Duration(best) * time.Second
	}
	var best time.Duration
	prev := s.Next(minIntervalFrom)
	for i := 1; !prev.IsZero() && i < minIntervalFires; i++ {
		n := s.Next(prev)
		if n.IsZero() {
			break
		}
		if d := n.Sub(prev); best == 0 || d < best {
			best = d
		}
		prev = n
	}
	return best
}
