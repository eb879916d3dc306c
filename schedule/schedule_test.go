package schedule

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func mustTime(t testing.TB, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("bad time %q: %v", s, err)
	}
	return tm
}

func mustLoc(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("LoadLocation(%q): %v", name, err)
	}
	return loc
}

func formatAll(ts []time.Time) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Format(time.RFC3339Nano)
	}
	return out
}

type nextCase struct {
	name string
	spec string
	from string
	want []string
}

// checkNext checks NextN against want, and that Prev walks the same fires
// backwards.
func checkNext(t *testing.T, s Schedule, from time.Time, want []string) {
	t.Helper()
	got := formatAll(NextN(s, from, len(want)+1))
	if len(got) > len(want) {
		got = got[:len(want)]
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("Next from %s:\n got %v\nwant %v", from.Format(time.RFC3339), got, want)
	}
	for i := 1; i < len(want); i++ {
		at := mustTime(t, want[i])
		if p := s.Prev(at).Format(time.RFC3339Nano); p != want[i-1] {
			t.Errorf("Prev(%s) = %s, want %s", want[i], p, want[i-1])
		}
	}
}

func TestNextSyntax(t *testing.T) {
	t.Parallel()
	const jan1 = "2026-01-01T00:00:00Z" // a Thursday
	tests := []nextCase{
		{"every second", "* * * * * *", jan1, []string{"2026-01-01T00:00:01Z", "2026-01-01T00:00:02Z", "2026-01-01T00:00:03Z"}},
		{"second step", "*/5 * * * * *", jan1, []string{"2026-01-01T00:00:05Z", "2026-01-01T00:00:10Z"}},
		{"minute step", "0 */15 * * * *", jan1, []string{"2026-01-01T00:15:00Z", "2026-01-01T00:30:00Z"}},
		{"five fields", "30 8 * * *", jan1, []string{"2026-01-01T08:30:00Z", "2026-01-02T08:30:00Z"}},
		{"weekdays", "0 0 9 * * MON-FRI", jan1, []string{"2026-01-01T09:00:00Z", "2026-01-02T09:00:00Z", "2026-01-05T09:00:00Z"}},
		{"list", "0 5,10,55 * * * *", jan1, []string{"2026-01-01T00:05:00Z", "2026-01-01T00:10:00Z", "2026-01-01T00:55:00Z", "2026-01-01T01:05:00Z"}},
		{"range", "0 0 1-3 * * *", jan1, []string{"2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z", "2026-01-01T03:00:00Z", "2026-01-02T01:00:00Z"}},
		{"range step", "0 10-40/15 0 * * *", jan1, []string{"2026-01-01T00:10:00Z", "2026-01-01T00:25:00Z", "2026-01-01T00:40:00Z", "2026-01-02T00:10:00Z"}},
		{"start step", "0 50/5 0 * * *", jan1, []string{"2026-01-01T00:50:00Z", "2026-01-01T00:55:00Z", "2026-01-02T00:50:00Z"}},
		{"month names any case", "0 0 0 1 jan,Mar *", jan1, []string{"2026-03-01T00:00:00Z", "2027-01-01T00:00:00Z"}},
		{"month range step", "0 0 1 */4 *", jan1, []string{"2026-05-01T00:00:00Z", "2026-09-01T00:00:00Z", "2027-01-01T00:00:00Z"}},
		{"weekday name", "0 0 0 * * sun", jan1, []string{"2026-01-04T00:00:00Z", "2026-01-11T00:00:00Z"}},
		{"sunday is 0", "0 0 * * 0", jan1, []string{"2026-01-04T00:00:00Z", "2026-01-11T00:00:00Z"}},
		{"sunday is 7", "0 0 * * 7", jan1, []string{"2026-01-04T00:00:00Z", "2026-01-11T00:00:00Z"}},
		{"range to sunday", "0 0 * * FRI-SUN", jan1, []string{"2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z", "2026-01-04T00:00:00Z", "2026-01-09T00:00:00Z"}},
		{"range to 7", "0 0 * * 5-7", jan1, []string{"2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z", "2026-01-04T00:00:00Z", "2026-01-09T00:00:00Z"}},
		{"question mark dom", "0 0 0 ? * MON", jan1, []string{"2026-01-05T00:00:00Z", "2026-01-12T00:00:00Z"}},
		{"question mark dow", "0 0 0 15 * ?", jan1, []string{"2026-01-15T00:00:00Z", "2026-02-15T00:00:00Z"}},
		{"vixie or", "0 0 13 * 5", jan1, []string{"2026-01-02T00:00:00Z", "2026-01-09T00:00:00Z", "2026-01-13T00:00:00Z", "2026-01-16T00:00:00Z"}},
		{"vixie and with star step", "0 0 */2 * 1", jan1, []string{"2026-01-05T00:00:00Z", "2026-01-19T00:00:00Z", "2026-02-09T00:00:00Z", "2026-02-23T00:00:00Z"}},
		{"vixie and with star dom", "0 0 * * 1", jan1, []string{"2026-01-05T00:00:00Z", "2026-01-12T00:00:00Z"}},
		{"vixie and with star dow", "0 0 1 * *", jan1, []string{"2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z"}},
		{"vixie and with star step dow", "0 0 1 * */7", jan1, []string{"2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z", "2026-11-01T00:00:00Z"}},
		{"month end 31", "0 0 31 * *", jan1, []string{"2026-01-31T00:00:00Z", "2026-03-31T00:00:00Z", "2026-05-31T00:00:00Z", "2026-07-31T00:00:00Z", "2026-08-31T00:00:00Z"}},
		{"month end 30", "0 0 30 * *", "2026-01-31T00:00:00Z", []string{"2026-03-30T00:00:00Z", "2026-04-30T00:00:00Z"}},
		{"leap day", "0 0 29 2 *", jan1, []string{"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"}},
		{"leap day over 2100", "0 0 29 2 *", "2096-03-01T00:00:00Z", []string{"2104-02-29T00:00:00Z", "2108-02-29T00:00:00Z"}},
		{"leap day 2000", "0 0 29 2 *", "1997-01-01T00:00:00Z", []string{"2000-02-29T00:00:00Z", "2004-02-29T00:00:00Z"}},
		{"last day", "0 0 L * *", jan1, []string{"2026-01-31T00:00:00Z", "2026-02-28T00:00:00Z", "2026-03-31T00:00:00Z", "2026-04-30T00:00:00Z"}},
		{"last day leap", "0 0 L 2 *", "2027-06-01T00:00:00Z", []string{"2028-02-29T00:00:00Z", "2029-02-28T00:00:00Z"}},
		{"last day minus", "0 0 L-2 * *", jan1, []string{"2026-01-29T00:00:00Z", "2026-02-26T00:00:00Z", "2026-03-29T00:00:00Z"}},
		{"last day list", "0 0 1,L * *", jan1, []string{"2026-01-31T00:00:00Z", "2026-02-01T00:00:00Z", "2026-02-28T00:00:00Z"}},
		{"nearest weekday", "0 0 15W * *", jan1, []string{"2026-01-15T00:00:00Z", "2026-02-16T00:00:00Z", "2026-03-16T00:00:00Z", "2026-04-15T00:00:00Z"}},
		{"nearest weekday saturday", "0 0 14W 2 *", jan1, []string{"2026-02-13T00:00:00Z"}},
		{"nearest weekday first saturday", "0 0 1W 8 *", jan1, []string{"2026-08-03T00:00:00Z"}},
		{"nearest weekday last sunday", "0 0 31W 5 *", jan1, []string{"2026-05-29T00:00:00Z"}},
		{"nearest weekday 31 skips short months", "0 0 31W * *", jan1, []string{"2026-01-30T00:00:00Z", "2026-03-31T00:00:00Z", "2026-05-29T00:00:00Z"}},
		{"last weekday", "0 0 LW * *", jan1, []string{"2026-01-30T00:00:00Z", "2026-02-27T00:00:00Z", "2026-03-31T00:00:00Z", "2026-04-30T00:00:00Z"}},
		{"last friday number", "0 0 * * 5L", jan1, []string{"2026-01-30T00:00:00Z", "2026-02-27T00:00:00Z", "2026-03-27T00:00:00Z"}},
		{"last friday name", "0 0 * * friL", jan1, []string{"2026-01-30T00:00:00Z", "2026-02-27T00:00:00Z", "2026-03-27T00:00:00Z"}},
		{"last sunday 7", "0 0 * * 7L", jan1, []string{"2026-01-25T00:00:00Z", "2026-02-22T00:00:00Z"}},
		{"third friday", "0 0 * * FRI#3", jan1, []string{"2026-01-16T00:00:00Z", "2026-02-20T00:00:00Z", "2026-03-20T00:00:00Z"}},
		{"fifth monday", "0 0 * * 1#5", jan1, []string{"2026-03-30T00:00:00Z", "2026-06-29T00:00:00Z", "2026-08-31T00:00:00Z"}},
		{"first and last", "0 0 * * 1#1,1L", jan1, []string{"2026-01-05T00:00:00Z", "2026-01-26T00:00:00Z", "2026-02-02T00:00:00Z", "2026-02-23T00:00:00Z"}},
		{"quartz dom or dow", "0 0 L * 1#1", jan1, []string{"2026-01-05T00:00:00Z", "2026-01-31T00:00:00Z", "2026-02-02T00:00:00Z"}},
		{"year list", "0 0 12 1 1 * 2027,2029", jan1, []string{"2027-01-01T12:00:00Z", "2029-01-01T12:00:00Z"}},
		{"year step", "0 0 0 1 1 * 2030-2099/20", jan1, []string{"2030-01-01T00:00:00Z", "2050-01-01T00:00:00Z", "2070-01-01T00:00:00Z", "2090-01-01T00:00:00Z"}},
		{"year star", "0 0 0 1 1 * *", "2098-06-01T00:00:00Z", []string{"2099-01-01T00:00:00Z"}},
		{"year leap friday", "0 0 0 29 2 ? 2000-2099", "2001-01-01T00:00:00Z", []string{"2004-02-29T00:00:00Z", "2008-02-29T00:00:00Z"}},
		{"yearly", "@yearly", jan1, []string{"2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z"}},
		{"annually", "@annually", jan1, []string{"2027-01-01T00:00:00Z"}},
		{"monthly", "@monthly", jan1, []string{"2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z"}},
		{"weekly", "@weekly", jan1, []string{"2026-01-04T00:00:00Z", "2026-01-11T00:00:00Z"}},
		{"daily", "@daily", jan1, []string{"2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z"}},
		{"midnight", "@MIDNIGHT", jan1, []string{"2026-01-02T00:00:00Z"}},
		{"hourly", "@hourly", jan1, []string{"2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z"}},
		{"minutely", "@minutely", jan1, []string{"2026-01-01T00:01:00Z", "2026-01-01T00:02:00Z"}},
		{"every unanchored", "@every 90m", jan1, []string{"2026-01-01T01:30:00Z", "2026-01-01T03:00:00Z"}},
		{"at", "@at 2026-06-01T12:00:00+02:00", jan1, []string{"2026-06-01T10:00:00Z"}},
		{"at in the past", "@at 2020-06-01T12:00:00Z", jan1, []string{}},
		{"tz prefix", "TZ=Asia/Kolkata 0 0 9 * * *", jan1, []string{"2026-01-01T09:00:00+05:30", "2026-01-02T09:00:00+05:30"}},
		{"cron_tz prefix", "CRON_TZ=America/New_York @daily", jan1, []string{"2026-01-01T00:00:00-05:00", "2026-01-02T00:00:00-05:00"}},
		{"tz prefix any case and tabs", "  cron_tz=Europe/London\t0 12 * * *  ", jan1, []string{"2026-01-01T12:00:00Z"}},
		{"sub-second start", "* * * * * *", "2026-01-01T00:00:00.5Z", []string{"2026-01-01T00:00:01Z", "2026-01-01T00:00:02Z"}},
		{"before 1970", "0 0 29 2 *", "1950-01-01T00:00:00Z", []string{"1952-02-29T00:00:00Z", "1956-02-29T00:00:00Z"}},
		{"year 9999 end", "@yearly", "9998-06-01T00:00:00Z", []string{"9999-01-01T00:00:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := Parse(tt.spec)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.spec, err)
			}
			checkNext(t, s, mustTime(t, tt.from), tt.want)
		})
	}
}

