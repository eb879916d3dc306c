package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/chimehq/chime/internal/timers"
	"github.com/chimehq/chime/model"
)

// actionsAPI serves what a request makes a timer do: enable and disable
// it, fire it now (trigger), run its past fires (backfill), run one of
// its runs again (rerun) (actions.go), pause and resume it, one at a time,
// in a batch or every timer of an app (batch.go).
type actionsAPI struct {
	*env
	store        TimerStore
	engine       Engine
	timers       *timers.Service // the save path
	timersAPI    *timersAPI      // resolves timers, checks node handlers
	runsAPI      *runsAPI        // resolves the run of a rerun
	writeTimeout time.Duration   // extended per page of an app's pause and resume
}

func (s *actionsAPI) enableTimer(w http.ResponseWriter, r *http.Request) {
	s.setEnabled(w, r, true, "timer.enable")
}
func (s *actionsAPI) disableTimer(w http.ResponseWriter, r *http.Request) {
	s.setEnabled(w, r, false, "timer.disable")
}

// setEnabled enables or disables a timer; doing so twice is not an error
// (and is audited all the same: it was asked for).
func (s *actionsAPI) setEnabled(w http.ResponseWriter, r *http.Request, enabled bool, action string) {
	t, ok := s.timersAPI.loadTimer(w, r)
	if !ok {
		return
	}
	if _, err := s.timers.SetEnabled(r.Context(), t, enabled, s.auditEntry(r, action)); err != nil {
		s.storeError(w, r, err, "timer "+strconv.Quote(t.ID))
		return
	}
	writeJSON(w, http.StatusOK, TimerFromModel(t, s.now(), nextFireCount))
}

func (s *actionsAPI) triggerTimer(w http.ResponseWriter, r *http.Request) {
	t, ok := s.timersAPI.loadTimer(w, r)
	if !ok {
		return
	}
	if !s.nodeHandlerAllowed(w, r, t) || !s.fanOutCheck(w, r, t, 1, "") {
		return
	}
	run, err := s.engine.Trigger(r.Context(), t)
	if err != nil {
		s.storeError(w, r, err, "timer "+strconv.Quote(t.ID))
		return
	}
	s.audit(r, "timer.trigger", t.App, t.ID, "run "+run.ID)
	writeJSON(w, http.StatusCreated, RunFromModel(run))
}

// rerunRun answers POST /api/v1/runs/{id}/rerun: a new manual run of the
// run's timer, with the timer's action, whose callbacks carry the run's
// scheduled instant and its id (Engine.Rerun); 201 with the new run, as
// a trigger answers. Only an ended run is run again (409 otherwise).
func (s *actionsAPI) rerunRun(w http.ResponseWriter, r *http.Request) {
	orig, ok := s.runsAPI.loadRun(w, r)
	if !ok {
		return
	}
	t, err := s.timersAPI.visibleTimer(r.Context(), orig.TimerID)
	if err != nil {
		s.storeError(w, r, err, "timer "+strconv.Quote(orig.TimerID)+" of run "+strconv.Quote(orig.ID))
		return
	}
	if !orig.Status.Terminal() {
		writeError(w, http.StatusConflict, "status", "run "+strconv.Quote(orig.ID)+" is "+string(orig.Status)+
			": only an ended run (succeeded, failed, skipped or cancelled) is run again")
		return
	}
	if !s.nodeHandlerAllowed(w, r, t) || !s.fanOutCheck(w, r, t, 1, "") {
		return
	}
	run, err := s.engine.Rerun(r.Context(), t, orig)
	if err != nil {
		s.storeError(w, r, err, "run "+strconv.Quote(orig.ID))
		return
	}
	s.audit(r, "run.rerun", t.App, t.ID, "run "+run.ID+" reruns "+orig.ID)
	writeJSON(w, http.StatusCreated, RunFromModel(run))
}

// BackfillRequest is the body of POST /api/v1/timers/{id}/backfill: the
// timer's fires in [from, to] are run now, once each.
type BackfillRequest struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// BackfillResponse lists the runs a backfill made.
type BackfillResponse struct {
	Count int    `json:"count"`
	Runs  []*Run `json:"runs"`
}

// MaxBackfill is the most fires one backfill request may run.
const MaxBackfill = 1000

// MaxRunsPerRequest is the most runs one request may make: the fires it
// makes times the runs each fire splits into (its shards, or the live
// nodes of a broadcast timer).
const MaxRunsPerRequest = 10000

