package api

// Pause and resume, of one timer and of an app, and the bulk actions of
// POST /api/v1/timers:batch.

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/store"
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
// either the ids of the timers it acts on or a filter that selects them,
// with the filters of GET /api/v1/timers.
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
// changed, and those it did not, each with the reason ("already paused",
// "not found"). NextCursor, when not empty, says that the filter selects
// more timers than this answer acted on: send the request again with it as
// filter.cursor (an app's pause and resume act on all its timers).
type BatchResult struct {
	Action     string         `json:"action"`
	Changed    []string       `json:"changed"`
	Unchanged  []BatchNoop    `json:"unchanged"`
	NextCursor string         `json:"next_cursor,omitempty"`
	timers     []*model.Timer // loaded, in the order of the request
}

// BatchNoop is a timer a bulk action did not change, and why.
type BatchNoop struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

func (s *Server) resumeTimer(w http.ResponseWriter, r *http.Request) {
	s.setPaused(w, r, false)
}
func (s *Server) pauseTimer(w http.ResponseWriter, r *http.Request) {
	s.setPaused(w, r, true)
}

// setPaused pauses or resumes a timer; doing so twice is not an error
// (and is audited all the same: it was asked for).
func (s *Server) setPaused(w http.ResponseWriter, r *http.Request, paused bool) {
	t, ok := s.loadTimer(w, r)
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

func (s *Server) pauseApp(w http.ResponseWriter, r *http.Request)  { s.appAction(w, r, BatchPause) }
func (s *Server) resumeApp(w http.ResponseWriter, r *http.Request) { s.appAction(w, r, BatchResume) }

// appAction pauses or resumes every timer of the {app} path value (the
// route's access says the token may write in it).
func (s *Server) appAction(w http.ResponseWriter, r *http.Request, action string) {
	app, ok := appParam(w, r)
	if !ok {
		return
	}
	out := BatchResult{Action: action, Changed: []string{}, Unchanged: []BatchNoop{}}
	after := ""
	for {
		list, next, err := s.store.ListTimers(r.Context(), store.TimerFilter{App: app, After: after, Limit: MaxBatch})
		if err != nil {
			s.serverError(w, r, err)
			return
		}
		page := BatchResult{Action: action, timers: list}
		if err := s.applyBatch(r, &page, "app "+app); err != nil {
			s.serverError(w, r, err)
			return
		}
		out.Changed = append(out.Changed, page.Changed...)
		out.Unchanged = append(out.Unchanged, page.Unchanged...)
		if next == "" {
			break
		}
		after = next
	}
	writeJSON(w, http.StatusOK, out)
}

// batchTimers answers POST /api/v1/timers:batch.
func (s *Server) batchTimers(w http.ResponseWriter, r *http.Request) {
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
	out := BatchResult{Action: req.Action, Changed: []string{}, Unchanged: []BatchNoop{}}
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
	} else {
		seen := map[string]bool{}
		for _, id := range req.IDs {
			if seen[id] {
				continue
			}
			seen[id] = true
			t, err := s.store.GetTimer(r.Context(), id)
			if err == nil && !p.allowsApp(t.App) {
				err = model.ErrNotFound // as GET /timers/{id} answers it
			}
			switch {
			case errors.Is(err, model.ErrNotFound):
				out.Unchanged = append(out.Unchanged, BatchNoop{ID: id, Reason: "not found"})
			case err != nil:
				s.serverError(w, r, err)
				return
			default:
				out.timers = append(out.timers, t)
			}
		}
	}
	if err := s.applyBatch(r, &out, "batch"); err != nil {
		s.serverError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// applyBatch applies out.Action to each of out.timers, recording in out
// what changed; each change is audited (detail: the timer's name and
// via). A timer deleted meanwhile is "not found".
func (s *Server) applyBatch(r *http.Request, out *BatchResult, via string) error {
	ctx := r.Context()
	for _, t := range out.timers {
		noop := func(reason string) { out.Unchanged = append(out.Unchanged, BatchNoop{ID: t.ID, Reason: reason}) }
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
		switch {
		case errors.Is(err, model.ErrNotFound):
			noop("not found")
		case err != nil:
			return err
		default:
			out.Changed = append(out.Changed, t.ID)
		}
	}
	return nil
}
