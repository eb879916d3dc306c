package api_test

import (
	"encoding/json"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/app/api"
	"github.com/chimehq/chime/internal/store/storetest"
	"github.com/chimehq/chime/model"
)

// runsEnv makes timers in apps billing and ops, each with runs of every
// status in the hour before testNow (one a minute, failed every third),
// and planned fires after it.
func runsEnv(t *testing.T) (e *env, billing, ops *api.Timer) {
	t.Helper()
	e = newEnv(t, withAuth)
	mk := func(app, name string) *api.Timer {
		body := validTimer(name)
		body["app"] = app
		var out api.Timer
		e.mustSend(t, request{method: "POST", path: "/api/v1/timers", body: body, token: rootToken}, 201, &out)
		past := storetest.NewRuns(out.ID, testNow.Add(-time.Hour), time.Minute, 60)
		for i, r := range past {
			r.Status = model.RunSucceeded
			if i%3 == 0 {
				r.Status = model.RunFailed
			}
		}
		future := storetest.NewRuns(out.ID, testNow.Add(time.Minute), time.Minute, 10)
		if _, err := e.store.InsertRuns(t.Context(), future); err != nil {
			t.Fatal(err)
		}
		// InsertRuns writes pending runs: the past ones, finished, as a
		// node would record them.
		if _, err := e.store.InsertRuns(t.Context(), past); err != nil {
			t.Fatal(err)
		}
		for _, r := range past {
			if err := storetest.ClaimFinish(t.Context(), e.store, r.ID, "n", r.ScheduledAt,
				model.Result{Status: r.Status, StartedAt: r.ScheduledAt, FinishedAt: r.ScheduledAt}); err != nil {
				t.Fatal(err)
			}
		}
		return &out
	}
	return e, mk("billing", "pay"), mk("ops", "backup")
}

// TestListAllRuns: GET /api/v1/runs lists the runs that came of every
// timer the token may see, newest first, by app, timer (id or app/name),
// status and instants, a page at a time; another app's runs are invisible
// to an app-scoped token; its counts agree.
func TestListAllRuns(t *testing.T) {
	t.Parallel()
	e, billing, ops := runsEnv(t)
	scoped := e.newToken(t, "billing-reader", model.RoleRead, "billing")
	list := func(token, query string) []*api.Run {
		t.Helper()
		var all []*api.Run
		cursor := ""
		for range 100 {
			q := query + "&limit=7"
			if cursor != "" {
				q += "&cursor=" + url.QueryEscape(cursor)
			}
			var page api.RunList
			e.mustSend(t, request{method: "GET", path: "/api/v1/runs?" + q, token: token}, 200, &page)
			all = append(all, page.Runs...)
			if cursor = page.NextCursor; cursor == "" {
				return all
			}
		}
		t.Fatal("pagination does not end")
		return nil
	}
	hourAgo := url.QueryEscape(testNow.Add(-time.Hour).Format(time.RFC3339))
	for _, tc := range []struct {
		name, token, query string
		want               int
		timers             []string
	}{
		{"all", rootToken, "x=1", 120, []string{billing.ID, ops.ID}},
		{"app", rootToken, "app=ops", 60, []string{ops.ID}},
		{"failed", rootToken, "status=failed", 40, []string{billing.ID, ops.ID}},
		{"failed of an app in the last half hour", rootToken, "app=billing&status=failed&from=" +
			url.QueryEscape(testNow.Add(-30*time.Minute).Format(time.RFC3339)), 10, []string{billing.ID}},
		{"timer by name", rootToken, "timer=" + url.QueryEscape("ops/backup"), 60, []string{ops.ID}},
		{"timer by id", rootToken, "timer=" + billing.ID + "&status=succeeded", 40, []string{billing.ID}},
		{"upcoming asked", rootToken, "status=pending&to=" + url.QueryEscape(testNow.Add(time.Hour).Format(time.RFC3339)), 20, []string{billing.ID, ops.ID}},
		{"scoped", scoped.Token, "from=" + hourAgo, 60, []string{billing.ID}},
		{"scoped asks for another app", scoped.Token, "app=ops", 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := list(tc.token, tc.query)
			if len(got) != tc.want {
				t.Fatalf("%d runs, want %d", len(got), tc.want)
			}
			for i, r := range got {
				if !slices.Contains(tc.timers, r.TimerID) {
					t.Fatalf("run %s of timer %s, want only %v", r.ID, r.TimerID, tc.timers)
				}
				if i > 0 && got[i-1].ScheduledAt.Before(r.ScheduledAt) {
					t.Fatalf("not newest first at %d", i)
				}
			}
		})
	}

	var counts api.RunCounts
	e.mustSend(t, request{method: "GET", path: "/api/v1/runs/counts?from=" + hourAgo, token: scoped.Token}, 200, &counts)
	if counts.Total != 60 || counts.Counts[model.RunFailed] != 20 || counts.Counts[model.RunSucceeded] != 40 || counts.Counts[model.RunPending] != 0 || len(counts.Counts) != 6 {
		t.Errorf("counts of the billing token = %+v", counts)
	}
	e.mustSend(t, request{method: "GET", path: "/api/v1/runs/counts?app=ops", token: scoped.Token}, 200, &counts)
	if counts.Total != 0 {
		t.Errorf("counts of app ops for the billing token = %+v, want none", counts)
	}

	// Bad input: 400 naming the field; a timer the token may not see is
	// not found, as one that does not exist.
	for _, tc := range []struct {
		token, path string
		code        int
		field       string
	}{
		{rootToken, "/api/v1/runs?status=done", 400, "status"},
		{rootToken, "/api/v1/runs?from=yesterday", 400, "from"},
		{rootToken, "/api/v1/runs?to=2026-13-01T00:00:00Z", 400, "to"},
		{rootToken, "/api/v1/runs?from=" + url.QueryEscape(testNow.Format(time.RFC3339)) + "&to=" + hourAgo, 400, "from"},
		{rootToken, "/api/v1/runs?limit=0", 400, "limit"},
		{rootToken, "/api/v1/runs?limit=1001", 400, "limit"},
		{rootToken, "/api/v1/runs?cursor=bm9wZQ", 400, "cursor"},
		{rootToken, "/api/v1/runs/counts?from=soon", 400, "from"},
		{rootToken, "/api/v1/runs?timer=nope", 404, ""},
		{scoped.Token, "/api/v1/runs?timer=" + ops.ID, 404, ""},
		{scoped.Token, "/api/v1/runs/counts?timer=" + url.QueryEscape("ops/backup"), 404, ""},
	} {
		code, _, b := e.send(t, request{method: "GET", path: tc.path, token: tc.token})
		if code != tc.code || tc.field != "" && !hasField(b, tc.field) {
			t.Errorf("GET %s: %d %s, want %d naming %q", tc.path, code, b, tc.code, tc.field)
		}
	}
}

