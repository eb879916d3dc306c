package api

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// runsAPI serves the runs: one run (GET /api/v1/runs/{id}), the runs of a
// timer (GET /api/v1/timers/{id}/runs) and of every timer (GET
// /api/v1/runs, /runs/counts). A rerun is actionsAPI's.
type runsAPI struct {
	*env
	store     RunStore
	timersAPI *timersAPI // resolves the timer of a list's filter
}

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
func (s *runsAPI) runsFilter(w http.ResponseWriter, r *http.Request) (store.RunFilter, bool) {
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
		t, err := s.timersAPI.visibleTimer(r.Context(), ref)
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
func (s *runsAPI) listAllRuns(w http.ResponseWriter, r *http.Request) {
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
func (s *runsAPI) runCounts(w http.ResponseWriter, r *http.Request) {
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
	for _, st := range model.RunStatuses {
		out.Counts[st] = counts[st]
		out.Total += counts[st]
	}
	writeJSON(w, http.StatusOK, out)
}

// writeRuns answers with the page of runs f selects, its cursor of kind.
func (s *runsAPI) writeRuns(w http.ResponseWriter, r *http.Request, f store.RunFilter, kind string) {
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

// listRuns answers GET /api/v1/timers/{id}/runs?view=&status=&before=&limit=&cursor=;
// view is all (the default: every run, newest first), history (the runs
// scheduled before now, newest first) or upcoming (the planned fires:
// pending runs scheduled from now on, soonest first); before keeps runs
// scheduled before that RFC 3339 time.
func (s *runsAPI) listRuns(w http.ResponseWriter, r *http.Request) {
	t, ok := s.timersAPI.loadTimer(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	f := store.RunFilter{TimerID: t.ID}
	var rerr *requestError
	if f.Status, rerr = runStatusParam(q); rerr == nil {
		f.ScheduledBefore, rerr = timeParam(q, "before")
	}
	if rerr != nil {
		writeError(w, rerr.code, rerr.field, rerr.message)
		return
	}
	kind := runCursor
	switch q.Get("view") {
	case "", ViewAll:
	case ViewHistory:
		// Up to now included (a manual run made now is history); the
		// upcoming view starts after it.
		if now := s.now().Add(time.Nanosecond); f.ScheduledBefore.IsZero() || f.ScheduledBefore.After(now) {
			f.ScheduledBefore = now
		}
	case ViewUpcoming:
		if f.Status != "" && f.Status != model.RunPending {
			writeError(w, http.StatusBadRequest, "status", "must be pending or absent with view=upcoming: the upcoming fires are pending runs")
			return
		}
		f.Status, f.ScheduledFrom, f.Ascending, kind = model.RunPending, s.now().Add(time.Nanosecond), true, upcomingCursor
	default:
		writeError(w, http.StatusBadRequest, "view", "must be all, history or upcoming")
		return
	}
	if f.Limit, f.Before, ok = page(w, q, kind); !ok {
		return
	}
	s.writeRuns(w, r, f, kind)
}

func (s *runsAPI) getRun(w http.ResponseWriter, r *http.Request) {
	run, ok := s.loadRun(w, r)
	if !ok {
		return
	}
	id := run.ID
	out := RunFromModel(run)
	attempts, err := s.store.RunAttempts(r.Context(), run.ID)
	if err != nil {
		s.storeError(w, r, err, "attempts of run "+strconv.Quote(id))
		return
	}
	out.SetAttempts(attempts)
	ns, err := s.store.RunNotifications(r.Context(), run.ID)
	if err != nil {
		s.storeError(w, r, err, "notifications of run "+strconv.Quote(id))
		return
	}
	for _, n := range ns {
		n.Target = model.RedactTarget(n.Channel, n.Target)
	}
	out.Notifications = ns
	if run.IsFire() {
		shards, err := s.store.FireShards(r.Context(), run.ID)
		if err != nil {
			s.storeError(w, r, err, "shards of run "+strconv.Quote(id))
			return
		}
		out.Shards, out.ShardTotal = make([]*Run, len(shards)), len(shards)
		for i, sh := range shards {
			out.Shards[i] = RunFromModel(sh)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// loadRun loads the run of the request's {id}, answering 404 (and false)
// when there is none or the token may not see its timer's app.
func (s *runsAPI) loadRun(w http.ResponseWriter, r *http.Request) (*model.Run, bool) {
	id := r.PathValue("id")
	run, err := s.store.GetRun(r.Context(), id)
	if err == nil && principalOf(r.Context()).scoped() {
		// The run's app is its timer's.
		_, err = s.timersAPI.visibleTimer(r.Context(), run.TimerID)
	}
	if err != nil {
		s.storeError(w, r, err, "run "+strconv.Quote(id))
		return nil, false
	}
	return run, true
}
