package planner

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/chimehq/chime/model"
)

func TestFires(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 6, 1, 12, 0, 0, 500_000_000, time.UTC)
	created := now.Add(-time.Hour)
	tests := []struct {
		name         string
		schedule     string
		plannedUntil time.Time
		horizon      time.Time
		max          int
		fires        int           // Config.FiresAhead; 0: a bound far away
		minAhead     time.Duration // Config.MinAhead; 0: a bound far away
		policy       model.Policy
		want         []time.Time // the pending runs
		wantLen      int
		wantUntil    time.Time
		// skipped counts the runs recorded skipped by reason.
		skipped map[string]int
	}{
		{
			name: "fresh timer from now", schedule: "*/20 * * * * *", horizon: now.Add(time.Minute),
			want:      []time.Time{now.Add(19500 * time.Millisecond), now.Add(39500 * time.Millisecond), now.Add(59500 * time.Millisecond)},
			wantUntil: now.Add(time.Minute - time.Nanosecond),
		},
		{
			name: "continues after planned until", schedule: "*/20 * * * * *",
			plannedUntil: now.Add(30 * time.Second), horizon: now.Add(time.Minute),
			want:      []time.Time{now.Add(39500 * time.Millisecond), now.Add(59500 * time.Millisecond)},
			wantUntil: now.Add(time.Minute - time.Nanosecond),
		},
		{
			name: "outage plans every missed fire by default", schedule: "0 * * * * *",
			plannedUntil: now.Add(-3*time.Minute - time.Second), horizon: now.Add(time.Minute),
			want: []time.Time{now.Add(-3*time.Minute - 500*time.Millisecond), now.Add(-2*time.Minute - 500*time.Millisecond), now.Add(-time.Minute - 500*time.Millisecond),
				now.Add(-500 * time.Millisecond), now.Add(59500 * time.Millisecond)},
			wantUntil: now.Add(time.Minute - time.Nanosecond),
		},
		{
			name: "outage within the catchup window", schedule: "0 * * * * *", policy: model.Policy{CatchupWindow: 90 * time.Second},
			plannedUntil: now.Add(-3*time.Minute - time.Second), horizon: now.Add(time.Minute),
			want:      []time.Time{now.Add(-time.Minute - 500*time.Millisecond), now.Add(-500 * time.Millisecond), now.Add(59500 * time.Millisecond)},
			wantUntil: now.Add(time.Minute - time.Nanosecond),
			skipped:   map[string]int{model.SkipCatchupWindow: 2},
		},
		{
			name: "outage keeps only the latest missed fire", schedule: "0 * * * * *", policy: model.Policy{Misfire: model.MisfireLatest},
			plannedUntil: now.Add(-10 * time.Minute), horizon: now.Add(time.Minute),
			want:      []time.Time{now.Add(-500 * time.Millisecond), now.Add(59500 * time.Millisecond)},
			wantUntil: now.Add(time.Minute - time.Nanosecond),
			skipped:   map[string]int{model.SkipMisfire: 9},
		},
		{
			name: "outage skips missed fires", schedule: "0 * * * * *", policy: model.Policy{Misfire: model.MisfireSkip},
			plannedUntil: now.Add(-10 * time.Minute), horizon: now.Add(time.Minute),
			// 12:00:00, half a second late, is within the misfire grace.
			want:      []time.Time{now.Add(-500 * time.Millisecond), now.Add(59500 * time.Millisecond)},
			wantUntil: now.Add(time.Minute - time.Nanosecond),
			skipped:   map[string]int{model.SkipMisfire: 9},
		},
		{
			name: "outage caps missed fires", schedule: "* * * * * *",
			plannedUntil: now.Add(-time.Hour), horizon: now.Add(time.Second), max: 1,
			wantLen: MaxMissed + 1, wantUntil: now.Add(time.Second - time.Nanosecond),
			skipped: map[string]int{model.SkipMisfire: MaxSkipRecorded},
		},
		{
			name: "one-shot saved just after its instant fires late", schedule: "@at 2026-06-01T11:59:50Z",
			horizon: now.Add(time.Minute),
			want:    []time.Time{now.Add(-10500 * time.Millisecond)}, wantUntil: Never,
		},
		{
			name: "one-shot beyond the misfire grace never fires", schedule: "@at 2026-06-01T11:59:00Z",
			horizon: now.Add(time.Minute), wantUntil: Never,
		},
		{
			name: "planned one-shot is not planned again", schedule: "@at 2026-06-01T11:59:50Z",
			plannedUntil: now.Add(-time.Second), horizon: now.Add(time.Minute), wantUntil: Never,
		},
		{
			name: "start and end bounds", schedule: "*/10 * * * * *",
			policy:    model.Policy{StartAt: now.Add(15 * time.Second), EndAt: now.Add(39500 * time.Millisecond)},
			horizon:   now.Add(time.Minute),
			want:      []time.Time{now.Add(19500 * time.Millisecond), now.Add(29500 * time.Millisecond), now.Add(39500 * time.Millisecond)},
			wantUntil: Never, // past the end bound: nothing more to plan
		},
		{
			name: "every is anchored at the start bound", schedule: "@every 25m", policy: model.Policy{StartAt: now.Add(time.Minute)},
			horizon:   now.Add(time.Hour),
			want:      []time.Time{now.Add(26 * time.Minute), now.Add(51 * time.Minute)},
			wantUntil: now.Add(time.Hour - time.Nanosecond),
		},
		{
			name: "cap per pass", schedule: "* * * * * *", horizon: now.Add(time.Hour), max: 3,
			want:      []time.Time{now.Add(500 * time.Millisecond), now.Add(1500 * time.Millisecond), now.Add(2500 * time.Millisecond)},
			wantUntil: now.Add(2500 * time.Millisecond),
		},
		{
			name: "end bound beyond the window", schedule: "*/30 * * * * *", policy: model.Policy{EndAt: now.Add(time.Hour)},
			horizon:   now.Add(time.Minute),
			want:      []time.Time{now.Add(29500 * time.Millisecond), now.Add(59500 * time.Millisecond)},
			wantUntil: now.Add(time.Minute - time.Nanosecond),
		},
		{
			name: "every is anchored at creation", schedule: "@every 25m", horizon: now.Add(time.Hour),
			want:      []time.Time{created.Add(75 * time.Minute), created.Add(100 * time.Minute)},
			wantUntil: now.Add(time.Hour - time.Nanosecond),
		},
		{
			name: "every second: the next 30 s only", schedule: "* * * * * *", horizon: now.Add(10 * time.Minute),
			fires: 10, minAhead: 30 * time.Second, wantLen: 30, wantUntil: now.Add(30 * time.Second),
		},
		{
			name: "every 5 s: the next 10 fires, past the 30 s", schedule: "*/5 * * * * *", horizon: now.Add(10 * time.Minute),
			fires: 10, minAhead: 30 * time.Second, wantLen: 10, wantUntil: now.Add(49500 * time.Millisecond),
		},
		{
			name: "every second, replanned: topped up to the same size", schedule: "* * * * * *",
			plannedUntil: now.Add(25 * time.Second), horizon: now.Add(10 * time.Minute),
			fires: 10, minAhead: 30 * time.Second,
			want: []time.Time{now.Add(25500 * time.Millisecond), now.Add(26500 * time.Millisecond), now.Add(27500 * time.Millisecond),
				now.Add(28500 * time.Millisecond), now.Add(29500 * time.Millisecond)},
			wantUntil: now.Add(30 * time.Second),
		},
		{
			name: "every 2 minutes: the look-ahead bounds first", schedule: "0 */2 * * * *", horizon: now.Add(10 * time.Minute),
			fires: 10, minAhead: 30 * time.Second, wantLen: 5, wantUntil: now.Add(10*time.Minute - time.Nanosecond),
		},
		{
			name: "one-shot in the past plans nothing, ever again", schedule: "@at 2020-01-01T00:00:00Z", horizon: now.Add(time.Hour),
			wantUntil: Never,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := Config{MaxRunsPerTimer: tt.max, FiresAhead: tt.fires, MinAhead: tt.minAhead}
			if cfg.MinAhead == 0 {
				cfg.FiresAhead, cfg.MinAhead = 1, 24*time.Hour
			}
			p := New(cfg)
			tm := &model.Timer{ID: "t1", Schedule: tt.schedule, Timezone: "UTC", CreatedAt: created,
				PlannedUntil: tt.plannedUntil, Policy: tt.policy}
			all, until, err := p.Fires(tm, now, tt.horizon)
			if err != nil {
				t.Fatal(err)
			}
			var runs []*model.Run
			skipped := map[string]int{}
			for _, r := range all {
				if r.Status == model.RunSkipped {
					skipped[r.Reason]++
					if r.ID != model.RunID("t1", r.ScheduledAt) || r.Error == "" || r.FinishedAt == nil || !r.ScheduledAt.Before(now) {
						t.Errorf("skipped run %+v", r)
					}
					continue
				}
				runs = append(runs, r)
			}
			if tt.skipped == nil {
				tt.skipped = map[string]int{}
			}
			if !maps.Equal(skipped, tt.skipped) {
				t.Errorf("skipped %v, want %v", skipped, tt.skipped)
			}
			if tt.wantLen > 0 {
				if len(runs) != tt.wantLen {
					t.Errorf("got %d runs, want %d", len(runs), tt.wantLen)
				}
				if !tt.wantUntil.IsZero() && !until.Equal(tt.wantUntil) {
					t.Errorf("planned until %v, want %v", until, tt.wantUntil)
				}
				return
			}
			if len(runs) != len(tt.want) {
				t.Fatalf("got %d runs %v, want %v", len(runs), runs, tt.want)
			}
			for i, r := range runs {
				if !r.ScheduledAt.Equal(tt.want[i]) || !r.DueAt.Equal(tt.want[i]) {
					t.Errorf("run %d at %v, want %v", i, r.ScheduledAt, tt.want[i])
				}
				if r.ID != model.RunID("t1", tt.want[i]) || r.Status != model.RunPending {
					t.Errorf("run %d = %+v", i, r)
				}
			}
			if !until.Equal(tt.wantUntil) {
				t.Errorf("planned until %v, want %v", until, tt.wantUntil)
			}
		})
	}
}

