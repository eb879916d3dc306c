package planner

import (
	"errors"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/timers"
	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/schedule"
)

// TestScheduleOfZones checks that the planner computes fires with the
// timer rules of package timers: the zone "Local", which validation
// refuses, is refused here too (ScheduleOf once loaded zones with
// time.LoadLocation and accepted it), and the zone of every timer comes
// from the shared zone cache, so that the schedule package's zone tables
// are built once per zone.
func TestScheduleOfZones(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	p := New(Config{})
	local := &model.Timer{ID: "L", Schedule: "0 * * * *", Timezone: "Local", Enabled: true}
	if _, err := ScheduleOf(local); !errors.Is(err, timers.ErrUnknownZone) {
		t.Errorf("ScheduleOf(Local): %v", err)
	}
	if _, _, err := p.Fires(local, now, now.Add(time.Hour)); !errors.Is(err, timers.ErrUnknownZone) {
		t.Errorf("Fires(Local): %v", err)
	}
	cached, err := timers.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range []string{"0 * * * *", "@every 1h"} {
		s, err := ScheduleOf(&model.Timer{ID: "T", Schedule: spec, Timezone: "Asia/Tokyo"})
		if err != nil {
			t.Fatal(err)
		}
		if got := schedule.Location(s); got != cached {
			t.Errorf("%s: zone %p is not the cached %p", spec, got, cached)
		}
	}
}
