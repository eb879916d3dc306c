// Package schedule is chime's schedule language: cron expressions with
// seconds, years, time zones and the Quartz extensions, calendar
// descriptors, fixed intervals and one-shot instants. Every node of a
// cluster computes the same fire instants from the same spec.
//
// # Syntax
//
// A cron spec has 5, 6 or 7 fields separated by spaces:
//
//	minute hour day-of-month month day-of-week
//	second minute hour day-of-month month day-of-week
//	second minute hour day-of-month month day-of-week year
//
// A 5-field spec fires at second 0. The ranges are second and minute 0-59,
// hour 0-23, day-of-month 1-31, month 1-12 or JAN-DEC, day-of-week 0-7 or
// SUN-SAT (0 and 7 are both Sunday), year 1970-2099. Names are three
// letters, in any case. Each field is a comma-separated list of:
//
//	element  matches
//	*        every value
//	?        every value (day-of-month and day-of-week only)
//	5        one value
//	1-5      a range (FRI-SUN wraps to Sunday)
//	*/15     every 15th value from the minimum
//	10-40/5  every 5th value of a range
//	10/5     every 5th value from 10 to the maximum
//
// The Quartz extensions are, in day-of-month: L (the last day of the month),
// L-n (n days before the last day, n 0-30), nW (the weekday, Monday to
// Friday, nearest to day n without leaving the month) and LW (the last
// weekday of the month); in day-of-week: nL or FRIL (the last such weekday
// of the month) and n#k or FRI#k (the k-th such weekday of the month, k 1-5).
//
// Day-of-month and day-of-week combine as in Vixie cron: if either field
// starts with * or ?, a day matches when both fields match; otherwise a day
// matches when either does. So "0 0 13 * 5" fires on the 13th and on every
// Friday, and "0 0 */2 * 1" fires on Mondays that fall on odd days.
//
// The descriptors are @yearly and @annually ("0 0 0 1 1 *"), @monthly
// ("0 0 0 1 * *"), @weekly ("0 0 0 * * 0"), @daily and @midnight
// ("0 0 0 * * *"), @hourly ("0 0 * * * *") and @minutely ("0 * * * * *");
// "@every <duration>" fires at a fixed interval of at least 1s, written as
// a Go duration (90s, 1h30m); "@at <RFC 3339 time>" fires once.
//
// A spec may start with CRON_TZ=<zone> or TZ=<zone>, an IANA zone name such
// as Europe/London; otherwise the default zone given to ParseInLocation
// applies (UTC for Parse). Next and Prev return instants in that zone.
//
// A spec with a year field has no fires after 2099. A spec that can never
// fire, such as "0 0 30 2 *", is rejected by Parse.
// Parse errors are *ParseError values that name the field and the offending
// token and say what is wrong: "hour: 24 is out of range 0-23".
//
// # Daylight saving
//
// Cron fields match wall-clock time in the schedule's zone. A spec is
// fixed-time when none of its second, minute and hour fields starts with *
// (a 5-field spec's second is a fixed 0), and wildcard otherwise; see
// IsFixedTime.
//
//   - A wall time that does not exist, because the clocks jump forward:
//     a fixed-time spec fires once at the first instant after the gap, even
//     if several of its wall times fall in the gap; a wildcard spec does not
//     fire in the gap.
//   - A wall time that exists twice, because the clocks go back: a
//     fixed-time spec fires once, at the earlier instant; a wildcard spec
//     fires at both.
//
// That is the default (Vixie cron's and cronie's rule). WithDST gives a
// fixed-time spec another choice (see DST):
//
//	choice    in a gap                               in an overlap
//	default   once, at the first instant after it    once, at the first occurrence
//	shift     each wall time moved by the gap's      once, at the first occurrence
//	          length (02:30 fires at 03:30)
//	skip_gap  no fire                                once, at the first occurrence
//	both      once, at the first instant after it    at both occurrences
//	wall      no fire                                at both occurrences
//
// A wildcard spec behaves as wall whatever the choice.
//
// Gaps and overlaps are computed from the zone's UTC offsets, so that a
// 30-minute shift (Australia/Lord_Howe) or a midnight gap (America/Sao_Paulo
// in 2018) behave like any other change.
//
// An @every schedule counts real elapsed time from its anchor, unaffected by
// zones: anchored by WithAnchor at a, it fires at a+d, a+2d, ...; without an
// anchor, Next(t) is t+d. An @at schedule fires at its instant, and never if
// that instant has passed.
//
// # Performance and concurrency
//
// A Schedule is immutable and safe for concurrent use. Fields are bit sets,
// and Next and Prev skip whole years, months and days that cannot match, so
// their cost does not depend on how far away the next fire is measured in
// seconds. The changes of a zone's offset are tabulated once per
// *time.Location.
package schedule