func TestPrevEnds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		spec, before, want string
	}{
		{"0 0 0 1 1 * 2027,2029", "2027-01-01T00:00:00Z", ""},
		{"0 0 0 1 1 * 2027,2029", "2027-01-01T00:00:00.1Z", "2027-01-01T00:00:00Z"},
		{"0 0 0 1 1 * 2027,2029", "2200-01-01T00:00:00Z", "2029-01-01T00:00:00Z"},
		{"* * * * * *", "2026-01-01T00:00:00.5Z", "2026-01-01T00:00:00Z"},
		{"* * * * * *", "2026-01-01T00:00:00Z", "2025-12-31T23:59:59Z"},
		{"0 0 29 2 *", "2026-01-01T00:00:00Z", "2024-02-29T00:00:00Z"},
		{"0 0 29 2 *", "0001-01-01T00:00:00Z", ""},
		{"@at 2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z", ""},
		{"@at 2026-01-01T00:00:00Z", "2026-01-01T00:00:01Z", "2026-01-01T00:00:00Z"},
		{"@every 1h", "2026-01-01T00:00:00Z", "2025-12-31T23:00:00Z"},
	}
	for _, tt := range tests {
		s, err := Parse(tt.spec)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tt.spec, err)
		}
		got := s.Prev(mustTime(t, tt.before))
		gs := ""
		if !got.IsZero() {
			gs = got.Format(time.RFC3339Nano)
		}
		if gs != tt.want {
			t.Errorf("%q.Prev(%s) = %q, want %q", tt.spec, tt.before, gs, tt.want)
		}
	}
}

