package api_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/chimehq/chime/internal/app/api"
)

// TestTimerByAppName: every route of a timer takes app/name, URL-encoded
// as one path segment, as well as the timer's id.
func TestTimerByAppName(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	created := e.createTimer(t, validTimer("ping"))
	other := e.createTimer(t, validTimer("pong"))
	ref := "/api/v1/timers/" + url.PathEscape("billing/ping")
	if ref != "/api/v1/timers/billing%2Fping" {
		t.Fatalf("escaped path = %q", ref)
	}

	var got api.Timer
	e.doJSON(t, "GET", ref, nil, http.StatusOK, &got)
	if got.ID != created.ID {
		t.Fatalf("GET by app/name: id %q, want %q", got.ID, created.ID)
	}
	for _, tc := range []struct {
		method, suffix string
		body           any
		want           int
	}{
		{"GET", "/runs", nil, http.StatusOK},
		{"GET", "/graph", nil, http.StatusOK},
		{"GET", "/next?n=2", nil, http.StatusOK},
		{"POST", "/disable", nil, http.StatusOK},
		{"POST", "/enable", nil, http.StatusOK},
		{"POST", "/pause", nil, http.StatusOK},
		{"POST", "/resume", nil, http.StatusOK},
		{"POST", "/trigger", nil, http.StatusCreated},
	} {
		e.doJSON(t, tc.method, ref+tc.suffix, tc.body, tc.want, nil)
	}

	// The body's id must be the timer's, whichever way the URL names it.
	body := validTimer("ping")
	body["description"] = "by name"
	body["id"] = other.ID
	e.doJSON(t, "PUT", ref, body, http.StatusBadRequest, nil)
	body["id"] = created.ID
	e.doJSON(t, "PUT", ref, body, http.StatusOK, &got)
	if got.ID != created.ID || got.Description != "by name" {
		t.Errorf("PUT by app/name: %+v", got)
	}

	// The batch takes app/name among its ids, and a timer named both ways
	// is acted on once.
	var res api.BatchResult
	e.doJSON(t, "POST", "/api/v1/timers:batch", map[string]any{"action": "disable", "ids": []string{"billing/pong", other.ID, "billing/nope"}}, http.StatusOK, &res)
	if len(res.Changed) != 1 || res.Changed[0] != other.ID || len(res.Results) != 2 ||
		res.Results[1].ID != "billing/nope" || res.Results[1].Status != http.StatusNotFound {
		t.Errorf("batch by app/name: %+v", res)
	}

	// An unencoded slash is another path; an unknown name is a 404 naming it.
	for _, path := range []string{"/api/v1/timers/billing/ping", "/api/v1/timers/" + url.PathEscape("billing/nope"), "/api/v1/timers/" + url.PathEscape("nope/ping") + "/runs"} {
		e.doJSON(t, "GET", path, nil, http.StatusNotFound, nil)
	}
	e.doJSON(t, "DELETE", ref, nil, http.StatusNoContent, nil)
	e.doJSON(t, "GET", "/api/v1/timers/"+created.ID, nil, http.StatusNotFound, nil)
}
