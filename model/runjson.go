package model

import (
	"net/http"
	"slices"
	"time"
)

// Attempt is the recorded outcome of one attempt of a run: every result
// the store records (store.Store.FinishRuns) keeps one, under the claim's
// attempt number, until the run is deleted.
type Attempt struct {
	Attempt    int       `json:"attempt"`
	Node       string    `json:"node"`
	StartedAt  time.Time `json:"started_at"`
	EndedAt    time.Time `json:"ended_at"`
	DurationMS int64     `json:"duration_ms"`
	// Status is the attempt's own outcome: succeeded, failed (also when
	// the run goes on to a retry) or skipped.
	Status RunStatus `json:"status"`
	// HTTPStatus and ResponseHeaders are what the receiver of an HTTP
	// action answered; absent when none answered.
	HTTPStatus      int               `json:"http_status,omitempty"`
	ResponseHeaders map[string]string `json:"response_headers,omitempty"`
	// Error and Output are the attempt's, their first MaxAttemptText
	// bytes.
	Error  string `json:"error"`
	Output string `json:"output"`
}

// MaxAttemptText is how many bytes of an attempt's output and error its
// record keeps (the run keeps more of its last attempt's).
const MaxAttemptText = 4 << 10

// RunJSON is the JSON form of a run, the one of API answers and of the
// run in a notification's payload.
type RunJSON struct {
	ID          string    `json:"id"`
	TimerID     string    `json:"timer_id"`
	ScheduledAt time.Time `json:"scheduled_at"`
	DueAt       time.Time `json:"due_at"`
	// Status is the run's status, or RunRetrying for a pending run that
	// waits for the retry of a failed attempt.
	Status     string     `json:"status"`
	Attempt    int        `json:"attempt"`
	StartedAt  *time.Time `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
	DurationMS int64      `json:"duration_ms"`
	Output     string     `json:"output"`
	Error      string     `json:"error"`
	Node       string     `json:"node"`
	Manual     bool       `json:"manual"`
	// NextAttemptAt is, while Status is retrying, when the retry is due.
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
	// HTTPStatus and ResponseHeaders are the answer to the last recorded
	// attempt of an HTTP action, secret-named headers redacted (see
	// ResponseHeaders); set where the attempts are (GET /api/v1/runs/{id}).
	HTTPStatus      int               `json:"http_status,omitempty"`
	ResponseHeaders map[string]string `json:"response_headers,omitempty"`
	// Attempts are the run's recorded attempts, the first first (GET
	// /api/v1/runs/{id} only).
	Attempts []Attempt `json:"attempts,omitempty"`
	// Notifications are the run's failure and recovery notifications and
	// how their delivery went (GET /api/v1/runs/{id} only).
	Notifications []*Notification `json:"notifications,omitempty"`
	// FireID is set on the runs of a fire split over nodes (broadcast,
	// shards): the id of the fire's own run, on it and on each shard.
	// ShardIndex (from 0) and ShardTotal are set on a shard; the fire's
	// own run has ShardTotal and, in GET /runs/{id}, its Shards.
	FireID     string     `json:"fire_id,omitempty"`
	ShardIndex *int       `json:"shard_index,omitempty"`
	ShardTotal int        `json:"shard_total,omitempty"`
	Shards     []*RunJSON `json:"shards,omitempty"`
	// Reason is, for a skipped run, why its fire did not run: a code of
	// docs/skips.md (misfire, catchup_window, overlap, paused, max_fires,
	// handler_missing, end_at). Absent for other runs.
	Reason string `json:"reason,omitempty"`
	// Request is what the executor sent for the last attempt, secrets
	// redacted (see SentRequest); null before one was recorded.
	Request *SentRequest `json:"request"`
	// UpstreamRunID is the upstream run whose end made this run (a timer
	// with After); absent for other runs.
	UpstreamRunID string `json:"upstream_run_id,omitempty"`
	// RerunOf is the run this one runs again, and RerunScheduledAt that
	// run's scheduled instant (sent as X-Chime-Scheduled-At); absent for
	// other runs.
	RerunOf          string     `json:"rerun_of,omitempty"`
	RerunScheduledAt *time.Time `json:"rerun_scheduled_at,omitempty"`
}

// JSON returns r's JSON form, its times in UTC.
func (r *Run) JSON() *RunJSON {
	out := &RunJSON{
		ID:            r.ID,
		TimerID:       r.TimerID,
		ScheduledAt:   r.ScheduledAt.UTC(),
		DueAt:         r.DueAt.UTC(),
		Status:        string(r.Status),
		Attempt:       r.Attempt,
		DurationMS:    r.DurationMS,
		Output:        r.Output,
		Error:         r.Error,
		Node:          r.Node,
		Manual:        r.Manual,
		UpstreamRunID: r.UpstreamRunID,
		Request:       r.Request,
		Reason:        r.Reason,
		FireID:        r.FireID,
		RerunOf:       r.RerunOf,
	}
	if r.Status == RunPending && r.Failures > 0 {
		out.Status = string(RunRetrying)
		due := r.DueAt.UTC()
		out.NextAttemptAt = &due
	}
	if r.Shard != nil {
		i := r.Shard.Index
		out.ShardIndex, out.ShardTotal = &i, r.Shard.Total
	}
	out.StartedAt = utcPtr(r.StartedAt)
	out.FinishedAt = utcPtr(r.FinishedAt)
	if r.RerunOf != "" && !r.RerunScheduledAt.IsZero() {
		out.RerunScheduledAt = utcPtr(&r.RerunScheduledAt)
	}
	return out
}

// SetAttempts sets j's Attempts to as, and its HTTPStatus and
// ResponseHeaders to those of the last of them.
func (j *RunJSON) SetAttempts(as []Attempt) {
	j.Attempts = as
	if len(as) > 0 {
		last := as[len(as)-1]
		j.HTTPStatus, j.ResponseHeaders = last.HTTPStatus, last.ResponseHeaders
	}
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// Bounds of the response headers an attempt keeps (ResponseHeaders).
const (
	maxResponseHeaders     = 64
	maxResponseHeaderValue = 512
)

// ResponseHeaders returns the headers of a response to an HTTP action a as
// an attempt keeps them: the first value of each, cut to 512 bytes, at
// most 64 headers (the first by name), the values of secret-named ones
// (a.IsSecretHeader, which also covers Set-Cookie) Redacted.
func ResponseHeaders(a *HTTPAction, hdr http.Header) map[string]string {
	if len(hdr) == 0 {
		return nil
	}
	if a == nil {
		a = &HTTPAction{}
	}
	names := make([]string, 0, len(hdr))
	for k := range hdr {
		names = append(names, k)
	}
	slices.Sort(names)
	out := make(map[string]string, min(len(names), maxResponseHeaders))
	for _, k := range names[:min(len(names), maxResponseHeaders)] {
		v := ""
		if vs := hdr[k]; len(vs) > 0 {
			v = vs[0]
		}
		if v != "" && a.IsSecretHeader(k) {
			v = Redacted
		}
		out[k] = Cut(v, maxResponseHeaderValue)
	}
	return out
}
