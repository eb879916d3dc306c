package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/timers"
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
func (s *Server) timerGraph(w http.ResponseWriter, r *http.Request) {
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
// token may write in the timer's app (appCheck), and may see each timer
// the timer runs after (an upstream in an app it may not see is answered
// as missing), and may run its handler (nodeHandlerCheck).
func (s *Server) saveCheck(r *http.Request, verb string) timers.Check {
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
		return nil
	}
}

// deleteTimer answers DELETE /api/v1/timers/{id}[?cascade=false]. A timer
// that other timers run after is not deleted (409, naming them) unless
// cascade=false detaches them first: they stay, without this upstream.
// Deleting them with it (cascade=true) is not offered: it would delete
// timers the request does not name.
func (s *Server) deleteTimer(w http.ResponseWriter, r *http.Request) {
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
	if detach {
		ids, err := s.store.DetachDependents(r.Context(), id)
		if err != nil {
			s.storeError(w, r, err, "timer "+strconv.Quote(id))
			return
		}
		for _, d := range ids {
			s.audit(r, "timer.detach", t.App, d, "no longer runs after "+t.App+"/"+t.Name+" ("+id+"), deleted")
		}
	}
	if err := s.store.DeleteTimer(r.Context(), id); err != nil {
		if errors.Is(err, model.ErrHasDependents) {
			_, names, _ := strings.Cut(err.Error(), model.ErrHasDependents.Error()+": ")
			writeError(w, http.StatusConflict, "cascade",
				"other timers run after this one: "+names+"; delete or change them first, or pass ?cascade=false to detach them")
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
