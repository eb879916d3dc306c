// Package storetest is the behaviour suite that every store.Store
// implementation must pass. An implementation's test calls Run with a
// function that opens a fresh, empty store:
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store { return openEmpty(t) })
//	}
//
// open is called once per subtest and must register its own cleanup.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/store"
)

// Run runs the suite. Subtests run sequentially; some start goroutines.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"TimerCRUD", testTimerCRUD},
		{"ListTimers", testListTimers},
		{"Planning", testPlanning},
		{"InsertRuns", testInsertRuns},
		{"InsertRunsConcurrent", testInsertRunsConcurrent},
		{"CancelAndDelete", testCancelAndDelete},
		{"ListRuns", testListRuns},
		{"PendingRuns", testPendingRuns},
		{"ClaimAndFinish", testClaimAndFinish},
		{"ClaimConcurrent", testClaimConcurrent},
		{"FinishRuns", testFinishRuns},
		{"RetryAndRequeue", testRetryAndRequeue},
		{"SetRunStatus", testSetRunStatus},
		{"DeleteTimer", testDeleteTimer},
		{"Nodes", testNodes},
		{"Stats", testStats},
		{"PolicyRoundTrip", testPolicyRoundTrip},
		{"ReleaseAndCount", testReleaseAndCount},
		{"ClaimSeesUpdatedTimer", testClaimSeesUpdatedTimer},
		{"DueRuns", testDueRuns},
		{"ExtendLeasesFenced", testExtendLeasesFenced},
		{"RequeueFenced", testRequeueFenced},
		{"RunningOn", testRunningOn},
		{"Now", testNow},
		{"FinishRunsBadValues", testFinishRunsBadValues},
		{"FinishRunsLarge", testFinishRunsLarge},
		{"Tokens", testTokens},
		{"Audit", testAudit},
		{"SigningSecrets", testSigningSecrets},
		{"ListTimersApps", testListTimersApps},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			if err := s.Ping(context.Background()); err != nil {
				t.Fatalf("Ping: %v", err)
			}
			tc.fn(t, s)
		})
	}
}

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

func mustTimer(t *testing.T, s store.Store, app, name string) *model.Timer {
	t.Helper()
	tm := NewTimer(app, name)
	must(t, s.CreateTimer(ctx(t), tm))
	return tm
}

func mustInsert(t *testing.T, s store.Store, runs []*model.Run) []*model.Run {
	t.Helper()
	got, err := s.InsertRuns(ctx(t), runs)
	must(t, err)
	return got
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

func testTimerCRUD(t *testing.T, s store.Store) {
	tm := mustTimer(t, s, "app", "one")
	got, err := s.GetTimer(ctx(t), tm.ID)
	must(t, err)
	equalTimer(t, got, tm)
	if got.CreatedAt.Location() != time.UTC {
		t.Errorf("CreatedAt location = %v, want UTC", got.CreatedAt.Location())
	}
	got, err = s.GetTimerByName(ctx(t), "app", "one")
	must(t, err)
	equalTimer(t, got, tm)

	if _, err := s.GetTimer(ctx(t), "nope"); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("GetTimer(missing) = %v, want ErrNotFound", err)
	}
	if _, err := s.GetTimerByName(ctx(t), "app", "nope"); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("GetTimerByName(missing) = %v, want ErrNotFound", err)
	}
	dup := NewTimer("app", "one")
	if err := s.CreateTimer(ctx(t), dup); !errors.Is(err, model.ErrConflict) {
		t.Errorf("CreateTimer(dup name) = %v, want ErrConflict", err)
	}
	// Same name in another app, and a name differing only in case, are fine.
	mustTimer(t, s, "other", "one")
	mustTimer(t, s, "app", "ONE")

	two := mustTimer(t, s, "app", "two")
	two.Name = "one"
	if err := s.UpdateTimer(ctx(t), two); !errors.Is(err, model.ErrConflict) {
		t.Errorf("UpdateTimer(to dup name) = %v, want ErrConflict", err)
	}
	two.Name = "two-renamed"
	two.Enabled = false
	two.Schedule = "0 * * * *"
	two.Action = model.Action{Type: model.ActionShell, Shell: &model.ShellAction{Command: "true"}}
	two.UpdatedAt = base.Add(time.Hour)
	two.PlannedUntil = base.Add(2 * time.Hour)
	must(t, s.UpdateTimer(ctx(t), two))
	// Updating with identical values must not look like a missing timer.
	must(t, s.UpdateTimer(ctx(t), two))
	got, err = s.GetTimer(ctx(t), two.ID)
	must(t, err)
	equalTimer(t, got, two)
	if got.Action.Shell == nil || got.Action.Shell.Command != "true" {
		t.Errorf("shell action lost: %+v", got.Action)
	}
	missing := NewTimer("app", "ghost")
	if err := s.UpdateTimer(ctx(t), missing); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("UpdateTimer(missing) = %v, want ErrNotFound", err)
	}

	must(t, s.DeleteTimer(ctx(t), tm.ID))
	if _, err := s.GetTimer(ctx(t), tm.ID); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("GetTimer(deleted) = %v, want ErrNotFound", err)
	}
	if err := s.DeleteTimer(ctx(t), tm.ID); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("DeleteTimer(deleted) = %v, want ErrNotFound", err)
	}
	// The name is free again.
	mustTimer(t, s, "app", "one")
}