// TestTimerRunViews: a timer's history is its runs scheduled up to now,
// newest first; its upcoming fires are its pending runs from now on,
// soonest first, paged with cursors of their own.
func TestTimerRunViews(t *testing.T) {
	t.Parallel()
	e, billing, _ := runsEnv(t)
	var manual api.Run
	e.mustSend(t, request{method: "POST", path: "/api/v1/timers/" + billing.ID + "/trigger", token: rootToken}, 201, &manual)
	path := "/api/v1/timers/" + billing.ID + "/runs?"
	var page api.RunList
	e.mustSend(t, request{method: "GET", path: path + "view=history&limit=5", token: rootToken}, 200, &page)
	if len(page.Runs) != 5 || page.Runs[0].ID != manual.ID || page.Runs[1].Status != "succeeded" || page.NextCursor == "" {
		t.Errorf("history = %+v", page)
	}
	var up []*api.Run
	cursor := ""
	for range 10 {
		q := "view=upcoming&limit=3"
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		var page api.RunList // a fresh one: decoding reuses the runs of the last
		e.mustSend(t, request{method: "GET", path: path + q, token: rootToken}, 200, &page)
		up = append(up, page.Runs...)
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if len(up) != 10 || !up[0].ScheduledAt.Equal(testNow.Add(time.Minute)) {
		t.Fatalf("upcoming = %d runs, first %+v", len(up), up[0])
	}
	for i := 1; i < len(up); i++ {
		if !up[i-1].ScheduledAt.Before(up[i].ScheduledAt) || up[i].Status != "pending" {
			t.Fatalf("upcoming not soonest first at %d", i)
		}
	}
	e.mustSend(t, request{method: "GET", path: path + "view=all", token: rootToken}, 200, &page)
	if len(page.Runs) != 71 || !page.Runs[0].ScheduledAt.After(testNow) {
		t.Errorf("all: %d runs, first %+v", len(page.Runs), page.Runs[0])
	}
	e.mustSend(t, request{method: "GET", path: path + "view=history&limit=1", token: rootToken}, 200, &page)
	for _, tc := range []struct{ query, field string }{
		{"view=later", "view"},
		{"view=upcoming&status=failed", "status"},
		{"view=upcoming&cursor=" + url.QueryEscape(page.NextCursor), "cursor"},
	} {
		code, _, b := e.send(t, request{method: "GET", path: path + tc.query, token: rootToken})
		if code != 400 || !hasField(b, tc.field) {
			t.Errorf("GET runs?%s: %d %s, want 400 naming %s", tc.query, code, b, tc.field)
		}
	}
}

// hasField reports whether b is an error body naming field.
func hasField(b []byte, field string) bool {
	var body api.ErrorBody
	return json.Unmarshal(b, &body) == nil && body.Error.Field == field
}