func TestNextEnds(t *testing.T) {
	t.Parallel()
	for _, spec := range []string{"* * * * * *", "0 0 29 2 *", "@yearly", "0 0 0 1 1 * 2099"} {
		s := MustParse(spec)
		for _, from := range []time.Time{
			time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC),
			time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC),
			{},
			time.Unix(1<<62, 0),
			time.Unix(-1<<62, 0),
		} {
			got := s.Next(from)
			if !got.IsZero() && !got.After(from) {
				t.Errorf("%q.Next(%v) = %v, not after", spec, from, got)
			}
			if p := s.Prev(from); !p.IsZero() && !p.Before(from) {
				t.Errorf("%q.Prev(%v) = %v, not before", spec, from, p)
			}
		}
	}
	if got := MustParse("0 0 0 1 1 * 2099").Next(time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)); !got.IsZero() {
		t.Errorf("Next after the last year = %v, want zero", got)
	}
}

func TestEvery(t *testing.T) {
	t.Parallel()
	s := MustParse("@every 1h30m")
	anchor := mustTime(t, "2026-01-01T00:00:10Z")
	a := WithAnchor(s, anchor)
	tests := []struct{ after, next, prev string }{
		{"2025-01-01T00:00:00Z", "2026-01-01T01:30:10Z", ""},
		{"2026-01-01T00:00:10Z", "2026-01-01T01:30:10Z", ""},
		{"2026-01-01T01:30:10Z", "2026-01-01T03:00:10Z", ""},
		{"2026-01-01T01:30:11Z", "2026-01-01T03:00:10Z", "2026-01-01T01:30:10Z"},
		{"2026-01-02T00:00:00Z", "2026-01-02T00:00:10Z", "2026-01-01T22:30:10Z"},
		{"2126-01-02T00:00:00Z", "2126-01-02T00:00:10Z", "2126-01-01T22:30:10Z"},
		{"2426-01-02T00:00:00Z", "2426-01-02T00:00:10Z", "2426-01-01T22:30:10Z"},
		{"9426-01-02T00:00:00Z", "9426-01-02T00:00:10Z", "9426-01-01T22:30:10Z"},
	}
	for _, tt := range tests {
		at := mustTime(t, tt.after)
		if got := a.Next(at).Format(time.RFC3339); got != tt.next {
			t.Errorf("Next(%s) = %s, want %s", tt.after, got, tt.next)
		}
		got := a.Prev(at)
		gs := ""
		if !got.IsZero() {
			gs = got.Format(time.RFC3339)
		}
		if gs != tt.prev {
			t.Errorf("Prev(%s) = %q, want %q", tt.after, gs, tt.prev)
		}
	}
	// Elapsed time, not wall time: across a DST change the wall interval
	// differs from the duration.
	ny := MustParse("TZ=America/New_York @every 24h")
	ny = WithAnchor(ny, mustTime(t, "2026-03-07T12:00:00-05:00"))
	if got := ny.Next(mustTime(t, "2026-03-07T12:00:00-05:00")).Format(time.RFC3339); got != "2026-03-08T13:00:00-04:00" {
		t.Errorf("every 24h over spring forward = %s", got)
	}
	if d, ok := Interval(s); !ok || d != 90*time.Minute {
		t.Errorf("Interval = %v, %v", d, ok)
	}
	if _, ok := Anchor(s); ok {
		t.Error("unanchored schedule has an anchor")
	}
	if got, ok := Anchor(a); !ok || !got.Equal(anchor) {
		t.Errorf("Anchor = %v, %v", got, ok)
	}
	if WithAnchor(MustParse("@daily"), anchor).Next(anchor).Format(time.RFC3339) != "2026-01-02T00:00:00Z" {
		t.Error("WithAnchor changed a cron schedule")
	}
}

