package schedule_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/chimehq/chime/schedule"
)

func Example() {
	s, err := schedule.Parse("0 0 9 * * MON-FRI")
	if err != nil {
		panic(err)
	}
	from := time.Date(2026, 11, 27, 18, 0, 0, 0, time.UTC) // a Friday
	for _, t := range schedule.NextN(s, from, 3) {
		fmt.Println(t.Format(time.RFC3339))
	}
	// Output:
	// 2026-11-30T09:00:00Z
	// 2026-12-01T09:00:00Z
	// 2026-12-02T09:00:00Z
}

func ExampleParse_timeZone() {
	s, _ := schedule.Parse("CRON_TZ=Europe/London 0 30 8 * * *")
	fmt.Println(s.Next(time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)).Format(time.RFC3339))
	// Output: 2026-07-01T08:30:00+01:00
}

func ExampleParse_quartz() {
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, spec := range []string{
		"0 0 L * *",     // last day of the month
		"0 0 LW * *",    // last weekday of the month
		"0 0 15W * *",   // weekday nearest the 15th
		"0 0 * * FRI#3", // third Friday
		"0 0 * * 5L",    // last Friday
	} {
		s, _ := schedule.Parse(spec)
		fmt.Printf("%-14s %s\n", spec, s.Next(from.AddDate(0, 1, 0)).Format("2006-01-02"))
	}
	// Output:
	// 0 0 L * *      2026-02-28
	// 0 0 LW * *     2026-02-27
	// 0 0 15W * *    2026-02-16
	// 0 0 * * FRI#3  2026-02-20
	// 0 0 * * 5L     2026-02-27
}

func ExampleParse_error() {
	for _, spec := range []string{"0 24 * * *", "0 0 * * FRU", "0 0 30 2 *"} {
		_, err := schedule.Parse(spec)
		var pe *schedule.ParseError
		if errors.As(err, &pe) {
			fmt.Printf("%s [field %s, token %q]\n", err, pe.Field, pe.Token)
		}
	}
	// Output:
	// hour: 24 is out of range 0-23 [field hour, token "24"]
	// day-of-week: unknown name "FRU" [field day-of-week, token "FRU"]
	// spec: "0 0 30 2 *" never fires: no date matches day-of-month "30", month "2" and day-of-week "*" [field spec, token "0 0 30 2 *"]
}

// A fixed-time spec fires once when daylight saving skips or repeats its
// wall time; a wildcard spec skips the gap and fires twice in the overlap.
func ExampleParse_daylightSaving() {
	ny, _ := time.LoadLocation("America/New_York")
	show := func(spec string, from time.Time, n int) {
		s, _ := schedule.ParseInLocation(spec, ny)
		fmt.Printf("%-16s fixed=%-5v", spec, schedule.IsFixedTime(s))
		for _, t := range schedule.NextN(s, from, n) {
			fmt.Print(" ", t.Format("01-02T15:04-07"))
		}
		fmt.Println()
	}
	spring := time.Date(2026, 3, 8, 0, 0, 0, 0, ny)
	fall := time.Date(2026, 11, 1, 0, 0, 0, 0, ny)
	show("30 2 * * *", spring, 2)
	show("*/30 * * * *", spring.Add(time.Hour), 3)
	show("30 1 * * *", fall, 2)
	show("*/30 1 * * *", fall, 4)
	// Output:
	// 30 2 * * *       fixed=true  03-08T03:00-04 03-09T02:30-04
	// */30 * * * *     fixed=false 03-08T01:30-05 03-08T03:00-04 03-08T03:30-04
	// 30 1 * * *       fixed=true  11-01T01:30-04 11-02T01:30-05
	// */30 1 * * *     fixed=false 11-01T01:00-04 11-01T01:30-04 11-01T01:00-05 11-01T01:30-05
}

func ExampleWithAnchor() {
	s, _ := schedule.Parse("@every 90m")
	created := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	s = schedule.WithAnchor(s, created)
	fmt.Println(s.Next(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)).Format(time.RFC3339))
	// Output: 2026-01-01T13:30:00Z
}

func ExampleIsOneShot() {
	s, _ := schedule.Parse("@at 2030-01-01T00:00:00Z")
	fmt.Println(schedule.IsOneShot(s), schedule.KindOf(s))
	fmt.Println(s.Next(time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC)).Format(time.RFC3339))
	fmt.Println(s.Next(time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero())
	// Output:
	// true at
	// 2030-01-01T00:00:00Z
	// true
}
