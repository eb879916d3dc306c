package schedule

import (
	"testing"
	"time"
)

func benchNext(b *testing.B, spec string) {
	s := MustParse(spec)
	from := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	b.ReportAllocs()
	b.ResetTimer()
	limit := time.Date(2090, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	t := from
	for b.Loop() {
		t = s.Next(t)
		if t.IsZero() || t.Unix() > limit {
			t = from
		}
	}
}

func BenchmarkNextEvery5Seconds(b *testing.B) { benchNext(b, "*/5 * * * * *") }
func BenchmarkNextWeekdays9(b *testing.B)     { benchNext(b, "0 0 9 * * MON-FRI") }
func BenchmarkNextHourly(b *testing.B)        { benchNext(b, "@hourly") }
func BenchmarkNextNewYorkWeekdays9(b *testing.B) {
	benchNext(b, "CRON_TZ=America/New_York 0 0 9 * * MON-FRI")
}
func BenchmarkNextNewYorkEvery5s(b *testing.B) {
	benchNext(b, "CRON_TZ=America/New_York */5 * * * * *")
}
func BenchmarkNextLeapDay(b *testing.B)        { benchNext(b, "0 0 29 2 *") }
func BenchmarkNextLeapDayMonday(b *testing.B)  { benchNext(b, "0 0 0 29 2 ? ") }
func BenchmarkNextFifthFridayFeb(b *testing.B) { benchNext(b, "0 0 0 ? 2 FRI#5") }
func BenchmarkNextYearField(b *testing.B)      { benchNext(b, "0 0 0 1 1 ? 2080-2089") }
func BenchmarkNextLastWeekday(b *testing.B)    { benchNext(b, "0 0 18 LW * *") }
func BenchmarkNextLordHoweFixed(b *testing.B) {
	benchNext(b, "CRON_TZ=Australia/Lord_Howe 0 15 2 * * *")
}
func BenchmarkNextEvery(b *testing.B) { benchNext(b, "@every 1h30m") }
func BenchmarkNextNewYorkYearField(b *testing.B) {
	benchNext(b, "CRON_TZ=America/New_York 0 0 0 1 1 ? 2088")
}
func BenchmarkNextFarFromYearField(b *testing.B) {
	s := MustParse("CRON_TZ=America/New_York 0 0 0 1 1 ? 2099")
	from := time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	b.ReportAllocs()
	for b.Loop() {
		s.Next(from)
	}
}

func BenchmarkPrevWeekdays9(b *testing.B) {
	s := MustParse("0 0 9 * * MON-FRI")
	t := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	b.ReportAllocs()
	for b.Loop() {
		if t = s.Prev(t); t.Unix() < 631152000 { // 1990
			t = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
		}
	}
}

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse("0 0 9 * * MON-FRI"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBuildZoneTable(b *testing.B) {
	loc, err := time.LoadLocation("America/New_York")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		buildTable(loc)
	}
}
