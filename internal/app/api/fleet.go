package api

// This file: the fleet's side of the API (docs/fleet.md): a handler timer
// is created only when some live node has its handler, and a split fire's
// answer carries its shards.

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/chimehq/chime/internal/timers"
	"github.com/chimehq/chime/model"
)

// allowUnknownHandler reads ?allow_unknown_handler, answering 400 (and
// false) when it is not a boolean.
func allowUnknownHandler(w http.ResponseWriter, r *http.Request) (allow, ok bool) {
	v := r.URL.Query().Get("allow_unknown_handler")
	if v == "" {
		return false, true
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		writeError(w, http.StatusBadRequest, "allow_unknown_handler", strconv.Quote(v)+" is not true or false")
		return false, false
	}
	return b, true
}

// handlerCheck refuses a handler timer whose handler neither this node
// (Config.HandlerExists) nor any live node has, unless allow; an update
// that keeps old's handler name is not checked again (its handler may be
// away for a deploy). The refusal lists the live nodes' handlers to tokens
// not scoped to apps only: the handlers of every app's code are not a
// scoped token's to see.
func (s *timersAPI) handlerCheck(ctx context.Context, allow bool, old *model.Timer) timers.Check {
	return func(t *model.Timer) error {
		if allow || t.Action.Type != model.ActionHandler || t.Action.Handler == nil {
			return nil
		}
		name := t.Action.Handler.Name
		if old != nil && old.Action.Type == model.ActionHandler && old.Action.Handler != nil && old.Action.Handler.Name == name {
			return nil
		}
		if s.handlerExists != nil && s.handlerExists(name) {
			return nil
		}
		nodes, err := s.engine.Nodes(ctx)
		if err != nil {
			return err
		}
		var known []string
		for _, n := range nodes {
			if n.HasHandler(name) {
				return nil
			}
			known = append(known, n.Handlers...)
		}
		if principalOf(ctx).scoped() {
			return model.Errorf("action.handler.name", "no such handler %q on any live node; "+
				"add ?allow_unknown_handler=true to create the timer anyway", name)
		}
		slices.Sort(known)
		known = slices.Compact(known)
		have := "none"
		if len(known) > 0 {
			have = strings.Join(known, ", ")
		}
		return model.Errorf("action.handler.name", "no such handler %q on any live node (the live nodes have: %s); "+
			"add ?allow_unknown_handler=true to create the timer anyway", name, have)
	}
}

// both runs a, then b.
func both(a, b timers.Check) timers.Check {
	return func(t *model.Timer) error {
		if err := a(t); err != nil {
			return err
		}
		return b(t)
	}
}
