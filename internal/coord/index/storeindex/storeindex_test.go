package storeindex_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/coord/index"
	"github.com/chimehq/chime/internal/coord/index/indextest"
	"github.com/chimehq/chime/internal/coord/index/storeindex"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/internal/store/sqlstore"
	"github.com/chimehq/chime/internal/store/storetest"
	"github.com/chimehq/chime/model"
)

// source is the store a suite's index reads, kept as the index's callers
// keep it (indextest.Source): each entry a pending run of a timer of its
// own id.
type source struct {
	st      *sqlstore.Store
	buckets int

	mu        sync.Mutex
	timers    map[string]bool      // timer ids created
	scheduled map[string]time.Time // run id -> its ScheduledAt, unique per run
}

// open is the suite's constructor: an index over a store of its own, and
// that store as its Source.
func open(tb testing.TB, buckets int) (index.Index, indextest.Source) {
	st, err := sqlstore.Open(context.Background(), "sqlite::memory:", sqlstore.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	x := storeindex.New(st, buckets)
	return x, &source{st: st, buckets: x.Buckets(), timers: map[string]bool{}, scheduled: map[string]time.Time{}}
}

// Put inserts the runs that are new (or cancelled) and moves the others.
// A run's ScheduledAt is made up and kept, unique per run id: the store's
// runs are unique per (timer, ScheduledAt), the index's entries per run id.
func (s *source) Put(ctx context.Context, entries ...index.Entry) error {
	last := map[string]index.Entry{}
	var order []string
	for _, e := range entries {
		if _, ok := last[e.RunID]; !ok {
			order = append(order, e.RunID)
		}
		last[e.RunID] = e
	}
	runs := make([]*model.Run, len(order))
	for i, id := range order {
		e := last[id]
		if err := s.timer(ctx, e.TimerID); err != nil {
			return err
		}
		s.mu.Lock()
		at, ok := s.scheduled[id]
		if !ok {
			at = time.Unix(int64(len(s.scheduled)), 0)
			s.scheduled[id] = at
		}
		s.mu.Unlock()
		runs[i] = &model.Run{ID: id, TimerID: e.TimerID, ScheduledAt: at, DueAt: e.DueAt}
	}
	inserted, err := s.st.InsertRuns(ctx, runs)
	if err != nil {
		return err
	}
	fresh := map[string]bool{}
	for _, r := range inserted {
		fresh[r.ID] = true
	}
	for _, r := range runs {
		if !fresh[r.ID] {
			if err := s.st.RescheduleRun(ctx, r.ID, r.DueAt); err != nil {
				return fmt.Errorf("move run %s: %w", r.ID, err)
			}
		}
	}
	return nil
}

// timer creates the timer id once.
func (s *source) timer(ctx context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timers[id] {
		return nil
	}
	tm := storetest.NewTimer("app", id)
	tm.ID = id
	if _, err := s.st.SaveTimer(ctx, store.TimerWrite{Timer: tm, Create: true}); err != nil {
		return err
	}
	s.timers[id] = true
	return nil
}

// Take cancels the runs pending in slice sl.
func (s *source) Take(ctx context.Context, sl index.Slice, runIDs ...string) error {
	for _, id := range runIDs {
		r, err := s.st.GetRun(ctx, id)
		if errors.Is(err, model.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if r.Status != model.RunPending || index.SliceOf(r.TimerID, r.DueAt, s.buckets) != sl {
			continue
		}
		if _, err := s.st.SetRunStatus(ctx, id, model.RunPending, model.RunCancelled, ""); err != nil {
			return err
		}
	}
	return nil
}

func TestSuite(t *testing.T) {
	t.Parallel()
	indextest.Run(t, open)
}

// BenchmarkIndex runs the benchmarks shared by every index (only Range
// applies: Add does nothing).
func BenchmarkIndex(b *testing.B) { indextest.Bench(b, open) }

func TestRangeReadsPendingRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlstore.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "x.db"), sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tm := storetest.NewTimer("app", "t")
	if _, err := st.SaveTimer(ctx, store.TimerWrite{Timer: tm, Create: true}); err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	runs := storetest.NewRuns(tm.ID, start, 10*time.Second, 8) // 10:00:00 .. 10:01:10
	if _, err := st.InsertRuns(ctx, runs); err != nil {
		t.Fatal(err)
	}
	const buckets = 4
	x := storeindex.New(st, buckets)
	s := index.SliceOf(tm.ID, start, buckets)
	got, known, err := x.Range(ctx, s, start.Add(25*time.Second))
	if err != nil || !known {
		t.Fatalf("Range = %v, %v, %v", got, known, err)
	}
	if len(got) != 3 || got[0].RunID != runs[0].ID || got[2].RunID != runs[2].ID {
		t.Errorf("Range until 10:00:25 = %v, want the first 3 runs", got)
	}
	got, _, _ = x.Range(ctx, s, start.Add(time.Hour))
	if len(got) != 6 {
		t.Errorf("Range of the whole minute = %d runs, want 6", len(got))
	}
	other := index.Slice{Minute: s.Minute, Bucket: (s.Bucket + 1) % buckets}
	if got, _, _ := x.Range(ctx, other, start.Add(time.Hour)); len(got) != 0 {
		t.Errorf("Range of another bucket = %v", got)
	}
	// A run that is no longer pending leaves the index.
	if _, err := st.SetRunStatus(ctx, runs[0].ID, model.RunPending, model.RunCancelled, ""); err != nil {
		t.Fatal(err)
	}
	got, _, _ = x.Range(ctx, s, start.Add(time.Hour))
	if len(got) != 5 {
		t.Errorf("Range after a cancel = %d runs, want 5", len(got))
	}
}
