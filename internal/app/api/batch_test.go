package api_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/chimehq/chime/internal/app/api"
	"github.com/chimehq/chime/model"
)

// TestBatchActions: POST /api/v1/timers:batch by ids and by filter, and an
// app's pause and resume, each answer saying what changed and what did not
// (and why), each change audited, an app-scoped token acting only on its
// apps.
func TestBatchActions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withAuth)
	mk := func(app, name string) string {
		body := validTimer(name)
		body["app"] = app
		var out api.Timer
		e.mustSend(t, request{method: "POST", path: "/api/v1/timers", body: body, token: rootToken}, 201, &out)
		return out.ID
	}
	a1, a2, a3 := mk("billing", "b-one"), mk("billing", "b-two"), mk("billing", "other")
	o1 := mk("ops", "o-one")
	batch := func(token string, body map[string]any) api.BatchResult {
		t.Helper()
		var out api.BatchResult
		e.mustSend(t, request{method: "POST", path: "/api/v1/timers:batch", body: body, token: token}, 200, &out)
		return out
	}
	noops := func(r api.BatchResult) map[string]string {
		m := map[string]string{}
		for _, n := range r.Unchanged {
			m[n.ID] = n.Reason
		}
		return m
	}

	// By ids: two disabled, one unknown.
	r := batch(rootToken, map[string]any{"action": "disable", "ids": []string{a1, a2, "nope"}})
	if !slices.Equal(r.Changed, []string{a1, a2}) || noops(r)["nope"] != "not found" || r.Action != "disable" {
		t.Errorf("disable by ids = %+v", r)
	}
	// Again: nothing changes, each says why.
	r = batch(rootToken, map[string]any{"action": "disable", "ids": []string{a1, a2}})
	if len(r.Changed) != 0 || noops(r)[a1] != "already disabled" || noops(r)[a2] != "already disabled" {
		t.Errorf("second disable = %+v", r)
	}
	// By filter: the disabled timers of app billing whose name has "b-".
	r = batch(rootToken, map[string]any{"action": "enable", "filter": map[string]any{"app": "billing", "search": "B-", "enabled": false}})
	if !slices.Equal(r.Changed, []string{a1, a2}) || len(r.Unchanged) != 0 {
		t.Errorf("enable by filter = %+v", r)
	}
	// Pause by filter, then the timers say so.
	r = batch(rootToken, map[string]any{"action": "pause", "filter": map[string]any{"app": "billing"}})
	if len(r.Changed) != 3 {
		t.Errorf("pause by filter = %+v, want the 3 billing timers", r)
	}
	var got api.Timer
	e.mustSend(t, request{method: "GET", path: "/api/v1/timers/" + a3, token: rootToken}, 200, &got)
	if !got.Paused || !*got.Enabled {
		t.Errorf("timer after a batch pause: paused %v enabled %v", got.Paused, *got.Enabled)
	}

	// An app's resume answers what it changed.
	var app api.BatchResult
	e.mustSend(t, request{method: "POST", path: "/api/v1/apps/billing/resume", token: rootToken}, 200, &app)
	if len(app.Changed) != 3 || app.Action != "resume" {
		t.Errorf("app resume = %+v", app)
	}
	e.mustSend(t, request{method: "POST", path: "/api/v1/apps/billing/resume", token: rootToken}, 200, &app)
	if len(app.Changed) != 0 || len(app.Unchanged) != 3 || !strings.Contains(app.Unchanged[0].Reason, "not paused") {
		t.Errorf("second app resume = %+v", app)
	}
	e.mustSend(t, request{method: "POST", path: "/api/v1/apps/ops/pause", token: rootToken}, 200, &app)
	if !slices.Equal(app.Changed, []string{o1}) {
		t.Errorf("app pause = %+v", app)
	}

	// A token scoped to ops: billing's timers are not found, and it may not
	// pause billing.
	scoped := e.newToken(t, "ops-writer", model.RoleWrite, "ops").Token
	r = batch(scoped, map[string]any{"action": "resume", "ids": []string{a1, o1}})
	if !slices.Equal(r.Changed, []string{o1}) || noops(r)[a1] != "not found" {
		t.Errorf("scoped resume = %+v", r)
	}
	r = batch(scoped, map[string]any{"action": "disable", "filter": map[string]any{}})
	if !slices.Equal(r.Changed, []string{o1}) {
		t.Errorf("scoped disable by an empty filter = %+v, want ops' timer only", r)
	}
	e.mustSend(t, request{method: "POST", path: "/api/v1/apps/billing/pause", token: scoped}, 403, nil)

	// Delete by ids; each change is in the audit log.
	r = batch(rootToken, map[string]any{"action": "delete", "ids": []string{a3}})
	if !slices.Equal(r.Changed, []string{a3}) {
		t.Errorf("delete = %+v", r)
	}
	e.mustSend(t, request{method: "GET", path: "/api/v1/timers/" + a3, token: rootToken}, 404, nil)
	var audit api.AuditList
	e.mustSend(t, request{method: "GET", path: "/api/v1/audit?target=" + a1, token: rootToken}, 200, &audit)
	var actions []string
	for _, en := range audit.Entries {
		actions = append(actions, en.Action+" "+en.Detail)
	}
	for _, want := range []string{"timer.disable b-one (batch)", "timer.enable b-one (batch)", "timer.pause b-one (batch)", "timer.resume b-one (app billing)"} {
		if !slices.Contains(actions, want) {
			t.Errorf("audit of %s = %q, want %q", a1, actions, want)
		}
	}
	e.mustSend(t, request{method: "GET", path: "/api/v1/audit?target=" + a3, token: rootToken}, 200, &audit)
	if len(audit.Entries) == 0 || audit.Entries[0].Action != "timer.delete" {
		t.Errorf("audit of the deleted timer = %+v", audit.Entries)
	}

	// Bad requests name the field.
	for _, tc := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"ids": []string{a1}}, "action"},
		{map[string]any{"action": "explode", "ids": []string{a1}}, "action"},
		{map[string]any{"action": "pause"}, "ids"},
		{map[string]any{"action": "pause", "ids": []string{a1}, "filter": map[string]any{}}, "filter"},
		{map[string]any{"action": "pause", "filter": map[string]any{"cursor": "junk"}}, "filter.cursor"},
	} {
		code, _, b := e.send(t, request{method: "POST", path: "/api/v1/timers:batch", body: tc.body, token: rootToken})
		if code != 400 || !strings.Contains(string(b), `"field":"`+tc.field+`"`) {
			t.Errorf("%v: %d %s, want 400 on %s", tc.body, code, b, tc.field)
		}
	}
}

