package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/app/api"
	"github.com/chimehq/chime/internal/store/storetest"
	"github.com/chimehq/chime/model"
)

// endedRun triggers a run of timer id through the root token and fails
// it in the store, and returns its id.
func (e *env) endedRun(t *testing.T, id string) string {
	t.Helper()
	var run api.Run
	e.mustSend(t, request{method: "POST", path: "/api/v1/timers/" + id + "/trigger", token: rootToken}, 201, &run)
	if _, err := e.store.SetRunStatus(t.Context(), run.ID, model.RunPending, model.RunFailed, "boom"); err != nil {
		t.Fatal(err)
	}
	return run.ID
}

// attempt claims run id for node at now and records res for the claim,
// filling its fence.
func (e *env) attempt(t *testing.T, id, node string, now time.Time, res model.Result) {
	t.Helper()
	if err := storetest.ClaimFinish(t.Context(), e.store, id, node, now, res); err != nil {
		t.Fatal(err)
	}
}

// TestRunAttempts: GET /api/v1/runs/{id} answers every recorded attempt,
// a run waiting for its retry as retrying with next_attempt_at, and the
// last answer's HTTP status and headers.
func TestRunAttempts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var tm api.Timer
	e.mustSend(t, request{method: "POST", path: "/api/v1/timers", body: validTimer("attempts")}, 201, &tm)
	var run api.Run
	e.mustSend(t, request{method: "POST", path: "/api/v1/timers/" + tm.ID + "/trigger"}, 201, &run)

	t0 := testNow.Add(time.Second)
	retry := t0.Add(30 * time.Second)
	e.attempt(t, run.ID, "n1", t0, model.Result{Status: model.RunFailed, StartedAt: t0, FinishedAt: t0.Add(120 * time.Millisecond),
		Error: "http status 503", Output: "busy", RetryAt: retry, HTTPStatus: 503,
		ResponseHeader: map[string]string{"Retry-After": "30", "Set-Cookie": model.Redacted}})
	var got api.Run
	e.mustSend(t, request{method: "GET", path: "/api/v1/runs/" + run.ID}, 200, &got)
	if got.Status != string(model.RunRetrying) || got.NextAttemptAt == nil || !got.NextAttemptAt.Equal(retry) {
		t.Fatalf("waiting for its retry: status %q, next_attempt_at %v; want retrying at %v", got.Status, got.NextAttemptAt, retry)
	}
	if len(got.Attempts) != 1 || got.HTTPStatus != 503 || got.ResponseHeaders["Retry-After"] != "30" {
		t.Fatalf("after one attempt: %d attempts, http_status %d, headers %v", len(got.Attempts), got.HTTPStatus, got.ResponseHeaders)
	}

	t1 := retry.Add(time.Second)
	e.attempt(t, run.ID, "n2", t1, model.Result{Status: model.RunSucceeded, StartedAt: t1, FinishedAt: t1.Add(40 * time.Millisecond),
		Output: "ok", HTTPStatus: 200, ResponseHeader: map[string]string{"Content-Type": "text/plain"}})
	got = api.Run{}
	e.mustSend(t, request{method: "GET", path: "/api/v1/runs/" + run.ID}, 200, &got)
	if got.Status != string(model.RunSucceeded) || got.NextAttemptAt != nil || got.HTTPStatus != 200 ||
		got.ResponseHeaders["Content-Type"] != "text/plain" {
		t.Fatalf("after the retry: status %q, next_attempt_at %v, http_status %d, headers %v",
			got.Status, got.NextAttemptAt, got.HTTPStatus, got.ResponseHeaders)
	}
	want := []model.Attempt{
		{Attempt: 1, Node: "n1", StartedAt: t0, EndedAt: t0.Add(120 * time.Millisecond), DurationMS: 120, Status: model.RunFailed,
			HTTPStatus: 503, ResponseHeaders: map[string]string{"Retry-After": "30", "Set-Cookie": model.Redacted},
			Error: "http status 503", Output: "busy"},
		{Attempt: 2, Node: "n2", StartedAt: t1, EndedAt: t1.Add(40 * time.Millisecond), DurationMS: 40, Status: model.RunSucceeded,
			HTTPStatus: 200, ResponseHeaders: map[string]string{"Content-Type": "text/plain"}, Output: "ok"},
	}
	if len(got.Attempts) != len(want) {
		t.Fatalf("attempts %+v, want %+v", got.Attempts, want)
	}
	for i, a := range got.Attempts {
		w := want[i]
		if a.Attempt != w.Attempt || a.Node != w.Node || !a.StartedAt.Equal(w.StartedAt) || !a.EndedAt.Equal(w.EndedAt) ||
			a.DurationMS != w.DurationMS || a.Status != w.Status || a.HTTPStatus != w.HTTPStatus || a.Error != w.Error ||
			a.Output != w.Output || len(a.ResponseHeaders) != len(w.ResponseHeaders) {
			t.Errorf("attempt %d: %+v, want %+v", i, a, w)
		}
		for k, v := range w.ResponseHeaders {
			if a.ResponseHeaders[k] != v {
				t.Errorf("attempt %d: header %s %q, want %q", i, k, a.ResponseHeaders[k], v)
			}
		}
	}
}

