package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/chimehq/chime/internal/timers"
)

// MaxNextFires is the most fires GET /api/v1/timers/{id}/next answers.
const MaxNextFires = 100

// NextFires is the answer of GET /api/v1/timers/{id}/next: the timer's
// next fires as the planner makes them.
type NextFires struct {
	// Timezone is the timer's zone, that of the times.
	Timezone string     `json:"timezone"`
	Fires    []NextFire `json:"fires"`
}

// NextFire is one upcoming fire of a timer.
type NextFire struct {
	// ScheduledAt is the fire's instant, in the timer's zone.
	ScheduledAt time.Time `json:"scheduled_at"`
	// DueAt is when its first attempt is due: ScheduledAt moved by the
	// timer's policy.jitter (the same instant without one).
	DueAt time.Time `json:"due_at"`
}

// timerNext answers GET /api/v1/timers/{id}/next?n=: the next n fires
// (default 10) after now, computed from the stored timer as the planner
// computes them: its zone, its daylight-saving choice, an @every anchored
// at its start bound or creation, its start and end bounds, and each
// fire's jitter. It does not look at whether the timer is enabled or
// paused; a timer that runs only after its upstreams has none.
func (s *timersAPI) timerNext(w http.ResponseWriter, r *http.Request) {
	n := 10
	if v := r.URL.Query().Get("n"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxNextFires {
			writeError(w, http.StatusBadRequest, "n", "must be a whole number from 1 to "+strconv.Itoa(MaxNextFires))
			return
		}
	}
	t, ok := s.loadTimer(w, r)
	if !ok {
		return
	}
	out := NextFires{Timezone: t.Timezone, Fires: []NextFire{}}
	if t.Schedule != "" {
		for _, at := range timers.NextFireTimes(t, s.now(), n) {
			out.Fires = append(out.Fires, NextFire{ScheduledAt: at, DueAt: t.Policy.DueAt(t.ID, at).In(at.Location())})
		}
	}
	writeJSON(w, http.StatusOK, out)
}
