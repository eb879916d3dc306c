package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/app/api"
)

// TestTimerNext: GET /api/v1/timers/{id}/next computes from the stored
// timer: an @every anchored at its start bound, its end bound, its
// daylight-saving choice and each fire's jitter, in the timer's zone.
func TestTimerNext(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	start := testNow.Add(3 * time.Second)
	tests := []struct {
		name   string
		timer  map[string]any
		n      string
		want   []time.Time
		jitter time.Duration
	}{
		{"every anchored at start_at, up to end_at", with("name", "every", "schedule", "@every 7s", "timezone", "UTC",
			"policy", map[string]any{"start_at": start.Format(time.RFC3339), "end_at": start.Add(15 * time.Second).Format(time.RFC3339)}), "",
			[]time.Time{start.Add(7 * time.Second), start.Add(14 * time.Second)}, 0}, // not now + 7s
		{"dst default: once after the gap", with("name", "gap", "schedule", "0 30 2 * * *"), "8",
			nyDays(ny, "03-02 02:30", "03-03 02:30", "03-04 02:30", "03-05 02:30", "03-06 02:30", "03-07 02:30", "03-08 03:00", "03-09 02:30"), 0},
		{"dst skip_gap: not that day", with("name", "skip", "schedule", "0 30 2 * * *", "policy", map[string]any{"dst": "skip_gap"}), "7",
			nyDays(ny, "03-02 02:30", "03-03 02:30", "03-04 02:30", "03-05 02:30", "03-06 02:30", "03-07 02:30", "03-09 02:30"), 0},
		{"jitter", with("name", "jitter", "schedule", "0 * * * * *", "timezone", "UTC", "policy", map[string]any{"jitter": "30s"}), "20",
			nil, 30 * time.Second},
		{"after only: none", with("name", "after", "schedule", nil, "after", []map[string]any{{"timer": "billing/every", "on": "success"}}), "", []time.Time{}, 0},
	}
	for _, tc := range tests {
		tm := e.createTimer(t, tc.timer)
		path := "/api/v1/timers/" + tm.ID + "/next"
		if tc.n != "" {
			path += "?n=" + tc.n
		}
		var out api.NextFires
		e.doJSON(t, "GET", path, nil, http.StatusOK, &out)
		if out.Timezone != tm.Timezone {
			t.Errorf("%s: timezone %q, want %q", tc.name, out.Timezone, tm.Timezone)
		}
		if tc.jitter > 0 {
			if len(out.Fires) != 20 {
				t.Fatalf("%s: %d fires, want 20", tc.name, len(out.Fires))
			}
			moved := 0
			for _, f := range out.Fires {
				d := f.DueAt.Sub(f.ScheduledAt)
				if d < 0 || d >= tc.jitter {
					t.Errorf("%s: due %v after its instant, want within [0, %v)", tc.name, d, tc.jitter)
				}
				if d > 0 {
					moved++
				}
			}
			if moved == 0 {
				t.Errorf("%s: no fire moved by its jitter", tc.name)
			}
			continue
		}
		if len(out.Fires) != len(tc.want) {
			t.Fatalf("%s: %d fires %v, want %v", tc.name, len(out.Fires), out.Fires, tc.want)
		}
		for i, f := range out.Fires {
			if !f.ScheduledAt.Equal(tc.want[i]) || !f.DueAt.Equal(f.ScheduledAt) {
				t.Errorf("%s: fire %d = %v due %v, want %v", tc.name, i, f.ScheduledAt, f.DueAt, tc.want[i])
			}
		}
	}
	e.doJSON(t, "GET", "/api/v1/timers/nope/next", nil, http.StatusNotFound, nil)
	for _, n := range []string{"0", "101", "ten"} {
		tm := e.createTimer(t, with("name", "bad-n-"+n))
		e.doJSON(t, "GET", "/api/v1/timers/"+tm.ID+"/next?n="+n, nil, http.StatusBadRequest, nil)
	}
}

// nyDays parses "01-02 15:04" wall times of 2026 in New York.
func nyDays(loc *time.Location, days ...string) []time.Time {
	out := make([]time.Time, len(days))
	for i, d := range days {
		t, err := time.ParseInLocation("2006-01-02 15:04", "2026-"+d, loc)
		if err != nil {
			panic(err)
		}
		out[i] = t
	}
	return out
}
