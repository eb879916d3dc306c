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
