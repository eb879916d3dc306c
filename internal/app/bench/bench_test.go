package bench

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"runtime"
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
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	rate := 500
	if raceEnabled {
		// SQLite (modernc, C translated to Go) runs an order of magnitude
		// slower under the race detector: keep the correctness checks at a
		// rate it can carry.
		rate = 50
	}
	rep, _ := runLogged(ctx, t, Config{
		Scenario: Steady, Rate: rate, Duration: 4 * time.Second, Warmup: 2 * time.Second, Drain: 15 * time.Second,
		// A short look-ahead keeps the first planning pass small (500
		// fires/s × 20s), which matters under the race detector.
		Lookahead: 20 * time.Second,
	})
	s := rep.Steady
	if want := rate * 4; s.Expected < want*9/10 {
		t.Errorf("expected %d fires in the window, want about %d", s.Expected, want)
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
	if s.Delay.P99 > smokeMaxP99 {
		t.Errorf("fire delay p99 %.1f ms at 500 fires/s; want <= %v ms", s.Delay.P99, smokeMaxP99)
	}
}

// smokeMaxP99 is the smoke test's limit on the p99 fire delay, in ms, the
// gross regression that issue 6 names. At 1,000 fires/s with every-second
// cron timers (900 callbacks due at the same millisecond) the reference
// machine measures p99 of about 200 ms (docs/performance.md); at 500/s, half
// that.
const smokeMaxP99 = 200.0

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

