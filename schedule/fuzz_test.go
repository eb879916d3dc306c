package schedule

import (
	"errors"
	"testing"
	"time"
)

// FuzzParse checks that Parse never panics, that every error is a
// *ParseError naming a field, and that a parsed schedule's Next and Prev
// move in the right direction, under every daylight-saving choice (dst
// picks one) and with Prev the inverse of Next.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"* * * * *", "*/5 * * * * *", "0 0 9 * * MON-FRI", "0 0 13 * 5", "0 0 */2 * 1",
		"0 0 L * *", "0 0 L-3 * *", "0 0 15W * *", "0 0 LW * *", "0 0 * * 5L", "0 0 * * FRI#3",
		"0 0 0 29 2 ? 2000-2099/4", "0 0 29 2 *", "@yearly", "@every 90m", "@at 2030-01-01T00:00:00Z",
		"CRON_TZ=America/New_York 30 2 * * *", "TZ=Australia/Lord_Howe 0 15 2 * * *", "TZ=UTC",
		"0 0 30 2 *", "0 24 * * *", "0 0 * * FRU", "* * *", "@every 1ms", "@at nope", "@", "",
		"0 0 * * 7L", "0 0 1,L * *", "0 0 * * SUN#5", "1-2-3 * * * *", "*/0 * * * *", "? ? ? ? ? ?",
		"0 0 31W 5 *", "L-0 * * * *", "CRON_TZ=Pacific/Chatham @hourly", "0 0 0 1 1 * 2099",
	} {
		f.Add(s, int64(1767225600), uint8(0))
	}
	f.Add("CRON_TZ=America/New_York 30 2 * * *", int64(1772900000), uint8(DSTShift))
	f.Add("CRON_TZ=Europe/London 30 1 * * *", int64(1792800000), uint8(DSTBoth))
	f.Add("CRON_TZ=Antarctica/Troll 0 0 1,2 * * *", int64(1774700000), uint8(DSTSkipGap))
	f.Add("CRON_TZ=Australia/Lord_Howe 0 45 1 * * *", int64(1775300000), uint8(DSTWall))
	f.Fuzz(func(t *testing.T, spec string, at int64, dst uint8) {
		s, err := Parse(spec)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Field == "" || pe.Reason == "" {
				t.Fatalf("Parse(%q) error %v is not a complete *ParseError", spec, err)
			}
			return
		}
		d := DST(dst % uint8(len(dstNames)))
		s = WithDST(s, d)
		if IsFixedTime(s) && DSTOf(s) != d {
			t.Fatalf("%q: DSTOf(WithDST(%s)) = %s", spec, d, DSTOf(s))
		}
		// Keep instants inside the years 1 to 9999 most of the time, and
		// try the edges too.
		from := time.Unix(at%(300*365*86400)+1767225600, 0)
		for range 3 {
			n := s.Next(from)
			if n.IsZero() {
				break
			}
			if !n.After(from) {
				t.Fatalf("%q dst %s: Next(%v) = %v, not after", spec, d, from, n)
			}
			if p := s.Prev(n); !p.IsZero() && !p.Before(n) {
				t.Fatalf("%q dst %s: Prev(%v) = %v, not before", spec, d, n, p)
			} else if !p.IsZero() && !p.After(from) && !s.Next(p).Equal(n) {
				t.Fatalf("%q dst %s: Next(Prev(%v)) = %v", spec, d, n, s.Next(p))
			}
			from = n
		}
		for _, edge := range []time.Time{{}, time.Unix(at, 0), time.Unix(maxSec, 0)} {
			if n := s.Next(edge); !n.IsZero() && !n.After(edge) {
				t.Fatalf("%q: Next(%v) = %v, not after", spec, edge, n)
			}
			if p := s.Prev(edge); !p.IsZero() && !p.Before(edge) {
				t.Fatalf("%q: Prev(%v) = %v, not before", spec, edge, p)
			}
		}
	})
}
