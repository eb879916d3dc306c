// Package apitest provides test doubles for the API's dependencies: an
// in-memory store.Store for tests that cannot use SQLite, and a FakeEngine
// that records what the API asked of the engine.
package apitest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/store"
)

// MemStore is an in-memory store.Store with the methods the API uses.
// The engine's methods (planning, claims, leases) are not implemented and
// panic: embed a real store for those.
type MemStore struct {
	store.Store // nil: unimplemented methods panic

	mu     sync.Mutex
	timers map[string]*model.Timer
	runs   map[string]*model.Run
}

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore {
	return &MemStore{timers: map[string]*model.Timer{}, runs: map[string]*model.Run{}}
}

func cloneTimer(t *model.Timer) *model.Timer {
	c := *t
	return &c
}

// CreateTimer implements store.Store.
func (s *MemStore) CreateTimer(ctx context.Context, t *model.Timer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.timers {
		if o.App == t.App && o.Name == t.Name {
			return fmt.Errorf("create timer %s/%s: %w", t.App, t.Name, model.ErrConflict)
		}
	}
	s.timers[t.ID] = cloneTimer(t)
	return nil
}

// GetTimer implements store.Store.
func (s *MemStore) GetTimer(ctx context.Context, id string) (*model.Timer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.timers[id]
	if !ok {
		return nil, fmt.Errorf("timer %s: %w", id, model.ErrNotFound)
	}
	return cloneTimer(t), nil
}

// GetTimerByName implements store.Store.
func (s *MemStore) GetTimerByName(ctx context.Context, app, name string) (*model.Timer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.timers {
		if t.App == app && t.Name == name {
			return cloneTimer(t), nil
		}
	}
	return nil, fmt.Errorf("timer %s/%s: %w", app, name, model.ErrNotFound)
}

// UpdateTimer implements store.Store.
func (s *MemStore) UpdateTimer(ctx context.Context, t *model.Timer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.timers[t.ID]; !ok {
		return fmt.Errorf("timer %s: %w", t.ID, model.ErrNotFound)
	}
	for _, o := range s.timers {
		if o.ID != t.ID && o.App == t.App && o.Name == t.Name {
			return fmt.Errorf("update timer %s/%s: %w", t.App, t.Name, model.ErrConflict)
		}
	}
	s.timers[t.ID] = cloneTimer(t)
	return nil
}

// DeleteTimer implements store.Store.
func (s *MemStore) DeleteTimer(ctx context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.timers[id]; !ok {
		return fmt.Errorf("timer %s: %w", id, model.ErrNotFound)
	}
	delete(s.timers, id)
	for rid, r := range s.runs {
		if r.TimerID == id {
			delete(s.runs, rid)
		}
	}
	return nil
}

func limit(n int) int {
	if n <= 0 {
		return 100
	}
	return min(n, 1000)
}

// ListTimers implements store.Store.
func (s *MemStore) ListTimers(ctx context.Context, f store.TimerFilter) ([]*model.Timer, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*model.Timer
	for _, t := range s.timers {
		if (f.App == "" || t.App == f.App) && (f.Enabled == nil || t.Enabled == *f.Enabled) && t.ID > f.After {
			out = append(out, cloneTimer(t))
		}
	}
	slices.SortFunc(out, func(a, b *model.Timer) int { return cmp.Compare(a.ID, b.ID) })
	n := limit(f.Limit)
	if len(out) > n {
		out = out[:n]
		return out, out[n-1].ID, nil
	}
	return out, "", nil
}

// InsertRuns implements store.Store, without reviving cancelled runs.
func (s *MemStore) InsertRuns(ctx context.Context, runs []*model.Run) ([]*model.Run, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ins []*model.Run
	for _, r := range runs {
		if _, ok := s.runs[r.ID]; ok {
			continue
		}
		c := *r
		s.runs[r.ID] = &c
		ins = append(ins, r)
	}
	return ins, nil
}

// GetRun implements store.Store.
func (s *MemStore) GetRun(ctx context.Context, id string) (*model.Run, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[id]
	if !ok {
		return nil, fmt.Errorf("run %s: %w", id, model.ErrNotFound)
	}
	c := *r
	return &c, nil
}

// ListRuns implements store.Store; the cursor is "unixnano:id" of the last
// run of the previous page.
func (s *MemStore) ListRuns(ctx context.Context, f store.RunFilter) ([]*model.Run, string, error) {
	var beforeNS int64
	var beforeID string
	if f.Before != "" {
		ns, id, ok := strings.Cut(f.Before, ":")
		n, err := strconv.ParseInt(ns, 10, 64)
		if !ok || err != nil {
			return nil, "", fmt.Errorf("list runs: bad cursor %q", f.Before)
		}
		beforeNS, beforeID = n, id
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*model.Run
	for _, r := range s.runs {
		if f.TimerID != "" && r.TimerID != f.TimerID || f.Status != "" && r.Status != f.Status {
			continue
		}
		ns := r.ScheduledAt.UnixNano()
		if f.Before != "" && (ns > beforeNS || ns == beforeNS && r.ID >= beforeID) {
			continue
		}
		c := *r
		out = append(out, &c)
	}
	slices.SortFunc(out, func(a, b *model.Run) int {
		if c := b.ScheduledAt.Compare(a.ScheduledAt); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
	n := limit(f.Limit)
	if len(out) > n {
		out = out[:n]
		last := out[n-1]
		return out, fmt.Sprintf("%d:%s", last.ScheduledAt.UnixNano(), last.ID), nil
	}
	return out, "", nil
}

// Stats implements store.Store.
func (s *MemStore) Stats(ctx context.Context) (store.Stats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := store.Stats{Runs: map[model.RunStatus]int64{}}
	for _, t := range s.timers {
		if t.Enabled {
			st.TimersEnabled++
		} else {
			st.TimersDisabled++
		}
	}
	for _, r := range s.runs {
		st.Runs[r.Status]++
	}
	return st, nil
}

// Ping implements store.Store.
func (s *MemStore) Ping(ctx context.Context) error { return nil }

// Close implements store.Store.
func (s *MemStore) Close() error { return nil }

// Saved records one Engine.TimerSaved call.
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

	mu      sync.Mutex
	saved   []Saved
	deleted []string
}

// TimerSaved records the call.
func (e *FakeEngine) TimerSaved(ctx context.Context, t *model.Timer, scheduleChanged bool) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.saved = append(e.saved, Saved{Timer: *t, ScheduleChanged: scheduleChanged})
	return nil
}

// TimerDeleted records the call.
func (e *FakeEngine) TimerDeleted(ctx context.Context, id string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.deleted = append(e.deleted, id)
	return nil
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

// PoolStats reports 2 running of 16.
func (e *FakeEngine) PoolStats() (running, capacity int) { return 2, 16 }

// Nodes reports one node.
func (e *FakeEngine) Nodes(ctx context.Context) ([]model.Node, error) {
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return []model.Node{{ID: "node-1", Addr: "127.0.0.1:8080", StartedAt: t, SeenAt: t, Slices: []string{"0", "1"}}}, nil
}

// Ready returns ReadyErr.
func (e *FakeEngine) Ready(ctx context.Context) error { return e.ReadyErr }

// SavedCalls returns the TimerSaved calls so far.
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
