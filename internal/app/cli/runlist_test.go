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

// TestRunListAcross: run list lists the runs that came of every timer or
// of an app, a timer or a status since a time, a page or all of them;
// --upcoming lists a timer's planned fires.
func TestRunListAcross(t *testing.T) {
	t.Parallel()
	var st store.Store
	srv := apiServer(t, func(c *api.Config) { st = c.Store.(store.Store) })
	ids := map[string]string{}
	for _, args := range [][]string{createArgs("ping"), {"timer", "create", "--app", "ops", "--name", "backup", "--schedule", "@hourly",
		"--url", "http://127.0.0.1:9/hook", "-o", "json"}} {
		r := chime(t, srv, "", args...)
		var tm api.Timer
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &tm) != nil {
			t.Fatalf("create: %d %s%s", r.code, r.stdout, r.stderr)
		}
		ids[tm.App] = tm.ID
	}
	now := time.Now().UTC()
	ctx := t.Context()
	ended := func(timer string, ago time.Duration, status model.RunStatus) *model.Run {
		at := now.Add(-ago).Truncate(time.Second)
		r := &model.Run{ID: model.RunID(timer, at), TimerID: timer, ScheduledAt: at, DueAt: at, Status: model.RunPending, CreatedAt: at}
		if _, err := st.InsertRuns(ctx, []*model.Run{r}); err != nil {
			t.Fatal(err)
		}
		if err := storetest.ClaimFinish(ctx, st, r.ID, "n", at, model.Result{Status: status, StartedAt: at, FinishedAt: at,
			Error: "http status 500"}); err != nil {
			t.Fatal(err)
		}
		return r
	}
	recent := ended(ids["demo"], 30*time.Minute, model.RunFailed)
	old := ended(ids["demo"], 2*time.Hour, model.RunFailed)
	ok := ended(ids["demo"], 10*time.Minute, model.RunSucceeded)
	opsFailed := ended(ids["ops"], 20*time.Minute, model.RunFailed)
	at := now.Add(time.Hour).Truncate(time.Second)
	planned := &model.Run{ID: model.RunID(ids["demo"], at), TimerID: ids["demo"], ScheduledAt: at, DueAt: at, Status: model.RunPending, CreatedAt: now}
	if _, err := st.InsertRuns(ctx, []*model.Run{planned}); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		args      []string
		want, not []*model.Run
	}{
		{[]string{"--app", "demo", "--status", "failed", "--since", "1h"}, []*model.Run{recent}, []*model.Run{old, ok, opsFailed, planned}},
		{[]string{"--status", "failed"}, []*model.Run{recent, old, opsFailed}, []*model.Run{ok, planned}},
		{[]string{"--timer", "demo/ping"}, []*model.Run{recent, old, ok}, []*model.Run{opsFailed, planned}},
		{[]string{"--timer", "demo/ping", "--upcoming"}, []*model.Run{planned}, []*model.Run{recent, old, ok}},
		{[]string{"--limit", "1", "--all"}, []*model.Run{recent, old, ok, opsFailed}, []*model.Run{planned}},
	} {
		r := chime(t, srv, "", append([]string{"run", "list"}, tc.args...)...)
		if r.code != 0 {
			t.Errorf("run list %v: %d %s", tc.args, r.code, r.stderr)
			continue
		}
		for _, run := range tc.want {
			if !strings.Contains(r.stdout, run.ID) {
				t.Errorf("run list %v lacks %s:\n%s", tc.args, run.ID, r.stdout)
			}
		}
		for _, run := range tc.not {
			if strings.Contains(r.stdout, run.ID) {
				t.Errorf("run list %v lists %s:\n%s", tc.args, run.ID, r.stdout)
			}
		}
	}
	// A page, its cursor, the next page.
	r := chime(t, srv, "", "run", "list", "--limit", "2")
	if r.code != 0 || !strings.Contains(r.stdout, ok.ID) || !strings.Contains(r.stderr, "more runs: --cursor ") {
		t.Fatalf("run list --limit 2: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	cursor := strings.Fields(strings.TrimPrefix(r.stderr, "more runs: --cursor "))[0]
	r = chime(t, srv, "", "run", "list", "--limit", "2", "--cursor", cursor, "-o", "json")
	var page api.RunList
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &page) != nil || len(page.Runs) != 2 || page.Runs[0].ID != recent.ID {
		t.Errorf("the second page: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
