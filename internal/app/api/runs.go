package api

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// Views of GET /api/v1/timers/{id}/runs.
const (
	// ViewAll lists every run of the timer, newest first (the default).
	ViewAll = "all"
	// ViewHistory lists the runs scheduled up to now, newest first: the
	// fires that came (run, running, waiting for a retry, skipped or
	// cancelled) and the manual runs.
	ViewHistory = "history"
	// ViewUpcoming lists the planned fires: the pending runs scheduled
	// after now, soonest first.
	ViewUpcoming = "upcoming"
)

// upcomingCursor is the cursor kind of the upcoming view, whose order is
// the other way round.
const upcomingCursor = "u"

// RunCounts is the answer of GET /api/v1/runs/counts: the runs the
// filters select by status, every status present (zero when none), and
// their total.
type RunCounts struct {
	Counts map[model.RunStatus]int64 `json:"counts"`
	Total  int64                     `json:"total"`
}

const statusValues = "must be one of pending, running, succeeded, failed, skipped, cancelled"

// runStatusParam reads the status query parameter.
func runStatusParam(q url.Values) (model.RunStatus, *requestError) {
	st := model.RunStatus(q.Get("status"))
	if st != "" && !st.Valid() {
		return "", badRequest("status", statusValues)
	}
	return st, nil
}

// timeParam reads the RFC 3339 time of the query parameter name (zero
// when absent).
func timeParam(q url.Values, name string) (time.Time, *requestError) {
	v := q.Get(name)
	if v == "" {
		return time.Time{}, nil
	}
	at, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, badRequest(name, "must be an RFC 3339 time such as 2026-01-02T15:04:05Z")
	}
	return at, nil
}

// runsFilter reads the filters that GET /api/v1/runs and its counts
// share: app, timer (an id or app/name), from and to (to defaults to just
// after now: the runs that came, a manual run made now among them, not
// the fires planned ahead). The token's apps always apply. It answers the request itself (and returns false) when a
// parameter is bad or the timer is not one the token may see.
func (s *Server) runsFilter(w http.ResponseWriter, r *http.Request) (store.RunFilter, bool) {
	q := r.URL.Query()
	f := store.RunFilter{App: q.Get("app"), Apps: principalOf(r.Context()).apps}
	var rerr *requestError
	if f.ScheduledFrom, rerr = timeParam(q, "from"); rerr == nil {
		f.ScheduledBefore, rerr = timeParam(q, "to")
	}
	if rerr == nil && f.ScheduledBefore.IsZero() {
		f.ScheduledBefore = s.now().Add(time.Nanosecond)
	}
	if rerr == nil && !f.ScheduledFrom.IsZero() && !f.ScheduledFrom.Before(f.ScheduledBefore) {
		rerr = badRequest("from", "must be before to (%s)", f.ScheduledBefore.Format(time.RFC3339))
	}
	if rerr != nil {
		writeError(w, rerr.code, rerr.field, rerr.message)
		return f, false
	}
	if ref := q.Get("timer"); ref != "" {
		t, err := s.timersAPI.timerByRef(r.Context(), ref)
		if err == nil && !principalOf(r.Context()).allowsApp(t.App) {
			err = model.ErrNotFound
		}
		if err != nil {
			s.storeError(w, r, err, "timer "+strconv.Quote(ref))
			return f, false
		}
		f.TimerID = t.ID
	}
	return f, true
}

// listAllRuns answers GET /api/v1/runs?app=&timer=&status=&from=&to=&limit=&cursor=:
// the runs of every timer the token may see, newest first (see runsFilter).
func (s *Server) listAllRuns(w http.ResponseWriter, r *http.Request) {
	f, ok := s.runsFilter(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	var rerr *requestError
	if f.Status, rerr = runStatusParam(q); rerr != nil {
		writeError(w, rerr.code, rerr.field, rerr.message)
		return
	}
	if f.Limit, f.Before, ok = page(w, q, runCursor); !ok {
		return
	}
	s.writeRuns(w, r, f, runCursor)
}

// runCounts answers GET /api/v1/runs/counts?app=&timer=&from=&to=: the
// runs GET /api/v1/runs lists with the same filters, counted by status.
func (s *Server) runCounts(w http.ResponseWriter, r *http.Request) {
	f, ok := s.runsFilter(w, r)
	if !ok {
		return
	}
	counts, err := s.store.RunCounts(r.Context(), f)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	out := RunCounts{Counts: map[model.RunStatus]int64{}}
	for _, st := range []model.RunStatus{model.RunPending, model.RunRunning, model.RunSucceeded, model.RunFailed, model.RunSkipped, model.RunCancelled} {
		out.Counts[st] = counts[st]
		out.Total += counts[st]
	}
	writeJSON(w, http.StatusOK, out)
}

// writeRuns answers with the page of runs f selects, its cursor of kind.
func (s *Server) writeRuns(w http.ResponseWriter, r *http.Request, f store.RunFilter, kind string) {
	runs, next, err := s.store.ListRuns(r.Context(), f)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	out := RunList{Runs: make([]*Run, 0, len(runs)), NextCursor: encodeCursor(next, kind)}
	for _, run := range runs {
		out.Runs = append(out.Runs, RunFromModel(run))
	}
	writeJSON(w, http.StatusOK, out)
}