func TestFiresBadSchedule(t *testing.T) {
	t.Parallel()
	p := New(Config{})
	for _, tm := range []*model.Timer{
		{ID: "t1", Schedule: "61 * * * *", Timezone: "UTC"},
		{ID: "t2", Schedule: "* * * * *", Timezone: "Mars/Olympus"},
	} {
		if _, _, err := p.Fires(tm, time.Now(), time.Now().Add(time.Hour)); err == nil {
			t.Errorf("Fires(%q in %q) = nil error", tm.Schedule, tm.Timezone)
		}
	}
}

// TestPausedTimerPlansFires: a paused timer's plan is its fires, pending
// as any timer's (the executor skips each when it comes): no run is
// recorded skipped ahead.
func TestPausedTimerPlansFires(t *testing.T) {
	t.Parallel()
	p := New(Config{FiresAhead: 5, MinAhead: 3 * time.Second})
	tm := &model.Timer{ID: "t1", Schedule: "* * * * * *", Timezone: "UTC", Enabled: true, Paused: true, CreatedAt: time.Now()}
	runs, until := p.TimerRuns(context.Background(), tm)
	if len(runs) < 3 || until.Until.IsZero() {
		t.Fatalf("paused plan = %d runs until %v, want its next fires", len(runs), until)
	}
	for _, r := range runs {
		if r.Status != model.RunPending || r.Reason != "" || r.ID != model.RunID("t1", r.ScheduledAt) {
			t.Errorf("paused plan run %+v", r)
		}
	}
}

// TestFireRoundTrip: a run kept as a batch's fire is made again as newRun
// and model.Skipped made it.
func TestFireRoundTrip(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 6, 1, 12, 0, 0, 123, time.UTC)
	zone, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	tm := &model.Timer{ID: "tm1", Policy: model.Policy{Jitter: 5 * time.Second}}
	at := time.Date(2026, 6, 1, 14, 3, 7, 0, zone)
	for _, want := range []*model.Run{
		newRun(tm, at, now),
		model.Skipped(tm.ID, at, now, model.SkipMisfire, "missed: 3s late"),
	} {
		f := fireOf(want)
		got := f.run(now)
		if got.ID != want.ID || got.TimerID != want.TimerID || !got.ScheduledAt.Equal(want.ScheduledAt) || !got.DueAt.Equal(want.DueAt) ||
			got.Status != want.Status || !got.CreatedAt.Equal(want.CreatedAt) || got.Reason != want.Reason || got.Error != want.Error ||
			(got.FinishedAt == nil) != (want.FinishedAt == nil) || got.FinishedAt != nil && !got.FinishedAt.Equal(*want.FinishedAt) {
			t.Errorf("round trip of %+v: got %+v", want, got)
		}
	}
}
