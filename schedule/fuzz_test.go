package schedule

import (
	"errors"
	"testing"
	"time"
)

// FuzzParse checks that Parse never panics, that every error is a
// *ParseError naming a field, and that a parsed schedule's Next and Prev
// move in the right direction.
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
		f.Add(s, int64(1767225600))
	}
	f.Fuzz(func(t *testing.T, spec string, at int64) {
		s, err := Parse(spec)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Field == "" || pe.Reason == "" {
				t.Fatalf("Parse(%q) error %v is not a complete *ParseError", spec, err)
			}
			return
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
				t.Fatalf("%q: Next(%v) = %v, not after", spec, from, n)
			}
			if p := s.Prev(n); !p.IsZero() && !p.Before(n) {
				t.Fatalf("%q: Prev(%v) = %v, not before", spec, n, p)
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
