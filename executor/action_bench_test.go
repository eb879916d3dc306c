package executor_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/chimehq/chime/egress"
	"github.com/chimehq/chime/executor"
	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/webhook"
)

// BenchmarkHTTPRunner is one signed callback through the HTTP runner to a
// receiver on loopback, one at a time; BenchmarkHTTPBare is the same
// request (same headers and body) from a bare client with the request
// built ahead: the difference is the runner's own cost per callback.
func BenchmarkHTTPRunner(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer srv.Close()
	r := executor.NewHTTPRunnerWith(executor.HTTPOptions{Egress: &egress.Policy{}, Secrets: fixedSecrets{webhook.NewSecret()}})
	tm := httpTimer("bench", srv.URL)
	tm.Action.HTTP.Body = ""
	run := &model.Run{ID: model.RunID("tmr_1", time.Now()), TimerID: "tmr_1", Attempt: 1, Node: "bench-0000", ScheduledAt: time.Now()}
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Run(ctx, run, tm); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkHTTPBare(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer srv.Close()
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	now := time.Now()
	runID := model.RunID("tmr_1", now)
	req, err := http.NewRequestWithContext(b.Context(), http.MethodPost, srv.URL, http.NoBody)
	if err != nil {
		b.Fatal(err)
	}
	h := req.Header
	h.Set(executor.HeaderTimerID, "tmr_1")
	h.Set(executor.HeaderRunID, runID)
	h.Set(executor.HeaderScheduledAt, now.UTC().Format(time.RFC3339Nano))
	h.Set(executor.HeaderAttempt, strconv.Itoa(1))
	h.Set(executor.HeaderNode, "bench-0000")
	if err := webhook.SetHeaders(h, []string{webhook.NewSecret()}, runID, now, nil); err != nil {
		b.Fatal(err)
	}
	h.Set("User-Agent", "chime")
	b.ReportAllocs()
	for b.Loop() {
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}