// TestScaleSpec checks the scale mix: 10% every minute, 45% hourly, 45%
// daily, each class spread evenly over the seconds.
func TestScaleSpec(t *testing.T) {
	minute, hourly, daily := 0, 0, 0
	perSecond := map[string]int{} // every-minute timers per second of the minute
	hourSlots := map[string]bool{}
	for i := 0; i < 6000; i++ {
		f := strings.Fields(scaleSpec(i))
		switch {
		case f[1] == "*":
			minute++
			perSecond[f[0]]++
		case f[2] == "*":
			hourly++
			hourSlots[f[0]+" "+f[1]] = true
		default:
			daily++
		}
	}
	if minute != 600 || hourly != 2700 || daily != 2700 {
		t.Errorf("mix: %d every minute, %d hourly, %d daily", minute, hourly, daily)
	}
	if len(perSecond) != 60 {
		t.Errorf("every-minute timers use %d seconds of the minute, want 60", len(perSecond))
	}
	for sec, n := range perSecond {
		if n != 10 {
			t.Errorf("%d every-minute timers at second %s, want 10", n, sec)
		}
	}
	if len(hourSlots) != 2700 {
		t.Errorf("2,700 hourly timers use %d distinct seconds of the hour, want 2,700", len(hourSlots))
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

// TestAnonRSS checks that the anonymous RSS is read on Linux.
func TestAnonRSS(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("RssAnon is Linux's")
	}
	if got := anonRSS(); got < 1<<20 || got > 1<<40 {
		t.Errorf("anonRSS() = %d bytes, want a process's size", got)
	}
}

// runLogged runs cfg with the engine's logs discarded, logs the report's
// table and returns the report and the table; it fails t on an error.
func runLogged(ctx context.Context, t *testing.T, cfg Config) (*Report, string) {
	t.Helper()
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	if err := rep.WriteTable(&sb); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", sb.String())
	return rep, sb.String()
}

// TestAPI runs the api scenario small: every operation answered for both
// classes, every timer of the second phase enabled and fired, no fire
// delivered twice.
func TestAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("bench api: skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	timers, enable := 20, 200
	if raceEnabled {
		timers, enable = 10, 50
	}
	rep, table := runLogged(ctx, t, Config{
		Scenario: API, Timers: timers, Enable: enable, Concurrency: 4,
		// A short look-ahead keeps the planning of the every-second
		// timers small under the race detector.
		Lookahead: 20 * time.Second,
	})
	a := rep.API
	if len(a.Ops) != len(apiOps) {
		t.Fatalf("%d operations reported, want %d", len(a.Ops), len(apiOps))
	}
	for i, o := range a.Ops {
		if o.Op != apiOps[i] {
			t.Errorf("operation %d is %q, want %q", i, o.Op, apiOps[i])
		}
		for _, l := range []OpLatency{o.EverySecond, o.Hourly} {
			if l.Count != timers || l.Errors != 0 || l.P99 <= 0 || l.PerSecond <= 0 {
				t.Errorf("%s: %+v, want %d requests answered", o.Op, l, timers)
			}
		}
		if o.P99Ratio <= 0 {
			t.Errorf("%s: p99 ratio %v", o.Op, o.P99Ratio)
		}
	}
	if a.Duplicated != 0 {
		t.Errorf("%d runs delivered twice", a.Duplicated)
	}
	e := a.EnableMany
	if e == nil || e.Enable.Count != enable || e.Enable.Errors != 0 || !e.AllFired || e.Fired != enable {
		t.Fatalf("enable many: %+v, want all %d enabled and fired", e, enable)
	}
	if e.FirstFire.Count != enable || e.EnableSeconds <= 0 || e.Resources.PeakAnonMiB <= 0 && runtime.GOOS == "linux" {
		t.Errorf("enable many: %+v", e)
	}
	for _, want := range []string{"p99 ratio", "enable many", "targets", "store calls, enable phase"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q", want)
		}
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"scenario":"api"`, `"every_second":{`, `"p99_ratio":`, `"enable_many":{`, `"all_fired":true`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON lacks %s", want)
		}
	}
}

// TestHandlerAction runs the steady and burst scenarios briefly with Go
// handler actions: the handler records the fires as the receiver would,
// so the same checks as TestSmoke hold.
func TestHandlerAction(t *testing.T) {
	if testing.Short() {
		t.Skip("bench handler: skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	rate, burst := 500, 1000
	if raceEnabled {
		rate, burst = 50, 100
	}
	rep, _ := runLogged(ctx, t, Config{Scenario: Steady, Action: ActionHandler, Spread: true, Rate: rate,
		Duration: 2 * time.Second, Warmup: time.Second, Drain: 15 * time.Second, Lookahead: 20 * time.Second})
	if rep.Params.Action != ActionHandler {
		t.Errorf("params: action %q", rep.Params.Action)
	}
	s := rep.Steady
	if s.Expected < rate*2*9/10 || s.Missed != 0 || s.Duplicated != 0 {
		t.Errorf("steady: %d expected, %d missed, %d duplicated; want about %d, none, none", s.Expected, s.Missed, s.Duplicated, rate*2)
	}
	if int64(s.UniqueFired) != s.RunsSucceeded || s.StartDelay.Count == 0 {
		t.Errorf("steady: %d fires recorded, %d runs succeeded, %d action starts", s.UniqueFired, s.RunsSucceeded, s.StartDelay.Count)
	}
	rep, _ = runLogged(ctx, t, Config{Scenario: Burst, Action: ActionHandler, Timers: burst, Lead: time.Second})
	if b := rep.Burst; b.Missed != 0 || b.Duplicated != 0 || b.RunsSucceeded != int64(burst) {
		t.Errorf("burst: %d missed, %d duplicated, %d runs succeeded; want 0, 0, %d", b.Missed, b.Duplicated, b.RunsSucceeded, burst)
	}
}

// TestCheckAction: handler actions are for steady and burst, without a
// receiver.
func TestCheckAction(t *testing.T) {
	for _, tc := range []struct {
		cfg Config
		ok  bool
	}{
		{Config{Scenario: Steady, Action: ActionHandler}, true},
		{Config{Scenario: Burst, Action: ActionHandler}, true},
		{Config{Scenario: API, Action: ActionHTTP}, true},
		{Config{Scenario: API, Action: ActionHandler}, false},
		{Config{Scenario: Scale, Action: ActionHandler}, false},
		{Config{Scenario: Steady, Action: ActionHandler, Receiver: "http://127.0.0.1:9090"}, false},
		{Config{Scenario: Steady, Action: "shell"}, false},
	} {
		if err := checkAction(tc.cfg); (err == nil) != tc.ok {
			t.Errorf("checkAction(%s, %s, receiver %q) = %v, want ok %v", tc.cfg.Scenario, tc.cfg.Action, tc.cfg.Receiver, err, tc.ok)
		}
	}
}

// TestHerd runs the herd scenario briefly with the baseline: every fire of
// chime's two herds and of the bare client's two arrives once, and the
// report gives both sides and their ratio.
func TestHerd(t *testing.T) {
	if testing.Short() {
		t.Skip("bench herd: skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const timers = 50
	rep, table := runLogged(ctx, t, Config{
		Scenario: Herd, Timers: timers, Duration: 4 * time.Second, Warmup: 2 * time.Second, Drain: 15 * time.Second,
		Lookahead: 20 * time.Second, Baseline: true, BaselineConns: 4,
	})
	h := rep.Herd
	if h.Expected != 2*timers || h.Received != h.Expected || h.Missed != 0 || h.Duplicated != 0 {
		t.Errorf("chime: expected %d, received %d, missed %d, duplicated %d; want %d, all received once",
			h.Expected, h.Received, h.Missed, h.Duplicated, 2*timers)
	}
	if h.Herds != 2 || h.Last.Count != 2 {
		t.Errorf("chime: %d herds (%d last fires), want 2", h.Herds, h.Last.Count)
	}
	b := h.Baseline
	if b == nil {
		t.Fatal("no baseline in the report")
	}
	if b.Expected != 2*timers || b.Received != b.Expected || b.Errors != 0 || b.Herds != 2 || b.Conns != 4 {
		t.Errorf("baseline = %+v; want 2 herds of %d over 4 connections, all received, no error", *b, timers)
	}
	if h.RatioP50 <= 0 || h.RatioP99 <= 0 {
		t.Errorf("ratios p50 %v, p99 %v; want both > 0", h.RatioP50, h.RatioP99)
	}
	if h.RunsSucceeded < int64(h.Received) {
		t.Errorf("%d fires received but %d runs recorded succeeded", h.Received, h.RunsSucceeded)
	}
	for _, want := range []string{"baseline delay", "chime / baseline"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q", want)
		}
	}
}
