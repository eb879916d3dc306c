package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/chimehq/chime/model"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// Outcomes of a delivery.
const (
	// OutcomeCompleted: the receiver answered with the client still
	// connected.
	OutcomeCompleted = "completed"
	// OutcomeAborted: the client went away (it cancelled the request, or
	// its process died) before the answer.
	OutcomeAborted = "aborted"
	// OutcomeInFlight: not answered yet when the callbacks were read.
	OutcomeInFlight = "in_flight"
)

// Sources of Callback.Node.
const (
	NodeFromHeader = "header" // X-Chime-Node
)

// Callback is one HTTP callback (one delivery) as the receiver saw it.
type Callback struct {
	TimerID     string    `json:"timer_id"`
	RunID       string    `json:"run_id"`
	ScheduledAt time.Time `json:"scheduled_at"`
	Attempt     int       `json:"attempt"`
	Received    time.Time `json:"received"` // the delivery's start: headers read
	// Node is the node that sent it ("" unknown), from NodeFrom.
	Node     string `json:"node,omitempty"`
	NodeFrom string `json:"node_from,omitempty"`
	// Long: a long action, held open for HoldMS before the answer.
	Long   bool    `json:"long,omitempty"`
	HoldMS float64 `json:"hold_ms,omitempty"`
	// End is when the delivery ended: answered, or aborted by the client;
	// zero while in flight.
	End     time.Time `json:"end"`
	Outcome string    `json:"outcome"`
}

// receiver is an HTTP server on loopback that records every callback.
// Callbacks to longURL are held open LongHoldMin…LongHoldMax.
type receiver struct {
	mu    sync.Mutex
	calls []Callback
	bad   int // callbacks without usable headers

	srv     *http.Server
	url     string
	longURL string
}

func startReceiver() (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("receiver: listen: %w", err)
	}
	base := "http://" + ln.Addr().String()
	r := &receiver{url: base + "/fire", longURL: base + "/long", calls: make([]Callback, 0, 1<<14)}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }() // ends with close; lost callbacks show as missed
	return r, nil
}

// sender returns the node that sent req, from its X-Chime-Node header
// ("" when it has none).
func (r *receiver) sender(req *http.Request) (string, string) {
	if n := req.Header.Get(model.HeaderNode); n != "" {
		return n, NodeFromHeader
	}
	return "", ""
}

// ServeHTTP records one callback at its start, holds it open if it is a
// long action, answers (204, or 200 after a hold), and records its end and
// outcome.
func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	now := time.Now()
	_, _ = io.Copy(io.Discard, io.LimitReader(req.Body, 1<<16))
	c := Callback{
		TimerID:  req.Header.Get(model.HeaderTimerID),
		RunID:    req.Header.Get(model.HeaderRunID),
		Received: now,
		Long:     req.URL.Path == "/long",
		Outcome:  OutcomeInFlight,
	}
	sched, err1 := time.Parse(time.RFC3339Nano, req.Header.Get(model.HeaderScheduledAt))
	attempt, err2 := strconv.Atoi(req.Header.Get(model.HeaderAttempt))
	c.ScheduledAt, c.Attempt = sched, attempt
	if c.TimerID == "" || c.RunID == "" || err1 != nil || err2 != nil {
		r.mu.Lock()
		r.bad++
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
		return
	}
	c.Node, c.NodeFrom = r.sender(req)
	var hold time.Duration
	if c.Long {
		hold = LongHoldMin + time.Duration(mrand.Int64N(int64(LongHoldMax-LongHoldMin)+1))
		c.HoldMS = ms(hold)
	}
	r.mu.Lock()
	i := len(r.calls)
	r.calls = append(r.calls, c)
	r.mu.Unlock()

	status := http.StatusNoContent
	if c.Long {
		status = http.StatusOK
		t := time.NewTimer(hold)
		select {
		case <-t.C:
		case <-req.Context().Done():
		}
		t.Stop()
	}
	// The request's context is done when the client closed the connection
	// (it cancelled the request, or died): the delivery was aborted.
	outcome := OutcomeCompleted
	if req.Context().Err() != nil {
		outcome = OutcomeAborted
	} else {
		w.WriteHeader(status)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	end := time.Now()
	r.mu.Lock()
	r.calls[i].End, r.calls[i].Outcome = end, outcome
	r.mu.Unlock()
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
