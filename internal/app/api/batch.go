package api

// Pause and resume, of one timer and of an app, and the bulk actions of
// POST /api/v1/timers:batch.

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// Batch actions: the values of BatchRequest.Action.
const (
	BatchEnable  = "enable"
	BatchDisable = "disable"
	BatchDelete  = "delete"
	BatchPause   = "pause"
	BatchResume  = "resume"
)

// MaxBatch is the most timers one batch request, or one app's pause or
// resume page, acts on: a list of ids may name at most this many, and a
// filter acts on this many timers at a time (BatchResult.NextCursor goes
// on).
const MaxBatch = 1000

// BatchRequest is the body of POST /api/v1/timers:batch: an action and
// either the timers it acts on (each by id or app/name) or a filter that
// selects them, with the filters of GET /api/v1/timers.
type BatchRequest struct {
	Action string       `json:"action"`
	IDs    []string     `json:"ids,omitempty"`
	Filter *BatchFilter `json:"filter,omitempty"`
}

// BatchFilter selects timers as GET /api/v1/timers does (app, search,
// enabled); Cursor is the NextCursor of the previous answer.
type BatchFilter struct {
	App     string `json:"app,omitempty"`
	Search  string `json:"search,omitempty"`
	Enabled *bool  `json:"enabled,omitempty"`
	Cursor  string `json:"cursor,omitempty"`
}

// BatchResult is the answer of a bulk action (POST /api/v1/timers:batch,
// POST /api/v1/apps/{app}/pause and /resume): the ids of the timers it
// changed, those it did not, each with the reason ("already paused",
// "not found"), and those it could not act on (Failed: a conflict such
// as dependents, or an error). Results has one entry per timer, in the
// order of the request, with the status that timer alone would have been
// answered with. The action is applied timer by timer: one timer's
// failure neither undoes the changes before it nor stops those after it,
// and the request is answered 200 all the same. NextCursor, when not
// empty, says that the filter selects more timers than this answer acted
// on: send the request again with it as filter.cursor (an app's pause and
// resume act on all its timers).
type BatchResult struct {
	Action     string         `json:"action"`
	Changed    []string       `json:"changed"`
	Unchanged  []BatchNoop    `json:"unchanged"`
	Failed     []BatchItem    `json:"failed"`
	Results    []BatchItem    `json:"results"`
	NextCursor string         `json:"next_cursor,omitempty"`
	timers     []*model.Timer // loaded, in the order of the request
}

// BatchItem is what a bulk action did to one timer: Status is the HTTP
// status of that timer alone (200 changed or already so, 404 not found,
// 409 a conflict, 500 an error, logged with its detail), Changed whether
// it changed, Reason why not.
type BatchItem struct {
	ID      string `json:"id"`
	Status  int    `json:"status"`
	Changed bool   `json:"changed"`
	Reason  string `json:"reason,omitempty"`
}

func newBatchResult(action string) BatchResult {
	return BatchResult{Action: action, Changed: []string{}, Unchanged: []BatchNoop{}, Failed: []BatchItem{}, Results: []BatchItem{}}
}

// changed, unchanged and failed record one timer's outcome.
func (b *BatchResult) changed(id string) {
	b.Changed = append(b.Changed, id)
	b.Results = append(b.Results, BatchItem{ID: id, Status: http.StatusOK, Changed: true})
}

func (b *BatchResult) unchanged(id, reason string) {
	status := http.StatusOK
	if reason == "not found" {
		status = http.StatusNotFound
	}
	b.Unchanged = append(b.Unchanged, BatchNoop{ID: id, Reason: reason})
	b.Results = append(b.Results, BatchItem{ID: id, Status: status, Reason: reason})
}

func (b *BatchResult) failed(id string, status int, reason string) {
	it := BatchItem{ID: id, Status: status, Reason: reason}
	b.Failed = append(b.Failed, it)
	b.Results = append(b.Results, it)
}

// merge appends the outcomes of page to b.
func (b *BatchResult) merge(page BatchResult) {
	b.Changed = append(b.Changed, page.Changed...)
	b.Unchanged = append(b.Unchanged, page.Unchanged...)
	b.Failed = append(b.Failed, page.Failed...)
	b.Results = append(b.Results, page.Results...)
}

