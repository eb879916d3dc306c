package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/chimehq/chime/internal/app/api"
)

// TestTimerByAppName: every command that takes a timer's ID takes
// APP/NAME as well.
func TestTimerByAppName(t *testing.T) {
	t.Parallel()
	srv := apiServer(t)
	r := chime(t, srv, "", createArgs("ping")...)
	var tm api.Timer
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &tm) != nil {
		t.Fatalf("create: %d %s%s", r.code, r.stdout, r.stderr)
	}

	r = chime(t, srv, "", "timer", "trigger", "demo/ping", "-o", "json")
	var run api.Run
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &run) != nil || run.TimerID != tm.ID {
		t.Fatalf("trigger demo/ping: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = chime(t, srv, "", "run", "list", "--timer", "demo/ping")
	if r.code != 0 || !strings.Contains(r.stdout, run.ID) {
		t.Errorf("run list --timer demo/ping: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, args := range [][]string{
		{"timer", "get", "demo/ping"},
		{"timer", "update", "demo/ping", "--description", "by name"},
		{"timer", "disable", "demo/ping"},
		{"timer", "enable", "demo/ping"},
		{"timer", "pause", "demo/ping"},
		{"timer", "resume", "demo/ping"},
		{"timer", "batch", "--action", "disable", "--id", "demo/ping"},
	} {
		r = chime(t, srv, "", append(args, "-o", "json")...)
		if r.code != 0 || !strings.Contains(r.stdout, tm.ID) {
			t.Errorf("%s: %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
	}
	r = chime(t, srv, "", "timer", "get", tm.ID, "-o", "json")
	var got api.Timer
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &got) != nil || got.Description != "by name" || *got.Enabled {
		t.Errorf("after the commands by name: %d %s%s", r.code, r.stdout, r.stderr)
	}

	r = chime(t, srv, "", "run", "list", "--timer", "demo/nope")
	if r.code != 1 || !strings.Contains(r.stderr, `timer "demo/nope" not found`) {
		t.Errorf("run list --timer demo/nope: %d\n%s", r.code, r.stderr)
	}
	r = chime(t, srv, "", "timer", "delete", "demo/ping")
	if r.code != 0 {
		t.Errorf("delete demo/ping: %d\n%s", r.code, r.stderr)
	}
	r = chime(t, srv, "", "timer", "get", tm.ID)
	if r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("get deleted: %d\n%s", r.code, r.stderr)
	}
}
