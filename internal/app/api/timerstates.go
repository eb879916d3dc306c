package api

// The timers' states: the counts of GET /api/v1/timers:counts and the
// state filter of GET /api/v1/timers.

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/chimehq/chime/internal/metrics"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// Timer states: the values of the state parameter of GET /api/v1/timers.
// Enabled, paused and disabled split the timers in three (a disabled timer
// is disabled whether paused or not); failing cuts across them.
const (
	StateEnabled  = "enabled"  // enabled and not paused: it fires
	StatePaused   = "paused"   // enabled and paused: its fires are skipped
	StateDisabled = "disabled" // not enabled: no fires
	// StateFailing: a failed attempt, retried or not, in the last hour,
	// as the failing timers of GET /api/v1/stats/series count them.
	StateFailing = "failing"
)

// TimerCounts is the answer of GET /api/v1/timers:counts: the timers of
// each state among those the filters select; All is Enabled + Paused +
// Disabled.
type TimerCounts struct {
	All      int64 `json:"all"`
	Enabled  int64 `json:"enabled"`
	Paused   int64 `json:"paused"`
	Disabled int64 `json:"disabled"`
	Failing  int64 `json:"failing"`
}

// timerCounts answers GET /api/v1/timers:counts?app=&search=.
func (s *timersAPI) timerCounts(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := store.TimerFilter{App: q.Get("app"), Apps: principalOf(r.Context()).apps, NameContains: q.Get("search")}
	if len(f.NameContains) > maxSearchLen {
		writeError(w, http.StatusBadRequest, "search", "must be at most "+strconv.Itoa(maxSearchLen)+" bytes")
		return
	}
	c, err := s.store.CountTimers(r.Context(), f)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	failing, err := s.failingTimers(r.Context(), f)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, TimerCounts{All: c.Enabled + c.Paused + c.Disabled, Enabled: c.Enabled, Paused: c.Paused,
		Disabled: c.Disabled, Failing: int64(len(failing))})
}

// stateFilter sets f for a state other than failing (which failingTimers
// serves); false when state is not one.
func stateFilter(f *store.TimerFilter, state string) bool {
	on, off := true, false
	switch state {
	case StateEnabled:
		f.Enabled, f.Paused = &on, &off
	case StatePaused:
		f.Enabled, f.Paused = &on, &on
	case StateDisabled:
		f.Enabled = &off
	default:
		return false
	}
	return true
}

// failingTimers returns the timers that f's App, Apps and NameContains
// select and that failed an attempt in the last hour, the most failures
// first: the failing timers of the cluster's last hour (at most MaxBatch),
// each read from the store.
func (s *timersAPI) failingTimers(ctx context.Context, f store.TimerFilter) ([]*model.Timer, error) {
	rows, err := s.minutes.get(ctx)
	if err != nil {
		return nil, err
	}
	search := strings.ToLower(f.NameContains)
	var out []*model.Timer
	for _, n := range metrics.MergeTimers(s.now(), s.series, rows, MaxBatch) {
		if n.Failures == 0 {
			continue
		}
		t, err := s.store.GetTimer(ctx, n.TimerID)
		if errors.Is(err, model.ErrNotFound) {
			continue // deleted since
		}
		if err != nil {
			return nil, err
		}
		if (f.App != "" && t.App != f.App) || (len(f.Apps) > 0 && !slices.Contains(f.Apps, t.App)) ||
			!strings.Contains(strings.ToLower(t.Name), search) {
			continue
		}
		out = append(out, t)
	}
	return out, nil
}