// BatchNoop is a timer a bulk action did not change, and why.
type BatchNoop struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

func (s *actionsAPI) resumeTimer(w http.ResponseWriter, r *http.Request) {
	s.setPaused(w, r, false)
}
func (s *actionsAPI) pauseTimer(w http.ResponseWriter, r *http.Request) {
	s.setPaused(w, r, true)
}

// setPaused pauses or resumes a timer; doing so twice is not an error
// (and is audited all the same: it was asked for).
func (s *actionsAPI) setPaused(w http.ResponseWriter, r *http.Request, paused bool) {
	t, ok := s.timersAPI.loadTimer(w, r)
	if !ok {
		return
	}
	action := "timer.resume"
	if paused {
		action = "timer.pause"
	}
	if _, err := s.timers.SetPaused(r.Context(), t, paused, s.auditEntry(r, action)); err != nil {
		s.storeError(w, r, err, "timer "+strconv.Quote(t.ID))
		return
	}
	writeJSON(w, http.StatusOK, TimerFromModel(t, s.now(), nextFireCount))
}

func (s *actionsAPI) pauseApp(w http.ResponseWriter, r *http.Request) { s.appAction(w, r, BatchPause) }
func (s *actionsAPI) resumeApp(w http.ResponseWriter, r *http.Request) {
	s.appAction(w, r, BatchResume)
}

// appAction pauses or resumes every timer of the {app} path value (the
// route's access says the token may write in it).
func (s *actionsAPI) appAction(w http.ResponseWriter, r *http.Request, action string) {
	app, ok := appParam(w, r)
	if !ok {
		return
	}
	out := newBatchResult(action)
	after := ""
	rc := http.NewResponseController(w)
	for {
		if s.writeTimeout > 0 {
			// Each page gets the time of a request: an app of many
			// timers is not cut off by the server's write timeout.
			_ = rc.SetWriteDeadline(time.Now().Add(s.writeTimeout))
		}
		list, next, err := s.store.ListTimers(r.Context(), store.TimerFilter{App: app, After: after, Limit: MaxBatch})
		if err != nil {
			s.serverError(w, r, err)
			return
		}
		page := newBatchResult(action)
		page.timers = list
		s.applyBatch(r, &page, "app "+app)
		out.merge(page)
		if next == "" {
			break
		}
		after = next
	}
	writeJSON(w, http.StatusOK, out)
}

