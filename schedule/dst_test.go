package schedule

import (
	"errors"
	"testing"
	"time"
)

// TestDaylightSaving checks the daylight-saving contract: a fixed-time spec
// fires once at the end of a gap and once, at the earlier instant, in an
// overlap; a wildcard spec skips the gap and fires twice in an overlap.
func TestDaylightSaving(t *testing.T) {
	t.Parallel()
	tests := []struct {
		zone string
		nextCase
	}{
		// America/New_York 2026: 02:00 EST -> 03:00 EDT on Mar 8,
		// 02:00 EDT -> 01:00 EST on Nov 1.
		{"America/New_York", nextCase{"gap fixed", "0 30 2 * * *", "2026-03-07T12:00:00Z",
			[]string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"}}},
		{"America/New_York", nextCase{"gap fixed five fields", "30 2 * * *", "2026-03-07T12:00:00Z",
			[]string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"}}},
		{"America/New_York", nextCase{"gap several wall times fire once", "0 0,15,30,45 2 * * *", "2026-03-08T00:00:00-05:00",
			[]string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:00:00-04:00", "2026-03-09T02:15:00-04:00"}}},
		{"America/New_York", nextCase{"gap and real time on the same instant", "0 0,30 2,3 * * *", "2026-03-08T00:00:00-05:00",
			[]string{"2026-03-08T03:00:00-04:00", "2026-03-08T03:30:00-04:00", "2026-03-09T02:00:00-04:00"}}},
		{"America/New_York", nextCase{"gap wildcard minutes", "0 */30 * * * *", "2026-03-08T01:00:00-05:00",
			[]string{"2026-03-08T01:30:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T03:30:00-04:00"}}},
		{"America/New_York", nextCase{"gap wildcard seconds", "* * 2 * * *", "2026-03-08T00:00:00-05:00",
			[]string{"2026-03-09T02:00:00-04:00", "2026-03-09T02:00:01-04:00"}}},
		{"America/New_York", nextCase{"gap hourly", "@hourly", "2026-03-08T00:30:00-05:00",
			[]string{"2026-03-08T01:00:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T04:00:00-04:00"}}},
		{"America/New_York", nextCase{"overlap fixed", "0 30 1 * * *", "2026-10-31T12:00:00Z",
			[]string{"2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"}}},
		{"America/New_York", nextCase{"overlap fixed from between", "0 30 1 * * *", "2026-11-01T01:45:00-04:00",
			[]string{"2026-11-02T01:30:00-05:00"}}},
		{"America/New_York", nextCase{"overlap fixed from second pass", "0 30 1 * * *", "2026-11-01T01:10:00-05:00",
			[]string{"2026-11-02T01:30:00-05:00"}}},
		{"America/New_York", nextCase{"overlap wildcard", "0 */30 1 * * *", "2026-10-31T12:00:00Z",
			[]string{"2026-11-01T01:00:00-04:00", "2026-11-01T01:30:00-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T01:30:00-05:00", "2026-11-02T01:00:00-05:00"}}},
		{"America/New_York", nextCase{"overlap hourly", "@hourly", "2026-11-01T00:30:00-04:00",
			[]string{"2026-11-01T01:00:00-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T02:00:00-05:00"}}},
		{"America/New_York", nextCase{"daily unaffected", "@daily", "2026-03-07T12:00:00Z",
			[]string{"2026-03-08T00:00:00-05:00", "2026-03-09T00:00:00-04:00"}}},

		// Europe/London 2026: 01:00 GMT -> 02:00 BST on Mar 29,
		// 02:00 BST -> 01:00 GMT on Oct 25.
		{"Europe/London", nextCase{"gap fixed", "0 30 1 * * *", "2026-03-28T12:00:00Z",
			[]string{"2026-03-29T02:00:00+01:00", "2026-03-30T01:30:00+01:00"}}},
		{"Europe/London", nextCase{"gap wildcard", "0 0,30 * * * *", "2026-03-29T00:15:00Z",
			[]string{"2026-03-29T00:30:00Z", "2026-03-29T02:00:00+01:00", "2026-03-29T02:30:00+01:00"}}},
		{"Europe/London", nextCase{"overlap fixed", "0 30 1 * * *", "2026-10-24T12:00:00Z",
			[]string{"2026-10-25T01:30:00+01:00", "2026-10-26T01:30:00Z"}}},
		{"Europe/London", nextCase{"overlap wildcard", "0 15 * * * *", "2026-10-25T00:00:00+01:00",
			[]string{"2026-10-25T00:15:00+01:00", "2026-10-25T01:15:00+01:00", "2026-10-25T01:15:00Z", "2026-10-25T02:15:00Z"}}},

		// Australia/Lord_Howe: a 30-minute shift, 02:00 -> 02:30 (+11) on
		// 2026-10-04, 02:00 -> 01:30 (+10:30) on 2026-04-05.
		{"Australia/Lord_Howe", nextCase{"gap fixed", "0 15 2 * * *", "2026-10-03T00:00:00Z",
			[]string{"2026-10-04T02:30:00+11:00", "2026-10-05T02:15:00+11:00"}}},
		{"Australia/Lord_Howe", nextCase{"gap wildcard", "0 */10 2 * * *", "2026-10-04T01:55:00+10:30",
			[]string{"2026-10-04T02:30:00+11:00", "2026-10-04T02:40:00+11:00", "2026-10-04T02:50:00+11:00", "2026-10-05T02:00:00+11:00"}}},
		{"Australia/Lord_Howe", nextCase{"overlap fixed", "0 45 1 * * *", "2026-04-04T12:00:00Z",
			[]string{"2026-04-05T01:45:00+11:00", "2026-04-06T01:45:00+10:30"}}},
		{"Australia/Lord_Howe", nextCase{"overlap wildcard", "0 45 * * * *", "2026-04-05T01:00:00+11:00",
			[]string{"2026-04-05T01:45:00+11:00", "2026-04-05T01:45:00+10:30", "2026-04-05T02:45:00+10:30"}}},

		// America/Sao_Paulo 2018: midnight does not exist on 2018-11-04
		// (00:00 -03 -> 01:00 -02); 23:00-24:00 repeats on 2019-02-16.
		{"America/Sao_Paulo", nextCase{"midnight gap daily", "@daily", "2018-11-03T12:00:00-03:00",
			[]string{"2018-11-04T01:00:00-02:00", "2018-11-05T00:00:00-02:00"}}},
		{"America/Sao_Paulo", nextCase{"midnight gap fixed", "0 30 0 * * *", "2018-11-03T12:00:00-03:00",
			[]string{"2018-11-04T01:00:00-02:00", "2018-11-05T00:30:00-02:00"}}},
		{"America/Sao_Paulo", nextCase{"midnight gap wildcard", "0 */30 * * * *", "2018-11-03T23:00:00-03:00",
			[]string{"2018-11-03T23:30:00-03:00", "2018-11-04T01:00:00-02:00", "2018-11-04T01:30:00-02:00"}}},
		{"America/Sao_Paulo", nextCase{"midnight gap dom", "0 0 0 4 11 ?", "2018-01-01T00:00:00-02:00",
			[]string{"2018-11-04T01:00:00-02:00", "2019-11-04T00:00:00-03:00"}}},
		{"America/Sao_Paulo", nextCase{"overlap fixed", "0 30 23 * * *", "2019-02-16T12:00:00-02:00",
			[]string{"2019-02-16T23:30:00-02:00", "2019-02-17T23:30:00-03:00"}}},
		{"America/Sao_Paulo", nextCase{"overlap wildcard", "0 30 * * * *", "2019-02-16T22:00:00-02:00",
			[]string{"2019-02-16T22:30:00-02:00", "2019-02-16T23:30:00-02:00", "2019-02-16T23:30:00-03:00", "2019-02-17T00:30:00-03:00"}}},
		{"America/Sao_Paulo", nextCase{"daily after overlap", "@daily", "2019-02-16T12:00:00-02:00",
			[]string{"2019-02-17T00:00:00-03:00", "2019-02-18T00:00:00-03:00"}}},

		// Pacific/Chatham: +12:45 and +13:45; 02:45 -> 03:45 on
		// 2026-09-27, 03:45 -> 02:45 on 2026-04-05.
		{"Pacific/Chatham", nextCase{"gap fixed", "0 0 3 * * *", "2026-09-26T00:00:00Z",
			[]string{"2026-09-27T03:45:00+13:45", "2026-09-28T03:00:00+13:45"}}},
		{"Pacific/Chatham", nextCase{"gap wildcard", "0 0 * * * *", "2026-09-27T01:30:00+12:45",
			[]string{"2026-09-27T02:00:00+12:45", "2026-09-27T04:00:00+13:45"}}},
		{"Pacific/Chatham", nextCase{"overlap fixed", "0 0 3 * * *", "2026-04-04T00:00:00Z",
			[]string{"2026-04-05T03:00:00+13:45", "2026-04-06T03:00:00+12:45"}}},
		{"Pacific/Chatham", nextCase{"overlap wildcard", "0 0 * * * *", "2026-04-05T02:30:00+13:45",
			[]string{"2026-04-05T03:00:00+13:45", "2026-04-05T03:00:00+12:45", "2026-04-05T04:00:00+12:45"}}},

		// Antarctica/Troll: a two-hour shift, 01:00 +00 -> 03:00 +02 on
		// 2026-03-29.
		{"Antarctica/Troll", nextCase{"two-hour gap fixed", "0 0 1,2 * * *", "2026-03-28T12:00:00Z",
			[]string{"2026-03-29T03:00:00+02:00", "2026-03-30T01:00:00+02:00"}}},
	}
	for _, tt := range tests {
		t.Run(tt.zone+"/"+tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := ParseInLocation(tt.spec, mustLoc(t, tt.zone))
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.spec, err)
			}
			checkNext(t, s, mustTime(t, tt.from), tt.want)
			// The same spec with a CRON_TZ prefix behaves the same.
			s2, err := Parse("CRON_TZ=" + tt.zone + " " + tt.spec)
			if err != nil {
				t.Fatalf("Parse with prefix: %v", err)
			}
			checkNext(t, s2, mustTime(t, tt.from), tt.want)
		})
	}
}

// TestDaylightSavingDateNormalisation documents why the engine does not use
// time.Date for gaps: it normalises a wall time in a gap backwards in
// São Paulo and forwards at Lord Howe.
func TestDaylightSavingDateNormalisation(t *testing.T) {
	t.Parallel()
	sp := time.Date(2018, 11, 4, 0, 0, 0, 0, mustLoc(t, "America/Sao_Paulo"))
	lh := time.Date(2026, 10, 4, 2, 15, 0, 0, mustLoc(t, "Australia/Lord_Howe"))
	t.Logf("time.Date: São Paulo midnight gap -> %v, Lord Howe 02:15 gap -> %v", sp, lh)
	for _, c := range []struct{ zone, spec, from, want string }{
		{"America/Sao_Paulo", "0 0 0 4 11 ? 2018", "2018-11-01T00:00:00Z", "2018-11-04T01:00:00-02:00"},
		{"Australia/Lord_Howe", "0 15 2 4 10 ? 2026", "2026-10-01T00:00:00Z", "2026-10-04T02:30:00+11:00"},
	} {
		s, err := ParseInLocation(c.spec, mustLoc(t, c.zone))
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Next(mustTime(t, c.from)).Format(time.RFC3339); got != c.want {
			t.Errorf("%s %q: Next = %s, want %s", c.zone, c.spec, got, c.want)
		}
	}
}

// nthSunday returns the day of month of the n-th Sunday of month m of y.
func nthSunday(y int, m time.Month, n int) int {
	first := time.Date(y, m, 1, 0, 0, 0, 0, time.UTC).Weekday()
	return 1 + (7-int(first))%7 + 7*(n-1)
}

// TestDaylightSavingRuleYears checks the US rule (second Sunday of March,
// first Sunday of November) in New York inside and beyond the years the zone
// table covers, and around December 31 of leap years, where
// time.Time.ZoneBounds is off by a day.
func TestDaylightSavingRuleYears(t *testing.T) {
	t.Parallel()
	ny := mustLoc(t, "America/New_York")
	fixed, err := ParseInLocation("0 30 2 * * *", ny)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseInLocation("0 30 1 * * *", ny)
	if err != nil {
		t.Fatal(err)
	}
	wild, err := ParseInLocation("0 */30 1 * * *", ny)
	if err != nil {
		t.Fatal(err)
	}
	for _, y := range []int{2026, 2040, 2199, 2200, 2201, 2300, 2400, 2999} {
		mar, nov := nthSunday(y, time.March, 2), nthSunday(y, time.November, 1)
		ts := func(m time.Month, d, h, min int, off string) string {
			return time.Date(y, m, d, h, min, 0, 0, time.UTC).Format("2006-01-02T15:04:05") + off
		}
		checkNext(t, fixed, time.Date(y, time.March, mar-1, 12, 0, 0, 0, ny), []string{
			ts(time.March, mar, 3, 0, "-04:00"), ts(time.March, mar+1, 2, 30, "-04:00")})
		checkNext(t, back, time.Date(y, time.November, nov-1, 12, 0, 0, 0, ny), []string{
			ts(time.November, nov, 1, 30, "-04:00"), ts(time.November, nov+1, 1, 30, "-05:00")})
		checkNext(t, wild, time.Date(y, time.November, nov-1, 12, 0, 0, 0, ny), []string{
			ts(time.November, nov, 1, 0, "-04:00"), ts(time.November, nov, 1, 30, "-04:00"),
			ts(time.November, nov, 1, 0, "-05:00"), ts(time.November, nov, 1, 30, "-05:00")})
	}
	for _, zone := range []string{"America/St_Johns", "America/New_York", "Australia/Lord_Howe"} {
		loc := mustLoc(t, zone)
		hourly, err := ParseInLocation("@hourly", loc)
		if err != nil {
			t.Fatal(err)
		}
		for _, y := range []int{2040, 2240} {
			from := time.Date(y, 12, 30, 20, 0, 0, 0, time.UTC)
			got := NextN(hourly, from, 60)
			for i, g := range got {
				if g.Minute() != 0 || g.Second() != 0 {
					t.Fatalf("%s: @hourly fire %d = %v", zone, i, g)
				}
				if i > 0 && g.Sub(got[i-1]) != time.Hour {
					t.Fatalf("%s: @hourly fires %v then %v", zone, got[i-1], g)
				}
			}
		}
	}
}

// TestZoneTable checks the tabulated segments against the time package.
func TestZoneTable(t *testing.T) {
	t.Parallel()
	for _, zone := range append(propertyZones, "Europe/Dublin", "Asia/Tokyo", "Etc/GMT+5") {
		loc := mustLoc(t, zone)
		z := buildTable(loc)
		for i := range 2000 {
			s := time.Date(1790+i/4, time.Month(1+i%12), 1+i%28, i%24, 0, 0, 0, time.UTC).Unix()
			seg := z.segmentAt(s)
			if seg.start > s || seg.end <= s {
				t.Fatalf("%s: segment [%d, %d) does not contain %d", zone, seg.start, seg.end, s)
			}
			if off := int64(offsetAt(loc, s)); off != seg.off {
				t.Fatalf("%s at %v: offset %d, segment says %d", zone, time.Unix(s, 0).UTC(), off, seg.off)
			}
			if seg.start > farPast {
				if off := int64(offsetAt(loc, seg.start)); off != seg.off {
					t.Fatalf("%s: offset at segment start %d, want %d", zone, off, seg.off)
				}
				if off := int64(offsetAt(loc, seg.start-1)); off != seg.prevOff {
					t.Fatalf("%s: offset before segment start %d, want %d", zone, off, seg.prevOff)
				}
			}
			if seg.end < farFuture {
				if off := int64(offsetAt(loc, seg.end-1)); off != seg.off {
					t.Fatalf("%s: offset at segment end %d, want %d", zone, off, seg.off)
				}
			}
			if seg.off < z.offMin || seg.off > z.offMax {
				t.Fatalf("%s: offset %d outside bounds [%d, %d]", zone, seg.off, z.offMin, z.offMax)
			}
		}
	}
}

// TestDaylightSavingChoices checks each DST choice in every zone that
// TestDaylightSaving covers, on a gap and on an overlap: Next, and Prev
// walking the same fires back (checkNext).
func TestDaylightSavingChoices(t *testing.T) {
	t.Parallel()
	type choiceCase struct {
		zone, name, spec, from string
		want                   map[DST][]string
	}
	// gap: DSTBoth behaves as DSTDefault, DSTWall as DSTSkipGap.
	gap := func(zone, name, spec, from string, def, shift, skip []string) choiceCase {
		return choiceCase{zone, name, spec, from, map[DST][]string{
			DSTDefault: def, DSTBoth: def, DSTShift: shift, DSTSkipGap: skip, DSTWall: skip}}
	}
	// overlap: DSTBoth and DSTWall fire twice, the others once.
	overlap := func(zone, name, spec, from string, first, both []string) choiceCase {
		return choiceCase{zone, name, spec, from, map[DST][]string{
			DSTDefault: first, DSTShift: first, DSTSkipGap: first, DSTBoth: both, DSTWall: both}}
	}
	l := func(s ...string) []string { return s }
	tests := []choiceCase{
		gap("America/New_York", "gap", "0 30 2 * * *", "2026-03-07T12:00:00Z",
			l("2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"),
			l("2026-03-08T03:30:00-04:00", "2026-03-09T02:30:00-04:00"),
			l("2026-03-09T02:30:00-04:00", "2026-03-10T02:30:00-04:00")),
		gap("America/New_York", "gap several wall times", "0 0,15,30,45 2 * * *", "2026-03-08T00:00:00-05:00",
			l("2026-03-08T03:00:00-04:00", "2026-03-09T02:00:00-04:00"),
			l("2026-03-08T03:00:00-04:00", "2026-03-08T03:15:00-04:00", "2026-03-08T03:30:00-04:00", "2026-03-08T03:45:00-04:00", "2026-03-09T02:00:00-04:00"),
			l("2026-03-09T02:00:00-04:00", "2026-03-09T02:15:00-04:00")),
		gap("America/New_York", "gap shifted onto real times", "0 0,30 2,3 * * *", "2026-03-08T00:00:00-05:00",
			l("2026-03-08T03:00:00-04:00", "2026-03-08T03:30:00-04:00", "2026-03-09T02:00:00-04:00"),
			l("2026-03-08T03:00:00-04:00", "2026-03-08T03:30:00-04:00", "2026-03-09T02:00:00-04:00"),
			l("2026-03-08T03:00:00-04:00", "2026-03-08T03:30:00-04:00", "2026-03-09T02:00:00-04:00")),
		overlap("America/New_York", "overlap", "0 30 1 * * *", "2026-10-31T12:00:00Z",
			l("2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"),
			l("2026-11-01T01:30:00-04:00", "2026-11-01T01:30:00-05:00", "2026-11-02T01:30:00-05:00")),
		overlap("America/New_York", "overlap from between", "0 30 1 * * *", "2026-11-01T01:45:00-04:00",
			l("2026-11-02T01:30:00-05:00"),
			l("2026-11-01T01:30:00-05:00", "2026-11-02T01:30:00-05:00")),

		gap("Europe/London", "gap", "0 30 1 * * *", "2026-03-28T12:00:00Z",
			l("2026-03-29T02:00:00+01:00", "2026-03-30T01:30:00+01:00"),
			l("2026-03-29T02:30:00+01:00", "2026-03-30T01:30:00+01:00"),
			l("2026-03-30T01:30:00+01:00", "2026-03-31T01:30:00+01:00")),
		overlap("Europe/London", "overlap", "0 30 1 * * *", "2026-10-24T12:00:00Z",
			l("2026-10-25T01:30:00+01:00", "2026-10-26T01:30:00Z"),
			l("2026-10-25T01:30:00+01:00", "2026-10-25T01:30:00Z", "2026-10-26T01:30:00Z")),

		gap("Australia/Lord_Howe", "30-minute gap", "0 15 2 * * *", "2026-10-03T00:00:00Z",
			l("2026-10-04T02:30:00+11:00", "2026-10-05T02:15:00+11:00"),
			l("2026-10-04T02:45:00+11:00", "2026-10-05T02:15:00+11:00"),
			l("2026-10-05T02:15:00+11:00", "2026-10-06T02:15:00+11:00")),
		overlap("Australia/Lord_Howe", "30-minute overlap", "0 45 1 * * *", "2026-04-04T12:00:00Z",
			l("2026-04-05T01:45:00+11:00", "2026-04-06T01:45:00+10:30"),
			l("2026-04-05T01:45:00+11:00", "2026-04-05T01:45:00+10:30", "2026-04-06T01:45:00+10:30")),

		gap("America/Sao_Paulo", "midnight gap", "0 30 0 * * *", "2018-11-03T12:00:00-03:00",
			l("2018-11-04T01:00:00-02:00", "2018-11-05T00:30:00-02:00"),
			l("2018-11-04T01:30:00-02:00", "2018-11-05T00:30:00-02:00"),
			l("2018-11-05T00:30:00-02:00", "2018-11-06T00:30:00-02:00")),
		gap("America/Sao_Paulo", "midnight gap daily", "@daily", "2018-11-03T12:00:00-03:00",
			l("2018-11-04T01:00:00-02:00", "2018-11-05T00:00:00-02:00"),
			l("2018-11-04T01:00:00-02:00", "2018-11-05T00:00:00-02:00"),
			l("2018-11-05T00:00:00-02:00", "2018-11-06T00:00:00-02:00")),
		overlap("America/Sao_Paulo", "overlap", "0 30 23 * * *", "2019-02-16T12:00:00-02:00",
			l("2019-02-16T23:30:00-02:00", "2019-02-17T23:30:00-03:00"),
			l("2019-02-16T23:30:00-02:00", "2019-02-16T23:30:00-03:00", "2019-02-17T23:30:00-03:00")),

		gap("Pacific/Chatham", "gap", "0 0 3 * * *", "2026-09-26T00:00:00Z",
			l("2026-09-27T03:45:00+13:45", "2026-09-28T03:00:00+13:45"),
			l("2026-09-27T04:00:00+13:45", "2026-09-28T03:00:00+13:45"),
			l("2026-09-28T03:00:00+13:45", "2026-09-29T03:00:00+13:45")),
		overlap("Pacific/Chatham", "overlap", "0 0 3 * * *", "2026-04-04T00:00:00Z",
			l("2026-04-05T03:00:00+13:45", "2026-04-06T03:00:00+12:45"),
			l("2026-04-05T03:00:00+13:45", "2026-04-05T03:00:00+12:45", "2026-04-06T03:00:00+12:45")),

		gap("Antarctica/Troll", "two-hour gap", "0 0 1,2 * * *", "2026-03-28T12:00:00Z",
			l("2026-03-29T03:00:00+02:00", "2026-03-30T01:00:00+02:00"),
			l("2026-03-29T03:00:00+02:00", "2026-03-29T04:00:00+02:00", "2026-03-30T01:00:00+02:00"),
			l("2026-03-30T01:00:00+02:00", "2026-03-30T02:00:00+02:00")),
		overlap("Antarctica/Troll", "two-hour overlap", "0 30 1 * * *", "2026-10-24T12:00:00Z",
			l("2026-10-25T01:30:00+02:00", "2026-10-26T01:30:00Z"),
			l("2026-10-25T01:30:00+02:00", "2026-10-25T01:30:00Z", "2026-10-26T01:30:00Z")),
	}
	for _, tt := range tests {
		for _, d := range []DST{DSTDefault, DSTShift, DSTSkipGap, DSTBoth, DSTWall} {
			t.Run(tt.zone+"/"+tt.name+"/"+d.String(), func(t *testing.T) {
				t.Parallel()
				s, err := ParseInLocation(tt.spec, mustLoc(t, tt.zone))
				if err != nil {
					t.Fatalf("Parse(%q): %v", tt.spec, err)
				}
				s = WithDST(s, d)
				if DSTOf(s) != d {
					t.Fatalf("DSTOf = %s, want %s", DSTOf(s), d)
				}
				checkNext(t, s, mustTime(t, tt.from), tt.want[d])
			})
		}
	}
}

// TestDaylightSavingChoicesWildcard checks that a wildcard spec has no
// choice: every DST choice leaves it as it is, firing at every real instant
// whose wall time matches.
func TestDaylightSavingChoicesWildcard(t *testing.T) {
	t.Parallel()
	ny := mustLoc(t, "America/New_York")
	for _, c := range []struct{ spec, from string }{
		{"0 */30 * * * *", "2026-03-08T01:00:00-05:00"},
		{"0 */30 1 * * *", "2026-10-31T12:00:00Z"},
	} {
		s, err := ParseInLocation(c.spec, ny)
		if err != nil {
			t.Fatal(err)
		}
		want := formatAll(NextN(s, mustTime(t, c.from), 6))
		for _, d := range []DST{DSTShift, DSTSkipGap, DSTBoth, DSTWall} {
			w := WithDST(s, d)
			if DSTOf(w) != DSTDefault {
				t.Errorf("%q: WithDST(%s) changed a wildcard spec", c.spec, d)
			}
			checkNext(t, w, mustTime(t, c.from), want)
		}
	}
}

func TestParseDST(t *testing.T) {
	t.Parallel()
	for i, name := range DSTNames() {
		d, err := ParseDST(name)
		if err != nil || d != DST(i) || d.String() != name {
			t.Errorf("ParseDST(%q) = %v, %v", name, d, err)
		}
	}
	if d, err := ParseDST(""); err != nil || d != DSTDefault {
		t.Errorf(`ParseDST("") = %v, %v`, d, err)
	}
	_, err := ParseDST("Both")
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Field != "dst" || pe.Reason != `must be one of default, shift, skip_gap, both, wall, got "Both"` {
		t.Errorf(`ParseDST("Both") error = %v`, err)
	}
}
