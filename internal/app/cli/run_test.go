package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/app/api"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/internal/store/storetest"
	"github.com/chimehq/chime/model"
)

// TestRunGetAttempts: chime run get prints the run's attempts, the last
// answer's HTTP status and headers, and a retrying run's next attempt.
func TestRunGetAttempts(t *testing.T) {
	t.Parallel()
	var st store.Store
	srv := apiServer(t, func(c *api.Config) { st = c.Store.(store.Store) })
	r := chime(t, srv, "", createArgs("attempts")...)
	if r.code != 0 {
		t.Fatalf("create: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var tm api.Timer
	r = chime(t, srv, "", "timer", "get", "demo/attempts", "-o", "json")
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &tm) != nil {
		t.Fatalf("timer get: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = chime(t, srv, "", "timer", "trigger", tm.ID, "-o", "json")
	var run api.Run
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &run) != nil {
		t.Fatalf("trigger: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	ctx := t.Context()
	now := time.Now().UTC()
	finish := func(node string, res model.Result) {
		t.Helper()
		if err := storetest.ClaimFinish(ctx, st, run.ID, node, now, res); err != nil {
			t.Fatal(err)
		}
	}
	retry := now.Add(-time.Second) // due again at once
	finish("node-a", model.Result{Status: model.RunFailed, StartedAt: now, FinishedAt: now.Add(120 * time.Millisecond),
		Error: "http status 503", RetryAt: retry, HTTPStatus: 503, ResponseHeader: map[string]string{"Retry-After": "1"}})
	r = chime(t, srv, "", "run", "get", run.ID)
	for _, want := range []string{"retrying", "Next attempt:", "HTTP status:", "503", "Retry-After:", "Attempts:", "node-a", "120ms", "http status 503"} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("run get of a retrying run: no %q in\n%s%s", want, r.stdout, r.stderr)
		}
	}
	finish("node-b", model.Result{Status: model.RunSucceeded, StartedAt: now, FinishedAt: now.Add(7 * time.Millisecond),
		HTTPStatus: 200, ResponseHeader: map[string]string{"Content-Type": "text/plain"}})
	r = chime(t, srv, "", "run", "get", run.ID)
	if r.code != 0 || strings.Contains(r.stdout, "Next attempt:") || !strings.Contains(r.stdout, "succeeded") {
		t.Fatalf("run get of a succeeded run: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var lines []string
	for l := range strings.Lines(r.stdout) {
		if f := strings.Fields(l); len(f) >= 3 && (f[2] == "node-a" || f[2] == "node-b") {
			lines = append(lines, strings.Join(f[:3], " "))
		}
	}
	if strings.Join(lines, "; ") != "1 failed node-a; 2 succeeded node-b" {
		t.Errorf("attempt rows %q, want both attempts in order\n%s", lines, r.stdout)
	}
}
