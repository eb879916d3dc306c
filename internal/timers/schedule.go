package timers

import (
	"errors"
	"fmt"
	"time"

	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/schedule"
)

// ErrUnknownZone is wrapped by the error of LoadLocation for a name that is
// not an IANA time zone (or is "Local").
var ErrUnknownZone = errors.New("unknown time zone")

// LoadLocation returns the time zone of a timer: the IANA zone name, or UTC
// for "". "Local" is refused, since every node of a cluster must compute
// the same instants. Zones are loaded once and shared through the schedule
// package's cache, so that every timer of a zone has the same
// *time.Location, and the schedule package's per-zone tables (which it
// keys by that pointer) are built once per zone. The error's message is
// `unknown time zone "NAME"`, as the REST API answers it.
func LoadLocation(name string) (*time.Location, error) {
	if name == "" {
		name = DefaultTimezone
	}
	loc, err := schedule.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("%w %q", ErrUnknownZone, name)
	}
	return loc, nil
}

// Schedule compiles t's schedule in t's zone (UTC when it has none), with
// t's daylight-saving choice (policy.dst), anchoring an @every at t's
// start bound, or else at its creation. The
// planner, the executor's misfire policy, backfills and NextFireTimes all
// compute t's fires with it.
func Schedule(t *model.Timer) (schedule.Schedule, error) {
	loc, err := LoadLocation(t.Timezone)
	if err != nil {
		return nil, fmt.Errorf("timer %s: timezone: %w", t.ID, err)
	}
	s, err := schedule.ParseInLocation(t.Schedule, loc)
	if err != nil {
		return nil, fmt.Errorf("timer %s: schedule: %w", t.ID, err)
	}
	if t.Policy.DST != "" {
		d, err := schedule.ParseDST(t.Policy.DST)
		if err != nil {
			return nil, fmt.Errorf("timer %s: policy.dst: %w", t.ID, err)
		}
		s = schedule.WithDST(s, d)
	}
	anchor := t.CreatedAt
	if !t.Policy.StartAt.IsZero() {
		anchor = t.Policy.StartAt
	}
	return schedule.WithAnchor(s, anchor), nil
}

// NextFireTimes returns the next n fires of t after now, in t's zone,
// within its start and end bounds. An @every schedule counts from the start
// bound, or else t.CreatedAt. It returns nil when the schedule or zone does
// not parse. It does not look at t.Enabled.
func NextFireTimes(t *model.Timer, now time.Time, n int) []time.Time {
	loc, err := LoadLocation(t.Timezone)
	if err != nil {
		return nil
	}
	s, err := Schedule(t)
	if err != nil {
		return nil
	}
	from := now
	if st := t.Policy.StartAt; !st.IsZero() && from.Before(st) {
		from = st.Add(-time.Nanosecond)
	}
	times := schedule.NextN(s, from, n)
	for i := range times {
		if end := t.Policy.EndAt; !end.IsZero() && times[i].After(end) {
			times = times[:i]
			break
		}
		times[i] = times[i].In(loc)
	}
	return times
}

// Preview returns the next n fires after from of spec, a schedule that is
// not (yet) a timer's, in loc when spec has no zone prefix, with the
// daylight-saving choice dst. An @every is anchored at from. The times are in the schedule's zone (that of a
// CRON_TZ= prefix, or loc). The error is the schedule package's parse error
// (a *schedule.ParseError, whose message names the field: "hour: 24 is out
// of range 0-23").
func Preview(spec string, loc *time.Location, dst schedule.DST, from time.Time, n int) ([]time.Time, error) {
	s, err := schedule.ParseInLocation(spec, loc)
	if err != nil {
		return nil, err
	}
	return schedule.NextN(schedule.WithAnchor(schedule.WithDST(s, dst), from), from, n), nil
}