// TestRerun: POST /api/v1/runs/{id}/rerun makes a new manual run of the
// timer that names the run it reruns and its scheduled instant (the first
// run's, for a rerun of a rerun); a run that has not ended is not rerun.
func TestRerun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var tm api.Timer
	e.mustSend(t, request{method: "POST", path: "/api/v1/timers", body: validTimer("rerun")}, 201, &tm)
	origID := e.endedRun(t, tm.ID)
	var orig api.Run
	e.mustSend(t, request{method: "GET", path: "/api/v1/runs/" + origID}, 200, &orig)

	var first api.Run
	e.mustSend(t, request{method: "POST", path: "/api/v1/runs/" + origID + "/rerun"}, 201, &first)
	if first.ID == origID || first.TimerID != tm.ID || !first.Manual || first.RerunOf != origID ||
		first.RerunScheduledAt == nil || !first.RerunScheduledAt.Equal(orig.ScheduledAt) || first.Status != string(model.RunPending) {
		t.Fatalf("rerun of %s: %+v", origID, first)
	}
	var stored api.Run
	e.mustSend(t, request{method: "GET", path: "/api/v1/runs/" + first.ID}, 200, &stored)
	if stored.RerunOf != origID || stored.RerunScheduledAt == nil || !stored.RerunScheduledAt.Equal(orig.ScheduledAt) {
		t.Fatalf("stored rerun: rerun_of %q, rerun_scheduled_at %v", stored.RerunOf, stored.RerunScheduledAt)
	}

	// A rerun pending is not run again; ended, its rerun sends the first
	// run's instant.
	code, _, _ := e.send(t, request{method: "POST", path: "/api/v1/runs/" + first.ID + "/rerun"})
	if code != http.StatusConflict {
		t.Fatalf("rerun of a pending run: %d, want 409", code)
	}
	if _, err := e.store.SetRunStatus(t.Context(), first.ID, model.RunPending, model.RunCancelled, "stop"); err != nil {
		t.Fatal(err)
	}
	var second api.Run
	e.mustSend(t, request{method: "POST", path: "/api/v1/runs/" + first.ID + "/rerun"}, 201, &second)
	if second.RerunOf != first.ID || second.RerunScheduledAt == nil || !second.RerunScheduledAt.Equal(orig.ScheduledAt) {
		t.Fatalf("rerun of a rerun: rerun_of %q, rerun_scheduled_at %v; want %s at %v", second.RerunOf, second.RerunScheduledAt,
			first.ID, orig.ScheduledAt)
	}
	if code, _, _ := e.send(t, request{method: "POST", path: "/api/v1/runs/nope/rerun"}); code != http.StatusNotFound {
		t.Fatalf("rerun of an unknown run: %d, want 404", code)
	}
}
