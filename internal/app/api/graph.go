package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/chimehq/chime/internal/timers"
	"github.com/chimehq/chime/model"
)

// Graph is the answer of GET /api/v1/timers/{id}/graph: the timer, the
// timers it runs after (Upstreams, in the order of its after) and the
// timers that run after it (Downstreams, by id). Timers in apps the token
// may not see are left out.
type Graph struct {
	Timer       GraphTimer  `json:"timer"`
	Upstreams   []GraphEdge `json:"upstreams"`
	Downstreams []GraphEdge `json:"downstreams"`
}

// GraphEdge is one dependency of a Graph: the other timer, and how the
// upstream run must end ("success", "failure" or "finish").
type GraphEdge struct {
	Timer GraphTimer `json:"timer"`
	On    string     `json:"on"`
}

// GraphTimer names a timer of a Graph.
type GraphTimer struct {
	ID       string `json:"id"`
	App      string `json:"app"`
	Name     string `json:"name"`
	Enabled  bool   `json:"enabled"`
	Schedule string `json:"schedule"`
}

func graphTimer(t *model.Timer) GraphTimer {
	return GraphTimer{ID: t.ID, App: t.App, Name: t.Name, Enabled: t.Enabled, Schedule: t.Schedule}
}

// timerGraph answers GET /api/v1/timers/{id}/graph.
func (s *timersAPI) timerGraph(w http.ResponseWriter, r *http.Request) {
	t, ok := s.loadTimer(w, r)
	if !ok {
		return
	}
	p := principalOf(r.Context())
	out := Graph{Timer: graphTimer(t), Upstreams: []GraphEdge{}, Downstreams: []GraphEdge{}}
	// visible loads a timer of the graph; false for one that is gone or
	// that the token may not see.
	visible := func(id string) (*model.Timer, bool, error) {
		o, err := s.store.GetTimer(r.Context(), id)
		if errors.Is(err, model.ErrNotFound) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		return o, p.allowsApp(o.App), nil
	}
	for _, d := range t.After {
		o, ok, err := visible(d.Timer)
		if err != nil {
			s.serverError(w, r, err)
			return
		}
		if ok {
			out.Upstreams = append(out.Upstreams, GraphEdge{Timer: graphTimer(o), On: d.On})
		}
	}
	downs, err := s.store.Downstreams(r.Context(), t.ID)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	for _, e := range downs {
		o, ok, err := visible(e.Downstream)
		if err != nil {
			s.serverError(w, r, err)
			return
		}
		if ok {
			out.Downstreams = append(out.Downstreams, GraphEdge{Timer: graphTimer(o), On: e.On})
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// saveCheck is the save path's check of a create or an update by r: the
// token may write in the timer's app (appCheck), may run its handler
// (nodeHandlerCheck), may see each timer the timer runs after (an upstream
// in an app it may not see is answered as missing; afterVisible answers it
// before the save resolves it, this is the check in the save itself), and
// may read the apps a generate_report names (reportAppsCheck).
func (s *timersAPI) saveCheck(r *http.Request, verb string) timers.Check {
	apps := appCheck(r, verb)
	return func(t *model.Timer) error {
		if err := apps(t); err != nil {
			return err
		}
		p := principalOf(r.Context())
		if err := s.nodeHandlerCheck(p, t); err != nil {
			return err
		}
		if !p.scoped() {
			return nil
		}
		for i, d := range t.After {
			up, err := s.store.GetTimer(r.Context(), d.Timer)
			if errors.Is(err, model.ErrNotFound) || (err == nil && !p.allowsApp(up.App)) {
				return model.Errorf(fmt.Sprintf("after[%d].timer", i), "no timer %q", d.Timer)
			}
			if err != nil {
				return err
			}
		}
		return reportAppsCheck(p, t)
	}
}

// afterVisible refuses, for a token scoped to apps, an entry of t.After
// that names (by id or app/name) a timer of an app the token may not see,
// exactly as the save path refuses a timer that does not exist: with a
// *model.FieldError on after[i].timer quoting the entry as given. It runs
// before the save resolves t.After, so that nothing the save checks about
// an upstream (that it is the timer itself, or named twice) can tell such
// a timer from a missing one. Entries Validate refuses are left to it.
func (s *timersAPI) afterVisible(r *http.Request, t *model.Timer) error {
	p := principalOf(r.Context())
	if !p.scoped() {
		return nil
	}
	for i, d := range t.After {
		if strings.TrimSpace(d.Timer) == "" || len(d.Timer) > 256 {
			continue
		}
		up, err := s.timerByRef(r.Context(), d.Timer)
		if errors.Is(err, model.ErrNotFound) {
			continue // the save answers it, the same way
		}
		if err != nil {
			return fmt.Errorf("%s: %w", fmt.Sprintf("after[%d].timer", i), err)
		}
		if !p.allowsApp(up.App) {
			return model.Errorf(fmt.Sprintf("after[%d].timer", i), "no timer %q", d.Timer)
		}
	}
	return nil
}

// reportHandler is the name of the built-in handler generate_report
// (internal/app/builtin.GenerateReportName), whose args name the apps whose
// runs it reads and sends where its args say.
const reportHandler = "generate_report"

// reportAppsCheck refuses, for a token scoped to apps, a generate_report
// timer whose args name an app the token may not see, or every app
// ("*"): 403 on action.handler.args.apps. Without apps the report covers
// the timer's own app, which appCheck allows.
func reportAppsCheck(p *principal, t *model.Timer) error {
	h := t.Action.Handler
	if !p.scoped() || t.Action.Type != model.ActionHandler || h == nil || h.Name != reportHandler {
		return nil
	}
	const field = "action.handler.args.apps"
	var args struct {
		Apps json.RawMessage `json:"apps"`
	}
	if len(h.Args) == 0 || json.Unmarshal(h.Args, &args) != nil || len(args.Apps) == 0 || string(args.Apps) == "null" {
		return nil // no apps: the timer's own (the handler checks the rest of its args)
	}
	var apps []string
	if err := json.Unmarshal(args.Apps, &apps); err != nil {
		return model.Errorf(field, "must be a list of app names")
	}
	for _, app := range apps {
		if app == "*" {
			return &forbiddenApp{field: field, message: `this token may not report on every app ("*"): name its own apps`}
		}
		if !p.allowsApp(app) {
			return &forbiddenApp{field: field, message: "this token may not report on app " + strconv.Quote(app)}
		}
	}
	return nil
}

// visiblePath joins the timers of a cycle's path ("app/name", or an id)
// for p: each run of timers p may not see (of another app, or not named)
// is shown as "…".
func visiblePath(p *principal, path []string) string {
	shown := make([]string, 0, len(path))
	for _, step := range path {
		app, _, named := strings.Cut(step, "/")
		if !named || !p.allowsApp(app) {
			if len(shown) == 0 || shown[len(shown)-1] != "…" {
				shown = append(shown, "…")
			}
			continue
		}
		shown = append(shown, step)
	}
	return strings.Join(shown, " → ")
}

// dependents returns the timers that run after id, split into those p may
// see (by id) and how many others there are.
func (s *timersAPI) dependents(ctx context.Context, p *principal, id string) (visible []*model.Timer, hidden int, err error) {
	edges, err := s.store.Downstreams(ctx, id)
	if err != nil {
		return nil, 0, err
	}
	for _, e := range edges {
		d, err := s.store.GetTimer(ctx, e.Downstream)
		switch {
		case errors.Is(err, model.ErrNotFound):
			continue // deleted meanwhile
		case err != nil:
			return nil, 0, err
		case p.allowsApp(d.App):
			visible = append(visible, d)
		default:
			hidden++
		}
	}
	return visible, hidden, nil
}

// dependentsConflict says which timers run after id, as far as p may see
// them: the names (and ids) of those in its apps, the count of the others.
func (s *timersAPI) dependentsConflict(ctx context.Context, p *principal, id string) (string, error) {
	visible, hidden, err := s.dependents(ctx, p, id)
	if err != nil {
		return "", err
	}
	var names []string
	for _, d := range visible {
		names = append(names, d.App+"/"+d.Name+" ("+d.ID+")")
	}
	switch {
	case hidden == 1:
		names = append(names, "1 timer of another app")
	case hidden > 1:
		names = append(names, strconv.Itoa(hidden)+" timers of other apps")
	}
	return "other timers run after this one: " + strings.Join(names, ", "), nil
}

// deleteTimer answers DELETE /api/v1/timers/{id}[?cascade=false]. A timer
// that other timers run after is not deleted (409, naming those the token
// may see and counting the others) unless cascade=false detaches them
// first: they stay, without this upstream. A token scoped to apps may
// detach only timers of its apps (403 otherwise: it may not change the
// others). Deleting them with it (cascade=true) is not offered: it would
// delete timers the request does not name.
func (s *timersAPI) deleteTimer(w http.ResponseWriter, r *http.Request) {
	detach := false
	switch v := r.URL.Query().Get("cascade"); v {
	case "":
	case "false":
		detach = true
	default:
		writeError(w, http.StatusBadRequest, "cascade",
			"must be false (detach the timers that run after this one, then delete it); deleting them with it is not supported")
		return
	}
	t, ok := s.loadTimer(w, r)
	if !ok {
		return
	}
	id := t.ID
	p := principalOf(r.Context())
	if detach {
		visible, hidden, err := s.dependents(r.Context(), p, id)
		if err != nil {
			s.serverError(w, r, err)
			return
		}
		if hidden > 0 {
			writeError(w, http.StatusForbidden, "cascade", fmt.Sprintf(
				"this token may not detach timers of apps it may not see: %d of the timers that run after this one are", hidden))
			return
		}
		apps := map[string]string{}
		for _, d := range visible {
			apps[d.ID] = d.App
		}
		ids, err := s.store.DetachDependents(r.Context(), id)
		if err != nil {
			s.storeError(w, r, err, "timer "+strconv.Quote(id))
			return
		}
		for _, d := range ids {
			// The entry is the detached timer's, in its app.
			app, ok := apps[d]
			if !ok {
				app = t.App // made a dependent meanwhile; its app is not known here
				if dt, err := s.store.GetTimer(r.Context(), d); err == nil {
					app = dt.App
				}
			}
			s.audit(r, "timer.detach", app, d, "no longer runs after "+t.App+"/"+t.Name+" ("+id+"), deleted")
		}
	}
	if err := s.store.DeleteTimer(r.Context(), id); err != nil {
		if errors.Is(err, model.ErrHasDependents) {
			msg, lerr := s.dependentsConflict(r.Context(), p, id)
			if lerr != nil {
				s.serverError(w, r, lerr)
				return
			}
			writeError(w, http.StatusConflict, "cascade", msg+"; delete or change them first, or pass ?cascade=false to detach them")
			return
		}
		s.storeError(w, r, err, "timer "+strconv.Quote(id))
		return
	}
	s.audit(r, "timer.delete", t.App, id, t.Name)
	if err := s.engine.TimerDeleted(r.Context(), id); err != nil {
		s.log.Error("api: engine did not take the deleted timer", "timer_id", id, "err", err)
	}
	w.WriteHeader(http.StatusNoContent)
}
