package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/chimehq/chime/executor"
)

// Callback is one HTTP callback as the receiver saw it.
type Callback struct {
	TimerID     string    `json:"timer_id"`
	RunID       string    `json:"run_id"`
	ScheduledAt time.Time `json:"scheduled_at"`
	Attempt     int       `json:"attempt"`
	Received    time.Time `json:"received"`
}

// receiver is an HTTP server on loopback that records every callback.
type receiver struct {
	mu    sync.Mutex
	calls []Callback
	bad   int // callbacks without usable headers

	srv *http.Server
	url string
}

func startReceiver() (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("receiver: listen: %w", err)
	}
	r := &receiver{url: "http://" + ln.Addr().String() + "/fire", calls: make([]Callback, 0, 1<<14)}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }() // ends with close; lost callbacks show as missed
	return r, nil
}

// ServeHTTP records one callback and answers 204.
func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	now := time.Now()
	_, _ = io.Copy(io.Discard, io.LimitReader(req.Body, 1<<16))
	c := Callback{
		TimerID:  req.Header.Get(executor.HeaderTimerID),
		RunID:    req.Header.Get(executor.HeaderRunID),
		Received: now,
	}
	sched, err1 := time.Parse(time.RFC3339Nano, req.Header.Get(executor.HeaderScheduledAt))
	attempt, err2 := strconv.Atoi(req.Header.Get(executor.HeaderAttempt))
	c.ScheduledAt, c.Attempt = sched, attempt
	r.mu.Lock()
	if c.TimerID == "" || c.RunID == "" || err1 != nil || err2 != nil {
		r.bad++
	} else {
		r.calls = append(r.calls, c)
	}
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// snapshot returns a copy of the callbacks so far and the count of
// callbacks without usable headers.
func (r *receiver) snapshot() ([]Callback, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Callback(nil), r.calls...), r.bad
}

func (r *receiver) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = r.srv.Shutdown(ctx)
}

// apiClient calls the REST API of the nodes.
var apiClient = &http.Client{Timeout: 10 * time.Second}

// apiError is an answer with an unexpected status.
type apiError struct {
	Status int
	Body   string
}

func (e *apiError) Error() string { return fmt.Sprintf("status %d: %s", e.Status, e.Body) }

// callAPI sends body as JSON (nil: no body) and decodes a 2xx answer into out.
func callAPI(ctx context.Context, method, u string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("%s %s: marshal: %w", method, u, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, u, err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := apiClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, u, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w", method, u, err)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %w", method, u, &apiError{resp.StatusCode, string(bytes.TrimSpace(data))})
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: decode answer: %w", method, u, err)
		}
	}
	return nil
}

// timerResp is the part of a timer answer the checker needs.
type timerResp struct {
	ID        string    `json:"id"`
	Schedule  string    `json:"schedule"`
	CreatedAt time.Time `json:"created_at"`
}

// runResp is the part of a run answer the checker needs.
type runResp struct {
	ID          string    `json:"id"`
	TimerID     string    `json:"timer_id"`
	ScheduledAt time.Time `json:"scheduled_at"`
	Status      string    `json:"status"`
	Attempt     int       `json:"attempt"`
	Node        string    `json:"node"`
	Error       string    `json:"error"`
}

// maxRunPages bounds the pages read for one timer.
const maxRunPages = 1000

// listRuns returns every run of a timer, reading every page from base.
func listRuns(ctx context.Context, base, timerID string) ([]runResp, error) {
	var all []runResp
	cursor := ""
	for range maxRunPages {
		var page struct {
			Runs       []runResp `json:"runs"`
			NextCursor string    `json:"next_cursor"`
		}
		u := base + "/api/v1/timers/" + url.PathEscape(timerID) + "/runs?limit=1000"
		if cursor != "" {
			u += "&cursor=" + url.QueryEscape(cursor)
		}
		if err := callAPI(ctx, http.MethodGet, u, nil, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Runs...)
		if page.NextCursor == "" {
			return all, nil
		}
		cursor = page.NextCursor
	}
	return nil, errors.New("list runs of timer " + timerID + ": more than maxRunPages pages")
}
