// Package apitest provides a test double of the API's engine: a FakeEngine
// that records what the API asked of it. Tests pair it with a real SQLite
// store.
package apitest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/chimehq/chime/internal/app/api"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/internal/timers"
	"github.com/chimehq/chime/model"
)

// Saved records one Engine.Saved call.
type Saved struct {
	Timer           model.Timer
	ScheduleChanged bool
}

// FakeEngine implements api.Engine for tests: it records the calls, and
// Trigger inserts a manual pending run into Store (when set).
type FakeEngine struct {
	Store    store.Store
	Now      func() time.Time // nil: time.Now
	ReadyErr error
	// Handlers are the handlers the node of Nodes advertises.
	Handlers []string

	mu      sync.Mutex
	saved   []Saved
	deleted []string
	reruns  int
}

// PlanSave plans nothing: the timer is saved unplanned.
func (e *FakeEngine) PlanSave(ctx context.Context, w *store.TimerWrite, replan bool) {}

// Saved records the call.
func (e *FakeEngine) Saved(ctx context.Context, t *model.Timer, scheduleChanged bool, inserted []*model.Run) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.saved = append(e.saved, Saved{Timer: *t, ScheduleChanged: scheduleChanged})
}

// TimerDeleted records the call.
func (e *FakeEngine) TimerDeleted(ctx context.Context, id string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.deleted = append(e.deleted, id)
	return nil
}

// Backfill makes a manual pending run for every fire in [from, to].
func (e *FakeEngine) Backfill(ctx context.Context, t *model.Timer, from, to time.Time, max int) ([]*model.Run, error) {
	s, err := timers.Schedule(t)
	if err != nil {
		return nil, err
	}
	var runs []*model.Run
	for f := s.Next(from.Add(-time.Nanosecond)); !f.IsZero() && !f.After(to); f = s.Next(f) {
		if len(runs) == max {
			return nil, api.ErrTooManyFires
		}
		runs = append(runs, &model.Run{ID: model.RunID(t.ID, f), TimerID: t.ID, ScheduledAt: f, DueAt: f,
			Status: model.RunPending, Manual: true, CreatedAt: f})
	}
	if e.Store != nil && len(runs) > 0 {
		if _, err := e.Store.InsertRuns(ctx, runs); err != nil {
			return nil, fmt.Errorf("backfill %s: %w", t.ID, err)
		}
	}
	return runs, nil
}

// Trigger makes a manual pending run due now.
func (e *FakeEngine) Trigger(ctx context.Context, t *model.Timer) (*model.Run, error) {
	now := time.Now
	if e.Now != nil {
		now = e.Now
	}
	at := now().UTC()
	r := &model.Run{ID: model.RunID(t.ID, at), TimerID: t.ID, ScheduledAt: at, DueAt: at,
		Status: model.RunPending, Manual: true, CreatedAt: at}
	if e.Store != nil {
		if _, err := e.Store.InsertRuns(ctx, []*model.Run{r}); err != nil {
			return nil, fmt.Errorf("trigger %s: %w", t.ID, err)
		}
	}
	return r, nil
}

// Rerun makes a manual pending run due now that runs orig again; each
// rerun is a microsecond after the one before, so that reruns made at one
// fixed Now have runs of their own.
func (e *FakeEngine) Rerun(ctx context.Context, t *model.Timer, orig *model.Run) (*model.Run, error) {
	now := time.Now
	if e.Now != nil {
		now = e.Now
	}
	e.mu.Lock()
	e.reruns++
	at := now().UTC().Add(time.Duration(e.reruns) * time.Microsecond)
	e.mu.Unlock()
	r := model.Rerun(t.ID, orig, at)
	if e.Store != nil {
		if err := e.Store.InsertRerun(ctx, r); err != nil {
			return nil, fmt.Errorf("rerun %s: %w", orig.ID, err)
		}
	}
	return r, nil
}

// PoolStats reports 2 running of 16.
func (e *FakeEngine) PoolStats() (running, capacity int) { return 2, 16 }

// Nodes reports one node, which advertises the handlers of Handlers.
func (e *FakeEngine) Nodes(ctx context.Context) ([]model.Node, error) {
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return []model.Node{{ID: "node-1", Addr: "127.0.0.1:8080", StartedAt: t, SeenAt: t, Slices: []string{"0", "1"},
		Handlers: e.Handlers}}, nil
}

// Ready returns ReadyErr.
func (e *FakeEngine) Ready(ctx context.Context) error { return e.ReadyErr }

// SavedCalls returns the Saved calls so far.
func (e *FakeEngine) SavedCalls() []Saved {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.saved)
}

// DeletedCalls returns the ids passed to TimerDeleted so far.
func (e *FakeEngine) DeletedCalls() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.deleted)
}
