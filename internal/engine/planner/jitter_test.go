package planner_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/coord/index/memindex"
	"github.com/chimehq/chime/internal/engine/planner"
	"github.com/chimehq/chime/model"
)

func jitterTimer(id, spec string, jitter time.Duration, created time.Time) *model.Timer {
	return &model.Timer{ID: id, App: "a", Name: id, Schedule: spec, Timezone: "UTC", Enabled: true,
		Action: model.Action{Type: "test"}, Policy: model.Policy{Jitter: jitter}, CreatedAt: created}
}

// TestFiresJitter checks the runs of a jittered timer: id and ScheduledAt
// of the nominal instant, DueAt moved by the timer's offset within the
// window, and the same runs from two planners (two nodes).
func TestFiresJitter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 6, 1, 12, 0, 30, 0, time.UTC)
	cfg := func() planner.Config {
		return planner.Config{Index: memindex.New(4), Lookahead: 10 * time.Minute, MinAhead: 10 * time.Minute,
			Clock: clock.Func(func() time.Time { return now })}
	}
	nodeA, nodeB := planner.New(cfg()), planner.New(cfg())
	const window = 20 * time.Second
	tm := jitterTimer("01JITTER", "* * * * *", window, now.Add(-time.Hour))
	a, untilA, err := nodeA.Fires(tm, now, now.Add(10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	b, untilB, err := nodeB.Fires(jitterTimer("01JITTER", "* * * * *", window, now.Add(-time.Hour)), now, now.Add(10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != 10 || len(b) != len(a) || !untilA.Equal(untilB) {
		t.Fatalf("runs %d and %d, planned until %v and %v; want 10 each, the same", len(a), len(b), untilA, untilB)
	}
	offsets := map[time.Duration]bool{}
	for i, r := range a {
		nominal := time.Date(2026, 6, 1, 12, 1+i, 0, 0, time.UTC)
		if !r.ScheduledAt.Equal(nominal) || r.ID != model.RunID(tm.ID, nominal) {
			t.Errorf("run %d: scheduled_at %v id %s, want the nominal %v and its id", i, r.ScheduledAt, r.ID, nominal)
		}
		off := r.DueAt.Sub(r.ScheduledAt)
		if off < 0 || off >= window || off != model.JitterOffset(tm.ID, nominal, window) {
			t.Errorf("run %d: due_at %v is %s after its instant, want JitterOffset in [0, %s)", i, r.DueAt, off, window)
		}
		offsets[off] = true
		if o := b[i]; o.ID != r.ID || !o.ScheduledAt.Equal(r.ScheduledAt) || !o.DueAt.Equal(r.DueAt) {
			t.Errorf("run %d: node A plans %s due %v, node B %s due %v", i, r.ID, r.DueAt, o.ID, o.DueAt)
		}
	}
	if len(offsets) < 8 {
		t.Errorf("10 fires got %d distinct offsets", len(offsets))
	}
	// Without jitter, a run is due at its instant.
	plain, _, err := nodeA.Fires(jitterTimer("01PLAIN", "* * * * *", 0, now.Add(-time.Hour)), now, now.Add(10*time.Minute))
	if err != nil || len(plain) == 0 || !plain[0].DueAt.Equal(plain[0].ScheduledAt) {
		t.Fatalf("unjittered runs %v, %v", plain, err)
	}
}

// TestFiresJitterSpreadsHerd: 1,000 timers on "0 * * * *" with a 30s
// jitter are due over the whole window, no one-second bucket empty.
func TestFiresJitterSpreadsHerd(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 6, 1, 11, 59, 0, 0, time.UTC)
	p := planner.New(planner.Config{Index: memindex.New(4), Lookahead: 2 * time.Minute, MinAhead: 2 * time.Minute,
		Clock: clock.Func(func() time.Time { return now })})
	noon := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	var buckets [30]int
	for i := range 1000 {
		runs, _, err := p.Fires(jitterTimer(fmt.Sprintf("01HERD%04d", i), "0 * * * *", 30*time.Second, now), now, now.Add(2*time.Minute))
		if err != nil || len(runs) != 1 || !runs[0].ScheduledAt.Equal(noon) {
			t.Fatalf("timer %d: runs %v, %v; want one at noon", i, runs, err)
		}
		off := runs[0].DueAt.Sub(noon)
		if off < 0 || off >= 30*time.Second {
			t.Fatalf("timer %d: due %s after noon, outside the window", i, off)
		}
		buckets[off/time.Second]++
	}
	for s, n := range buckets {
		if n == 0 || n > 70 {
			t.Errorf("second %d of the window holds %d of 1000 fires: %v", s, n, buckets)
		}
	}
}

// TestMissedJitterWindow: after an outage, the catchup window is measured
// from each fire's jittered instant: the planner keeps the missed fires
// whose own jittered instant is within the window, some of whose nominal
// instants are older than it.
func TestMissedJitterWindow(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	p := planner.New(planner.Config{Index: memindex.New(4), Lookahead: time.Minute, MinAhead: time.Minute,
		Clock: clock.Func(func() time.Time { return now })})
	const window = 5 * time.Minute
	check := func(id string, jitter time.Duration) (planned, older int) {
		tm := jitterTimer(id, "0 * * * * *", jitter, now.Add(-time.Hour))
		tm.Policy.CatchupWindow = window
		tm.PlannedUntil = now.Add(-30 * time.Minute)
		runs, _, err := p.Fires(tm, now, now.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range runs {
			if r.ScheduledAt.After(now) {
				continue
			}
			// The fires beyond the window are recorded skipped
			// (catchup_window).
			within := now.Sub(tm.Policy.DueAt(tm.ID, r.ScheduledAt)) <= window
			if within != (r.Status != model.RunSkipped) {
				t.Errorf("jitter %s: fire at %s (due %s) is %s; within the window: %v", jitter,
					r.ScheduledAt.Format(time.TimeOnly), r.DueAt.Format(time.TimeOnly), r.Status, within)
			}
			if within {
				planned++
				if now.Sub(r.ScheduledAt) > window {
					older++
				}
			}
		}
		return planned, older
	}
	// A fire exactly the window late is within it (as in the executor).
	if n, _ := check("01MISSED", 0); n != 6 {
		t.Errorf("without jitter: %d missed fires planned, want the 6 of the window (11:55 to 12:00)", n)
	}
	// With a jitter of 70 s, some timer's 11:54:00 is due late enough.
	found := false
	for i := range 20 {
		if _, older := check(fmt.Sprintf("01MISSED%02d", i), 70*time.Second); older > 0 {
			found = true
		}
	}
	if !found {
		t.Error("70s jitter: no timer kept a fire whose nominal instant is older than the window")
	}
}
