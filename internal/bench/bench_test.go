package bench

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestSmoke runs the steady scenario briefly on the embedded backend and
// fails only on a gross regression: a missed or duplicated fire, runs not
// recorded, or (without the race detector) a p99 fire delay over 200ms at
// 500 fires/s.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("bench smoke: skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rep, err := Run(ctx, Config{
		Scenario: Steady, Rate: 500, Duration: 4 * time.Second, Warmup: 2 * time.Second, Drain: 15 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	if err := rep.WriteTable(&sb); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", sb.String())
	s := rep.Steady
	if s.Expected < 1900 {
		t.Errorf("expected %d fires in the window, want about 2000", s.Expected)
	}
	if s.Missed != 0 || s.Duplicated != 0 {
		t.Errorf("missed %d, duplicated %d fires; want none", s.Missed, s.Duplicated)
	}
	if int64(s.UniqueFired) != s.RunsSucceeded {
		t.Errorf("%d fires received but %d runs recorded succeeded", s.UniqueFired, s.RunsSucceeded)
	}
	if raceEnabled {
		t.Logf("race detector on: p99 %.1f ms not checked", s.Delay.P99)
		return
	}
	if s.Delay.P99 > 200 {
		t.Errorf("fire delay p99 %.1f ms at 500 fires/s; want <= 200 ms", s.Delay.P99)
	}
}

// TestDelays checks the percentile arithmetic.
func TestDelays(t *testing.T) {
	ns := make([]int64, 100)
	for i := range ns {
		ns[i] = int64(100-i) * 1e6
	}
	d := delays(ns)
	if d.Count != 100 || d.P50 != 50 || d.P90 != 90 || d.P99 != 99 || d.Max != 100 {
		t.Errorf("delays = %+v", d)
	}
	if got := delays(nil); got != (Delays{}) {
		t.Errorf("delays(nil) = %+v", got)
	}
}

// TestScaleSpec checks the scale mix: 10% every minute, 45% hourly, 45% daily.
func TestScaleSpec(t *testing.T) {
	minute, hourly, daily := 0, 0, 0
	for i := 0; i < 2000; i++ {
		f := strings.Fields(scaleSpec(i))
		switch {
		case f[1] == "*":
			minute++
		case f[2] == "*":
			hourly++
		default:
			daily++
		}
	}
	if minute != 200 || hourly != 900 || daily != 900 {
		t.Errorf("mix: %d every minute, %d hourly, %d daily", minute, hourly, daily)
	}
}

// TestReportJSON checks that a report encodes with its parameters and
// machine.
func TestReportJSON(t *testing.T) {
	rep := &Report{Params: Params{Scenario: Burst, Timers: 10}, Machine: machine(),
		Burst: &BurstResult{Timers: 10, Delay: Delays{Count: 10, P99: 1.5}}}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"scenario":"burst"`, `"go_version"`, `"p99_ms":1.5`, `"cores"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON lacks %s: %s", want, b)
		}
	}
	var sb strings.Builder
	if err := rep.WriteTable(&sb); err != nil || !strings.Contains(sb.String(), "drained") {
		t.Errorf("table: %v\n%s", err, sb.String())
	}
}
