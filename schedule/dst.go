package schedule

import (
	"fmt"
	"strings"
)

// DST is a fixed-time cron schedule's choice for the wall times that a
// daylight-saving change skips (a gap, when the clocks jump forward) or
// repeats (an overlap, when they go back). The zero value is DSTDefault.
//
//	choice    in a gap                               in an overlap
//	default   once, at the first instant after it    once, at the first occurrence
//	shift     each wall time moved by the gap's      once, at the first occurrence
//	          length (02:30 fires at 03:30)
//	skip_gap  no fire                                once, at the first occurrence
//	both      once, at the first instant after it    at both occurrences
//	wall      no fire                                at both occurrences
//
// A wildcard schedule (see IsFixedTime) fires at every real instant whose
// wall time matches whatever the choice: none in a gap, both occurrences in
// an overlap, as wall does. Every and at schedules have no wall times, and
// no choice to make.
type DST uint8

const (
	// DSTDefault is Vixie cron's and cronie's rule: the wall times of a gap
	// fire once, right after it; a repeated wall time fires once, at its
	// first occurrence.
	DSTDefault DST = iota
	// DSTShift moves each wall time of a gap forward by the gap's length,
	// as time.Date, java.time and Airflow normalise a time that does not
	// exist (02:30 in a one-hour gap fires at 03:30; a fire that lands on
	// another of the schedule's instants fires once); overlaps as
	// DSTDefault.
	DSTShift
	// DSTSkipGap fires nothing for a wall time that does not exist (like
	// systemd timers and AWS EventBridge Scheduler); overlaps as DSTDefault.
	DSTSkipGap
	// DSTBoth fires a repeated wall time at both its occurrences; gaps as
	// DSTDefault.
	DSTBoth
	// DSTWall fires at every real instant whose wall time matches: never
	// in a gap, twice in an overlap (as Quartz and Temporal schedules do,
	// and as wildcard schedules always do).
	DSTWall
)

var dstNames = [...]string{DSTDefault: "default", DSTShift: "shift", DSTSkipGap: "skip_gap", DSTBoth: "both", DSTWall: "wall"}

// DSTNames lists the names ParseDST accepts, DSTDefault's first.
func DSTNames() []string { return append([]string(nil), dstNames[:]...) }

// String returns the choice's name: "default", "shift", "skip_gap", "both"
// or "wall".
func (d DST) String() string {
	if int(d) < len(dstNames) {
		return dstNames[d]
	}
	return fmt.Sprintf("DST(%d)", uint8(d))
}

// ParseDST returns the choice named name; "" is DSTDefault. The error is a
// *ParseError with Field "dst".
func ParseDST(name string) (DST, error) {
	if name == "" {
		return DSTDefault, nil
	}
	for i, n := range dstNames {
		if name == n {
			return DST(i), nil
		}
	}
	return DSTDefault, errorf("dst", name, "must be one of %s, got %q", strings.Join(dstNames[:], ", "), name)
}

// Ways of a fixed-time schedule in a gap and in an overlap.
const (
	gapAfter = iota // once, at the end of the gap
	gapShift        // each wall time moved by the gap's length
	gapSkip         // none
)

func (d DST) gap() int {
	switch d {
	case DSTShift:
		return gapShift
	case DSTSkipGap, DSTWall:
		return gapSkip
	}
	return gapAfter
}

// bothInOverlap reports whether a repeated wall time fires at both
// occurrences.
func (d DST) bothInOverlap() bool { return d == DSTBoth || d == DSTWall }

// WithDST returns a copy of a cron schedule that follows choice d in the
// gaps and overlaps of its zone. It returns s unchanged for other kinds,
// and for a wildcard schedule, which has no choice (see DST).
func WithDST(s Schedule, d DST) Schedule {
	if c, ok := s.(*cronSchedule); ok && c.fixed && c.dst != d {
		cp := *c
		cp.dst = d
		return &cp
	}
	return s
}

// DSTOf returns the choice of s: DSTDefault for a schedule that has none.
func DSTOf(s Schedule) DST {
	if c, ok := s.(*cronSchedule); ok {
		return c.dst
	}
	return DSTDefault
}
