package storetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// base is an instant with nanoseconds, to check that they survive.
var base = time.Date(2030, 1, 2, 3, 4, 0, 123456789, time.UTC)

var timerSeq atomic.Int64

// NewTimer returns a valid timer with a unique id and the given app and name.
func NewTimer(app, name string) *model.Timer {
	return &model.Timer{
		ID:          fmt.Sprintf("tmr%06d%s", timerSeq.Add(1), name),
		App:         app,
		Name:        name,
		Description: "a timer",
		Schedule:    "@every 5s",
		Timezone:    "Europe/Paris",
		Enabled:     true,
		Action: model.Action{Type: model.ActionHTTP, HTTP: &model.HTTPAction{
			Method: "POST", URL: "http://127.0.0.1:9/hook", Header: map[string]string{"K": "V"}, Body: `{"a":1}`,
		}},
		Timeout:   30 * time.Second,
		Retry:     model.RetryPolicy{MaxAttempts: 3, Backoff: time.Second},
		CreatedAt: base,
		UpdatedAt: base,
	}
}

// NewRuns returns n pending runs of timer, every interval from start.
func NewRuns(timerID string, start time.Time, interval time.Duration, n int) []*model.Run {
	runs := make([]*model.Run, n)
	for i := range runs {
		at := start.Add(time.Duration(i) * interval)
		runs[i] = &model.Run{ID: model.RunID(timerID, at), TimerID: timerID, ScheduledAt: at, DueAt: at,
			Status: model.RunPending, CreatedAt: base}
	}
	return runs
}

func ctx(t *testing.T) context.Context { return t.Context() }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// mustMade fails t when the call it is given, one that returns the runs
// it made, fails.
func mustMade(t *testing.T) func([]*model.Run, error) {
	return func(_ []*model.Run, err error) {
		t.Helper()
		must(t, err)
	}
}

func mustTimer(t *testing.T, s store.Store, app, name string) *model.Timer {
	t.Helper()
	tm := NewTimer(app, name)
	must(t, createTimer(ctx(t), s, tm))
	return tm
}

func mustInsert(t *testing.T, s store.Store, runs []*model.Run) []*model.Run {
	t.Helper()
	got, err := s.InsertRuns(ctx(t), runs)
	must(t, err)
	return got
}

// pendingRuns makes a timer of app "app" named name with n pending runs,
// one a second from base, in the store.
func pendingRuns(t *testing.T, s store.Store, name string, n int) (*model.Timer, []*model.Run) {
	t.Helper()
	tm := mustTimer(t, s, "app", name)
	runs := NewRuns(tm.ID, base, time.Second, n)
	mustInsert(t, s, runs)
	return tm, runs
}

// getRun reads a run back or fails the test.
func getRun(t *testing.T, s store.Store, id string) *model.Run {
	t.Helper()
	r, err := s.GetRun(ctx(t), id)
	must(t, err)
	return r
}

// leasesOf returns the leases of runs at attempt.
func leasesOf(runs []*model.Run, attempt int) []store.Lease {
	out := make([]store.Lease, len(runs))
	for i, r := range runs {
		out[i] = store.Lease{RunID: r.ID, Attempt: attempt}
	}
	return out
}

func ids(runs []*model.Run) []string {
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = r.ID
	}
	slices.Sort(out)
	return out
}

func claimsFor(runs []*model.Run, node string, now time.Time) []store.Claim {
	cs := make([]store.Claim, len(runs))
	for i, r := range runs {
		cs[i] = store.Claim{RunID: r.ID, Node: node, LeaseUntil: now.Add(time.Minute), Now: now}
	}
	return cs
}

