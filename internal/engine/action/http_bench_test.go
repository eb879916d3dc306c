package action_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/base/egress"
	"github.com/chimehq/chime/internal/engine/action"
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
	r := action.NewHTTPRunnerWith(action.HTTPOptions{Egress: &egress.Policy{}, Secrets: fixedSecrets{webhook.NewSecret()}})
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
	h.Set(model.HeaderTimerID, "tmr_1")
	h.Set(model.HeaderRunID, runID)
	h.Set(model.HeaderScheduledAt, now.UTC().Format(time.RFC3339Nano))
	h.Set(model.HeaderAttempt, strconv.Itoa(1))
	h.Set(model.HeaderNode, "bench-0000")
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

// BenchmarkHTTPLoopbackCeiling is the most callbacks a bare Go client and
// server in one process exchange per second on this machine, 16 requests
// in flight over 16 keep-alive connections, and the CPU each costs (client
// and server together, from getrusage): the floor under any HTTP fire rate
// of chime bench, whose receiver shares the process (docs/performance.md).
func BenchmarkHTTPLoopbackCeiling(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	const conns = 16
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}}
	cpu := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	b.SetParallelism(conns / runtime.GOMAXPROCS(0))
	start := cpu()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, err := http.NewRequest(http.MethodPost, srv.URL, http.NoBody)
			if err != nil {
				b.Error(err)
				return
			}
			req.Header.Set(model.HeaderRunID, "run")
			resp, err := c.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
	used := cpu() - start
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "requests/s")
	b.ReportMetric(float64(used.Microseconds())/float64(b.N), "cpu-µs/request")
	b.ReportMetric(used.Seconds()/b.Elapsed().Seconds(), "cores")
}