// TestBatchItemByItem: a batch acts timer by timer and answers each one's
// status: deleting a timer others run after fails for that timer alone
// (409 in its result), the timers before and after it are deleted, and
// the request is answered 200.
func TestBatchItemByItem(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withAuth)
	mk := func(name string, after string) string {
		body := validTimer(name)
		if after != "" {
			body["after"] = []map[string]any{{"timer": after, "on": "success"}}
		}
		var out api.Timer
		e.mustSend(t, request{method: "POST", path: "/api/v1/timers", body: body, token: rootToken}, 201, &out)
		return out.ID
	}
	first, up, last := mk("bi-first", ""), mk("bi-up", ""), mk("bi-last", "")
	down := mk("bi-down", up)

	var r api.BatchResult
	e.mustSend(t, request{method: "POST", path: "/api/v1/timers:batch", token: rootToken,
		body: map[string]any{"action": "delete", "ids": []string{first, up, "nope", last}}}, 200, &r)
	if !slices.Equal(r.Changed, []string{first, last}) {
		t.Errorf("changed = %v, want %v", r.Changed, []string{first, last})
	}
	if len(r.Failed) != 1 || r.Failed[0].ID != up || r.Failed[0].Status != 409 || !strings.Contains(r.Failed[0].Reason, "run after") {
		t.Errorf("failed = %+v, want %s with 409", r.Failed, up)
	}
	var got []string
	for _, it := range r.Results {
		got = append(got, it.ID+" "+strconv.Itoa(it.Status))
	}
	if want := []string{first + " 200", up + " 409", "nope 404", last + " 200"}; !slices.Equal(got, want) {
		t.Errorf("results = %q, want %q", got, want)
	}
	for id, code := range map[string]int{first: 404, up: 200, last: 404, down: 200} {
		e.mustSend(t, request{method: "GET", path: "/api/v1/timers/" + id, token: rootToken}, code, nil)
	}
}
