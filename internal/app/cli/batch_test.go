package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/chimehq/chime/internal/app/api"
)

// TestPauseAndBatchCommands: chime timer pause/resume, chime app
// pause/resume and chime timer batch, by ids and by filter.
func TestPauseAndBatchCommands(t *testing.T) {
	t.Parallel()
	srv := apiServer(t)
	var ids []string
	for _, name := range []string{"one", "two", "other"} {
		r := chime(t, srv, "", createArgs(name)...)
		var tm api.Timer
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &tm) != nil {
			t.Fatalf("create %s: %d %s", name, r.code, r.stderr)
		}
		ids = append(ids, tm.ID)
	}

	r := chime(t, srv, "", "timers", "pause", ids[0])
	if r.code != 0 || !strings.Contains(r.stdout, "Paused:") || !strings.Contains(r.stdout, "true") {
		t.Errorf("timers pause: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = chime(t, srv, "", "timer", "resume", ids[0], "-o", "json")
	if r.code != 0 || !strings.Contains(r.stdout, `"paused": false`) {
		t.Errorf("timer resume: %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	r = chime(t, srv, "", "apps", "pause", "demo")
	if r.code != 0 || !strings.Contains(r.stdout, "3 changed, 0 unchanged") || !strings.Contains(r.stdout, ids[2]+"  paused") {
		t.Errorf("apps pause: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = chime(t, srv, "", "app", "resume", "demo", "-o", "json")
	var res api.BatchResult
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &res) != nil || len(res.Changed) != 3 {
		t.Errorf("app resume: %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// By filter: the timers whose name contains "o" (one, two, other).
	r = chime(t, srv, "", "timers", "batch", "--action", "disable", "--app", "demo", "--search", "O")
	if r.code != 0 || !strings.Contains(r.stdout, "3 changed, 0 unchanged") {
		t.Errorf("batch disable by filter: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = chime(t, srv, "", "timer", "batch", "--action", "disable", "--id", ids[0]+",nope", "-o", "json")
	res = api.BatchResult{}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &res) != nil || len(res.Changed) != 0 || len(res.Unchanged) != 2 ||
		res.Unchanged[0].Reason != "already disabled" || res.Unchanged[1].Reason != "not found" {
		t.Errorf("batch disable by ids: %d %+v\n%s%s", r.code, res, r.stdout, r.stderr)
	}
	r = chime(t, srv, "", "timer", "batch", "--action", "delete", "--id", ids[1])
	if r.code != 0 || !strings.Contains(r.stdout, ids[1]+"  deleted") {
		t.Errorf("batch delete: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, args := range [][]string{
		{"timer", "batch", "--id", ids[0]},
		{"timer", "batch", "--action", "pause", "--id", ids[0], "--app", "demo"},
		{"timer", "batch", "--action", "pause", "--enabled", "maybe"},
	} {
		if r := chime(t, srv, "", args...); r.code == 0 {
			t.Errorf("%v: exit 0, want a usage error", args)
		}
	}
}