func TestKinds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		spec    string
		kind    Kind
		oneShot bool
		fixed   bool
		loc     string
	}{
		{"0 0 9 * * *", KindCron, false, true, "UTC"},
		{"30 2 * * *", KindCron, false, true, "UTC"},
		{"*/5 * * * * *", KindCron, false, false, "UTC"},
		{"0 * 9 * * *", KindCron, false, false, "UTC"},
		{"0 0 * * * *", KindCron, false, false, "UTC"},
		{"0 0-30 9 * * *", KindCron, false, true, "UTC"},
		{"@daily", KindCron, false, true, "UTC"},
		{"@hourly", KindCron, false, false, "UTC"},
		{"@minutely", KindCron, false, false, "UTC"},
		{"TZ=Europe/London @every 5m", KindEvery, false, false, "Europe/London"},
		{"CRON_TZ=Asia/Tokyo @at 2030-01-01T00:00:00Z", KindAt, true, false, "Asia/Tokyo"},
	}
	for _, tt := range tests {
		s := MustParse(tt.spec)
		if KindOf(s) != tt.kind || IsOneShot(s) != tt.oneShot || IsFixedTime(s) != tt.fixed || Location(s).String() != tt.loc {
			t.Errorf("%q: kind %v one-shot %v fixed %v loc %v; want %v %v %v %v", tt.spec,
				KindOf(s), IsOneShot(s), IsFixedTime(s), Location(s), tt.kind, tt.oneShot, tt.fixed, tt.loc)
		}
		if str, ok := s.(interface{ String() string }); !ok || str.String() != tt.spec {
			t.Errorf("%q: String() mismatch", tt.spec)
		}
	}
	if tm, ok := At(MustParse("@at 2030-01-01T00:00:00Z")); !ok || tm.Year() != 2030 {
		t.Errorf("At = %v, %v", tm, ok)
	}
	s, err := ParseInLocation("0 0 12 * * *", mustLoc(t, "Asia/Tokyo"))
	if err != nil || Location(s).String() != "Asia/Tokyo" {
		t.Fatalf("ParseInLocation: %v %v", s, err)
	}
	if got := s.Next(mustTime(t, "2026-01-01T00:00:00Z")).Format(time.RFC3339); got != "2026-01-01T12:00:00+09:00" {
		t.Errorf("ParseInLocation Next = %s", got)
	}
	if s, err := ParseInLocation("@daily", nil); err != nil || Location(s) != time.UTC {
		t.Errorf("nil location: %v %v", s, err)
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		spec, field, token, reason string
	}{
		{"", "spec", "", "empty spec"},
		{"   ", "spec", "   ", "empty spec"},
		{"* * *", "spec", "* * *", "has 3 fields"},
		{"* * * * * * * *", "spec", "* * * * * * * *", "has 8 fields"},
		{"60 * * * * *", "second", "60", "60 is out of range 0-59"},
		{"x * * * * *", "second", "x", `"x" is not a number`},
		{"? * * * * *", "second", "?", "only allowed in day-of-month and day-of-week"},
		{"*/0 * * * * *", "second", "0", "step 0 is out of range 1-60"},
		{"*/61 * * * * *", "second", "61", "step 61 is out of range 1-60"},
		{"*/ * * * * *", "second", "*/", "missing a number"},
		{"0 60 * * * *", "minute", "60", "60 is out of range 0-59"},
		{"0 1.5 * * * *", "minute", "1.5", "not a number"},
		{"0 24 * * *", "hour", "24", "24 is out of range 0-23"},
		{"0 5-1 * * *", "hour", "5-1", `range "5-1" starts after it ends`},
		{"0 -1 * * *", "hour", "-1", "missing a value"},
		{"0 1- * * *", "hour", "1-", "missing a value"},
		{"0 99999999999999999999 * * *", "hour", "99999999999999999999", "out of range 0-23"},
		{"0 MON * * *", "hour", "MON", `"MON" is not a number`},
		{"0 0 0 * *", "day-of-month", "0", "0 is out of range 1-31"},
		{"0 0 32 * *", "day-of-month", "32", "32 is out of range 1-31"},
		{"0 0 1,,2 * *", "day-of-month", "1,,2", "empty list element"},
		{"0 0 L-31 * *", "day-of-month", "31", "offset from the last day 31 is out of range 0-30"},
		{"0 0 32W * *", "day-of-month", "32", "day 32 is out of range 1-31"},
		{"0 0 0W * *", "day-of-month", "0", "day 0 is out of range 1-31"},
		{"0 0 LX * *", "day-of-month", "LX", "not a valid day-of-month"},
		{"0 0 W * *", "day-of-month", "W", "not a valid day-of-month"},
		{"0 0 1#2 * *", "day-of-month", "1#2", "not a valid day-of-month"},
		{"0 0 * 0 *", "month", "0", "0 is out of range 1-12"},
		{"0 0 * 13 *", "month", "13", "13 is out of range 1-12"},
		{"0 0 * JANUARY *", "month", "JANUARY", `unknown name "JANUARY"`},
		{"0 0 * DEC-JAN *", "month", "DEC-JAN", "starts after it ends"},
		{"0 0 * * 8", "day-of-week", "8", "8 is out of range 0-7"},
		{"0 0 * * FRU", "day-of-week", "FRU", `unknown name "FRU"`},
		{"0 0 * * L", "day-of-week", "L", "needs a weekday"},
		{"0 0 * * 9L", "day-of-week", "9", "9 is out of range 0-7"},
		{"0 0 * * XYZL", "day-of-week", "XYZ", `unknown name "XYZ"`},
		{"0 0 * * 5#6", "day-of-week", "6", "week of the month 6 is out of range 1-5"},
		{"0 0 * * 5#0", "day-of-week", "0", "week of the month 0 is out of range 1-5"},
		{"0 0 * * FRU#1", "day-of-week", "FRU", `unknown name "FRU"`},
		{"0 0 * * MON-", "day-of-week", "MON-", "missing a value"},
		{"0 0 0 1 1 * 1969", "year", "1969", "1969 is out of range 1970-2099"},
		{"0 0 0 1 1 * 2100", "year", "2100", "2100 is out of range 1970-2099"},
		{"0 0 0 1 1 * 2030-2020", "year", "2030-2020", "starts after it ends"},
		{"0 0 30 2 *", "spec", "0 0 30 2 *", `"0 0 30 2 *" never fires`},
		{"0 0 31 4 *", "spec", "0 0 31 4 *", "never fires"},
		{"0 0 31 2,4,6,9,11 *", "spec", "0 0 31 2,4,6,9,11 *", "never fires"},
		{"0 0 0 29 2 * 2097-2099", "spec", "0 0 0 29 2 * 2097-2099", `year "2097-2099"`},
		{"0 0 0 * 2 FRI#5 2025-2027", "spec", "0 0 0 * 2 FRI#5 2025-2027", "never fires"},
		{"0 0 30W 2 *", "spec", "0 0 30W 2 *", "never fires"},
		{"TZ=UTC", "spec", "TZ=UTC", "no schedule after TZ=UTC"},
		{"CRON_TZ=Europe/Paris   ", "spec", "CRON_TZ=Europe/Paris   ", "no schedule after"},
		{"CRON_TZ=Nope/Nope 0 0 * * *", "timezone", "Nope/Nope", `unknown time zone "Nope/Nope"`},
		{"TZ=Local @daily", "timezone", "Local", "not an IANA time zone name"},
		{"TZ= @daily", "timezone", "", "not an IANA time zone name"},
		{"TZ=../../etc/passwd @daily", "timezone", "../../etc/passwd", "unknown time zone"},
		{"@every", "every", "@every", "want @every followed by one Go duration"},
		{"@every 1h 2h", "every", "@every 1h 2h", "want @every followed by one"},
		{"@every abc", "every", "abc", `"abc" is not a Go duration`},
		{"@every 500ms", "every", "500ms", "500ms is shorter than the minimum of 1s"},
		{"@every -1h", "every", "-1h", "shorter than the minimum"},
		{"@at", "at", "@at", "want @at followed by one RFC 3339 time"},
		{"@at tomorrow", "at", "tomorrow", `"tomorrow" is not an RFC 3339 time`},
		{"@at 2026-01-01 00:00:00", "at", "@at 2026-01-01 00:00:00", "want @at followed by one"},
		{"@fortnightly", "spec", "@fortnightly", `unknown descriptor "@fortnightly"`},
		{"@daily 5", "spec", "5", `unexpected "5" after @daily`},
		{"@", "spec", "@", "unknown descriptor"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			t.Parallel()
			s, err := Parse(tt.spec)
			if err == nil {
				t.Fatalf("Parse(%q) = %v, want an error", tt.spec, s)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse(%q) error %T %v, want *ParseError", tt.spec, err, err)
			}
			if pe.Field != tt.field || pe.Token != tt.token || !strings.Contains(pe.Reason, tt.reason) {
				t.Errorf("Parse(%q) = {Field %q, Token %q, Reason %q}, want {%q, %q, ...%q...}",
					tt.spec, pe.Field, pe.Token, pe.Reason, tt.field, tt.token, tt.reason)
			}
			if want := pe.Field + ": "; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("Error() = %q, want prefix %q", err.Error(), want)
			}
			if strings.TrimSpace(pe.Token) != "" && !strings.Contains(err.Error(), strings.TrimSpace(pe.Token)) {
				t.Errorf("Error() = %q does not name the token %q", err.Error(), pe.Token)
			}
		})
	}
}