// nodeHandlerAllowed answers 403 when r's principal may not run t's
// handler (nodeHandlerCheck); it reports whether the request may go on.
func (s *actionsAPI) nodeHandlerAllowed(w http.ResponseWriter, r *http.Request, t *model.Timer) bool {
	if err := s.timersAPI.nodeHandlerCheck(principalOf(r.Context()), t); err != nil {
		s.timersAPI.saveError(w, r, err, "timer "+strconv.Quote(t.ID))
		return false
	}
	return true
}

// fanOutCheck refuses (400, naming the product) a request that would make
// fires fires of t when they split into more than MaxRunsPerRequest runs.
// It reports whether the request may go on.
func (s *actionsAPI) fanOutCheck(w http.ResponseWriter, r *http.Request, t *model.Timer, fires int, field string) bool {
	per, what := 1, ""
	switch {
	case t.Policy.Mode == model.ModeBroadcast:
		nodes, err := s.engine.Nodes(r.Context())
		if err != nil {
			s.serverError(w, r, err)
			return false
		}
		per, what = max(len(nodes), 1), "nodes"
	case t.Policy.Shards > 1:
		per, what = t.Policy.Shards, "shards"
	}
	if per*fires <= MaxRunsPerRequest {
		return true
	}
	msg := fmt.Sprintf("%s (%d) × fires (%d) = %d runs exceeds %d", what, per, fires, per*fires, MaxRunsPerRequest)
	if fires > 1 {
		msg += ": backfill a shorter range"
	}
	writeError(w, http.StatusBadRequest, field, msg)
	return false
}

// countFires returns how many fires t's schedule has in [from, to],
// counting up to limit+1.
func countFires(t *model.Timer, from, to time.Time, limit int) (int, error) {
	sch, err := timers.Schedule(t)
	if err != nil {
		return 0, err
	}
	n := 0
	for f := sch.Next(from.Add(-time.Nanosecond)); !f.IsZero() && !f.After(to) && n <= limit; f = sch.Next(f) {
		n++
	}
	return n, nil
}

func (s *actionsAPI) backfillTimer(w http.ResponseWriter, r *http.Request) {
	t, ok := s.timersAPI.loadTimer(w, r)
	if !ok {
		return
	}
	var req BackfillRequest
	if rerr := s.decodeJSON(w, r, &req); rerr != nil {
		writeError(w, rerr.code, rerr.field, rerr.message)
		return
	}
	switch {
	case req.From.IsZero():
		writeError(w, http.StatusBadRequest, "from", "is required (RFC 3339)")
		return
	case req.To.IsZero():
		writeError(w, http.StatusBadRequest, "to", "is required (RFC 3339)")
		return
	case req.To.Before(req.From):
		writeError(w, http.StatusBadRequest, "to", "must not be before from")
		return
	case req.To.After(s.now()):
		writeError(w, http.StatusBadRequest, "to", "must not be in the future: backfill runs past fires")
		return
	case t.Schedule == "":
		writeError(w, http.StatusBadRequest, "schedule", "the timer has no schedule (it runs only after its upstreams): no fires to backfill")
		return
	}
	if !s.nodeHandlerAllowed(w, r, t) {
		return
	}
	fires, err := countFires(t, req.From, req.To, MaxBackfill)
	if err != nil {
		s.storeError(w, r, err, "timer "+strconv.Quote(t.ID))
		return
	}
	if fires <= MaxBackfill && !s.fanOutCheck(w, r, t, fires, "to") {
		return
	}
	runs, err := s.engine.Backfill(r.Context(), t, req.From, req.To, MaxBackfill)
	if errors.Is(err, ErrTooManyFires) {
		writeError(w, http.StatusBadRequest, "to", fmt.Sprintf("the range holds more than %d fires: backfill a shorter range", MaxBackfill))
		return
	}
	if err != nil {
		s.storeError(w, r, err, "timer "+strconv.Quote(t.ID))
		return
	}
	s.audit(r, "timer.backfill", t.App, t.ID, fmt.Sprintf("%s to %s: %d runs", req.From.UTC().Format(time.RFC3339), req.To.UTC().Format(time.RFC3339), len(runs)))
	out := BackfillResponse{Count: len(runs), Runs: make([]*Run, len(runs))}
	for i, run := range runs {
		out.Runs[i] = RunFromModel(run)
	}
	writeJSON(w, http.StatusCreated, out)
}
