package api_test

import (
	"strings"
	"testing"

	"github.com/chimehq/chime/api"
	"github.com/chimehq/chime/model"
)

// TestNodeHandlersNeedAdmin: a timer running a handler that acts on the
// node is saved, triggered and backfilled only by an admin token or in an
// app of BuiltinsApps; any other token is answered 403 naming the handler.
func TestNodeHandlersNeedAdmin(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withAuth, func(c *api.Config) {
		c.NodeHandlers = []string{"backup_database"}
		c.BuiltinsApps = []string{"ops"}
		c.HandlerExists = func(string) bool { return true }
	})
	backup := func(app, name string) map[string]any {
		body := validTimer(name)
		body["app"] = app
		body["action"] = map[string]any{"type": "handler", "handler": map[string]any{"name": "backup_database"}}
		return body
	}
	writer := e.newToken(t, "writer", model.RoleWrite).Token
	scopedAdmin := e.newToken(t, "billing-admin", model.RoleAdmin, "billing").Token
	for _, tc := range []struct {
		name, token, app string
		want             int
	}{
		{"write token", writer, "billing", 403},
		{"admin scoped to the app", scopedAdmin, "billing", 403},
		{"admin token", rootToken, "billing", 201},
		{"write token in a builtins app", writer, "ops", 201},
	} {
		code, _, b := e.send(t, request{method: "POST", path: "/api/v1/timers", token: tc.token, body: backup(tc.app, "bk-"+strings.ReplaceAll(tc.name, " ", "-"))})
		if code != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, code, b, tc.want)
		}
		if code == 403 && (!strings.Contains(string(b), `"field":"action.handler.name"`) || !strings.Contains(string(b), "backup_database")) {
			t.Errorf("%s: %s, want the handler named", tc.name, b)
		}
	}
	// A write token may not re-aim an admin's timer, nor fire it.
	var tm api.Timer
	e.mustSend(t, request{method: "POST", path: "/api/v1/timers", token: rootToken, body: backup("billing", "bk-admin")}, 201, &tm)
	e.mustSend(t, request{method: "PUT", path: "/api/v1/timers/" + tm.ID, token: writer, body: backup("billing", "bk-admin")}, 403, nil)
	e.mustSend(t, request{method: "POST", path: "/api/v1/timers/" + tm.ID + "/trigger", token: writer}, 403, nil)
	e.mustSend(t, request{method: "POST", path: "/api/v1/timers/" + tm.ID + "/backfill", token: writer,
		body: map[string]any{"from": "2025-01-01T00:00:00Z", "to": "2025-01-02T00:00:00Z"}}, 403, nil)
	// Other handlers are not concerned.
	other := validTimer("other-handler")
	other["action"] = map[string]any{"type": "handler", "handler": map[string]any{"name": "cleanup"}}
	e.mustSend(t, request{method: "POST", path: "/api/v1/timers", token: writer, body: other}, 201, nil)
}

// TestRunsPerRequestBound: a backfill whose fires times the runs each
// fire splits into exceed api.MaxRunsPerRequest is refused, naming the
// product; at the bound it runs.
func TestRunsPerRequestBound(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withAuth)
	body := validTimer("fan-out")
	body["shards"] = 1000
	var tm api.Timer
	e.mustSend(t, request{method: "POST", path: "/api/v1/timers", body: body, token: rootToken}, 201, &tm)
	path := "/api/v1/timers/" + tm.ID + "/backfill"

	// Daily fires: 20 days are 20 fires of 1000 shards.
	code, _, b := e.send(t, request{method: "POST", path: path, token: rootToken,
		body: map[string]any{"from": "2025-01-01T00:00:00Z", "to": "2025-01-20T23:00:00Z"}})
	if code != 400 || !strings.Contains(string(b), "shards (1000) × fires (20) = 20000 runs exceeds 10000") || !strings.Contains(string(b), `"field":"to"`) {
		t.Errorf("backfill of 20 000 runs: %d %s, want 400 naming the product", code, b)
	}
	var out api.BackfillResponse
	e.mustSend(t, request{method: "POST", path: path, token: rootToken,
		body: map[string]any{"from": "2025-01-01T00:00:00Z", "to": "2025-01-10T23:00:00Z"}}, 201, &out)
	if out.Count != 10 {
		t.Errorf("backfill of 10 fires made %d", out.Count)
	}
	// A trigger is one fire: 1000 runs at most.
	e.mustSend(t, request{method: "POST", path: "/api/v1/timers/" + tm.ID + "/trigger", token: rootToken}, 201, nil)
}
