package api_test

import (
	"strings"
	"testing"

	"github.com/chimehq/chime/api"
)

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