func TestMustParsePanics(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Error("MustParse of a bad spec did not panic")
		}
	}()
	MustParse("bad")
}

func TestNextNCount(t *testing.T) {
	t.Parallel()
	s := MustParse("@hourly")
	from := mustTime(t, "2026-01-01T00:00:00Z")
	if got := NextN(s, from, 0); got != nil {
		t.Errorf("NextN(0) = %v", got)
	}
	if got := NextN(s, from, 100); len(got) != 100 || got[99].Format(time.RFC3339) != "2026-01-05T04:00:00Z" {
		t.Errorf("NextN(100) has %d, last %v", len(got), got[len(got)-1])
	}
}

func TestMinInterval(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		spec string
		want time.Duration
	}{
		{"* * * * * *", time.Second},
		{"*/5 * * * *", 5 * time.Minute},
		{"0 0,45 9 * * *", 45 * time.Minute},
		{"0 0 23,1 * * *", 2 * time.Hour},
		{"@daily", 24 * time.Hour},
		{"CRON_TZ=America/New_York 30 2 * * *", 24 * time.Hour},
		{"0 0 9 * * MON-FRI", 24 * time.Hour},
		{"0 0 9 * * MON", 7 * 24 * time.Hour},
		{"0 0 13 * 5", 24 * time.Hour}, // the 13th or a Friday: Thursday 13th, Friday 14th
		{"0 0 L * *", 28 * 24 * time.Hour},
		{"@yearly", 365 * 24 * time.Hour},
		{"@every 90s", 90 * time.Second},
		{"@at 2030-01-01T00:00:00Z", 0},
		{"0 0 12 1 1 * 2050", 0},
	} {
		s, err := Parse(c.spec)
		if err != nil {
			t.Fatal(err)
		}
		if got := MinInterval(s); got != c.want {
			t.Errorf("MinInterval(%q) = %s, want %s", c.spec, got, c.want)
		}
	}
}