func equalTimer(t *testing.T, got, want *model.Timer) {
	t.Helper()
	if got.ID != want.ID || got.App != want.App || got.Name != want.Name || got.Description != want.Description ||
		got.Schedule != want.Schedule || got.Timezone != want.Timezone || got.Enabled != want.Enabled ||
		got.Timeout != want.Timeout || got.Retry != want.Retry || !got.CreatedAt.Equal(want.CreatedAt) ||
		!got.UpdatedAt.Equal(want.UpdatedAt) || !got.PlannedUntil.Equal(want.PlannedUntil) {
		t.Errorf("timer mismatch:\n got %+v\nwant %+v", got, want)
	}
	if got.Action.Type != want.Action.Type || (want.Action.HTTP != nil && (got.Action.HTTP == nil ||
		got.Action.HTTP.URL != want.Action.HTTP.URL || got.Action.HTTP.Body != want.Action.HTTP.Body ||
		got.Action.HTTP.Header["K"] != want.Action.HTTP.Header["K"])) {
		t.Errorf("action mismatch: got %+v want %+v", got.Action, want.Action)
	}
}

// sortLeases orders leases by run, then attempt, to compare them as sets.
func sortLeases(ls []store.Lease) []store.Lease {
	ls = slices.Clone(ls)
	slices.SortFunc(ls, func(a, b store.Lease) int {
		if c := strings.Compare(a.RunID, b.RunID); c != 0 {
			return c
		}
		return a.Attempt - b.Attempt
	})
	return ls
}

// wantRun is what a run must look like after a step: its status, attempt
// and lease (nil: no lease).
type wantRun struct {
	status  model.RunStatus
	attempt int
	lease   *time.Time
}

func checkRun(t *testing.T, s store.Store, what, id string, w wantRun) {
	t.Helper()
	r := getRun(t, s, id)
	leaseOK := (r.LeaseUntil == nil) == (w.lease == nil) && (w.lease == nil || r.LeaseUntil.Equal(*w.lease))
	if r.Status != w.status || r.Attempt != w.attempt || !leaseOK {
		t.Errorf("%s: run %s is %s attempt %d lease %v, want %s attempt %d lease %v",
			what, id, r.Status, r.Attempt, r.LeaseUntil, w.status, w.attempt, w.lease)
	}
}

func at(t time.Time) *time.Time { return &t }

// text returns n bytes of printable ASCII.
func text(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	return string(b)
}

// clip shortens long text in failure messages.
func clip(s string) string {
	if len(s) > 80 {
		return s[:40] + "…" + s[len(s)-40:]
	}
	return s
}

// Finish records the result r with s.FinishRuns, and returns an error
// wrapping model.ErrNotClaimed when its fence did not hold.
// ClaimFinish claims run runID for node at now (a lease of a minute) and
// records res for that claim, its fence filled in, as a node would.
func ClaimFinish(ctx context.Context, s interface {
	ClaimRuns(context.Context, []store.Claim) ([]store.ClaimedRun, error)
	FinishRuns(context.Context, []model.Result) ([]bool, []*model.Run, error)
}, runID, node string, now time.Time, res model.Result) error {
	claimed, err := s.ClaimRuns(ctx, []store.Claim{{RunID: runID, Node: node, LeaseUntil: now.Add(time.Minute), Now: now}})
	if err != nil {
		return fmt.Errorf("claim run %s: %w", runID, err)
	}
	if len(claimed) != 1 {
		return fmt.Errorf("claim run %s: %w", runID, model.ErrNotClaimed)
	}
	res.RunID, res.Node, res.Attempt = runID, node, claimed[0].Run.Attempt
	return Finish(ctx, s, res)
}

func Finish(ctx context.Context, s interface {
	FinishRuns(context.Context, []model.Result) ([]bool, []*model.Run, error)
}, r model.Result) error {
	ok, _, err := s.FinishRuns(ctx, []model.Result{r})
	if err != nil {
		return err
	}
	if len(ok) != 1 || !ok[0] {
		return fmt.Errorf("finish run %s (node %s, attempt %d): %w", r.RunID, r.Node, r.Attempt, model.ErrNotClaimed)
	}
	return nil
}

// createTimer inserts tm as a save that creates it.
func createTimer(ctx context.Context, s store.Store, tm *model.Timer) error {
	_, err := s.SaveTimer(ctx, store.TimerWrite{Timer: tm, Create: true})
	return err
}