// batchTimers answers POST /api/v1/timers:batch.
func (s *actionsAPI) batchTimers(w http.ResponseWriter, r *http.Request) {
	var req BatchRequest
	if rerr := s.decodeJSON(w, r, &req); rerr != nil {
		writeError(w, rerr.code, rerr.field, rerr.message)
		return
	}
	switch req.Action {
	case BatchEnable, BatchDisable, BatchDelete, BatchPause, BatchResume:
	case "":
		writeError(w, http.StatusBadRequest, "action", "is required: enable, disable, delete, pause or resume")
		return
	default:
		writeError(w, http.StatusBadRequest, "action", "must be one of enable, disable, delete, pause, resume")
		return
	}
	switch {
	case len(req.IDs) > 0 && req.Filter != nil:
		writeError(w, http.StatusBadRequest, "filter", "give ids or a filter, not both")
		return
	case len(req.IDs) == 0 && req.Filter == nil:
		writeError(w, http.StatusBadRequest, "ids", "give the ids of the timers, or a filter")
		return
	case len(req.IDs) > MaxBatch:
		writeError(w, http.StatusBadRequest, "ids", "must name at most "+strconv.Itoa(MaxBatch)+" timers")
		return
	}
	out := newBatchResult(req.Action)
	p := principalOf(r.Context())
	if req.Filter != nil {
		f := req.Filter
		if len(f.Search) > maxSearchLen {
			writeError(w, http.StatusBadRequest, "filter.search", "must be at most "+strconv.Itoa(maxSearchLen)+" bytes")
			return
		}
		after, rerr := decodeCursor(f.Cursor, timerCursor)
		if rerr != nil {
			writeError(w, rerr.code, "filter.cursor", rerr.message)
			return
		}
		list, next, err := s.store.ListTimers(r.Context(), store.TimerFilter{App: f.App, Apps: p.apps,
			Enabled: f.Enabled, NameContains: f.Search, After: after, Limit: MaxBatch})
		if err != nil {
			s.serverError(w, r, err)
			return
		}
		out.timers, out.NextCursor = list, encodeCursor(next, timerCursor)
		s.applyBatch(r, &out, "batch")
	} else {
		seen := map[string]bool{}
		for _, id := range req.IDs {
			if seen[id] {
				continue
			}
			seen[id] = true
			t, err := s.timersAPI.visibleTimer(r.Context(), id) // as GET /timers/{id} answers it
			if err != nil {
				s.batchFailed(r, &out, id, err)
				continue
			}
			if t.ID != id { // named by app/name: once, with its id too
				if seen[t.ID] {
					continue
				}
				seen[t.ID] = true
			}
			// One at a time, so that Results keeps the order of the request.
			out.timers = []*model.Timer{t}
			s.applyBatch(r, &out, "batch")
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// applyBatch applies out.Action to each of out.timers, one by one,
// recording in out what changed, what did not and what failed; each
// change is audited (detail: the timer's name and via). A timer deleted
// meanwhile is "not found".
func (s *actionsAPI) applyBatch(r *http.Request, out *BatchResult, via string) {
	ctx := r.Context()
	for _, t := range out.timers {
		noop := func(reason string) { out.unchanged(t.ID, reason) }
		audit := s.auditEntry(r, "timer."+out.Action)
		audit.Detail = t.Name + " (" + via + ")"
		var err error
		switch out.Action {
		case BatchEnable, BatchDisable:
			enabled := out.Action == BatchEnable
			if t.Enabled == enabled {
				noop("already " + out.Action + "d")
				continue
			}
			_, err = s.timers.SetEnabled(ctx, t, enabled, audit)
		case BatchPause, BatchResume:
			paused := out.Action == BatchPause
			if t.Paused == paused {
				noop("already " + map[bool]string{true: "paused", false: "running (not paused)"}[paused])
				continue
			}
			_, err = s.timers.SetPaused(ctx, t, paused, audit)
		case BatchDelete:
			if err = s.store.DeleteTimer(ctx, t.ID); err == nil {
				audit.App, audit.Target = t.App, t.ID
				if aerr := s.store.AppendAudit(ctx, audit); aerr != nil {
					s.log.Error("api: audit entry not recorded", "action", audit.Action, "target", t.ID, "err", aerr)
				}
				if eerr := s.engine.TimerDeleted(ctx, t.ID); eerr != nil {
					s.log.Error("api: engine did not take the deleted timer", "timer_id", t.ID, "err", eerr)
				}
			}
		}
		if err != nil {
			s.batchFailed(r, out, t.ID, err)
			continue
		}
		out.changed(t.ID)
	}
}

// batchFailed records why a bulk action could not act on timer id.
func (s *actionsAPI) batchFailed(r *http.Request, out *BatchResult, id string, err error) {
	fe, isField := fieldError(err)
	switch {
	case errors.Is(err, model.ErrNotFound):
		out.unchanged(id, "not found")
	case isField:
		out.failed(id, http.StatusBadRequest, fe.Field+": "+fe.Message)
	case errors.Is(err, model.ErrForbidden):
		out.failed(id, http.StatusForbidden, "this token may not "+out.Action+" this timer")
	case errors.Is(err, model.ErrHasDependents):
		out.failed(id, http.StatusConflict, "other timers run after this one; delete or change them first")
	case errors.Is(err, model.ErrConflict):
		out.failed(id, http.StatusConflict, "conflicts with a concurrent change; try again")
	default:
		s.log.Error("api: batch action failed", "action", out.Action, "timer_id", id, "err", err,
			"method", r.Method, "path", r.URL.Path)
		out.failed(id, http.StatusInternalServerError, "internal error (logged)")
	}
}
