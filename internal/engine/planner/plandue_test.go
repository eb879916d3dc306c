package planner_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/coord/index"
	"github.com/chimehq/chime/internal/coord/index/memindex"
	"github.com/chimehq/chime/internal/engine/planner"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/internal/store/sqlstore"
	"github.com/chimehq/chime/model"
)

// insertLog records the runs of each InsertPlanned call (the planner's
// inserts).
type insertLog struct {
	planner.Store
	calls [][]*model.Run
}

func (s *insertLog) InsertPlanned(ctx context.Context, runs []*model.Run, versions map[string]int64) ([]*model.Run, error) {
	s.calls = append(s.calls, runs)
	return s.Store.InsertPlanned(ctx, runs, versions)
}

// TestPlanDueUrgentFirst: a pass over timers that were never planned inserts
// their next seconds of runs for all of them before the rest of the
// look-ahead of any, and every run once.
func TestPlanDueUrgentFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	const timers = 30
	st := everySecondTimers(t, now, timers)
	log := &insertLog{Store: st}
	p := planner.New(planner.Config{Store: log, Index: memindex.New(4), Lookahead: time.Minute, MinAhead: time.Minute, Batch: 10,
		Clock: clock.Func(func() time.Time { return now })})
	if _, err := p.PlanDue(ctx); err != nil {
		t.Fatal(err)
	}
	var total int
	urgentDone := false
	for i, call := range log.calls {
		latest := time.Time{}
		for _, r := range call {
			if r.ScheduledAt.After(latest) {
				latest = r.ScheduledAt
			}
		}
		urgent := !latest.After(now.Add(10 * time.Second))
		if urgent && urgentDone {
			t.Errorf("call %d: runs up to %v after a call past the urgent window", i, latest)
		}
		if !urgent {
			urgentDone = true
		}
		if i == 0 {
			if !urgent {
				t.Errorf("first call: runs up to %v, want only the next 10s", latest)
			}
			if want := timers * 9; len(call) != want { // (now, now+10s)
				t.Errorf("first call: %d runs, want %d (the next 10s of every timer)", len(call), want)
			}
		}
		total += len(call)
	}
	// 59 fires in (now, now+1m) per timer (the one at now+1m is past the
	// horizon), each inserted once.
	if want := timers * 59; total != want {
		t.Errorf("inserted %d runs, want %d", total, want)
	}
}

// TestPlanDueBudget: a pass past its budget writes what it has read and
// ends; the next passes go on from the plans that end first, until every
// timer is planned.
func TestPlanDueBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	const timers = 30
	st := everySecondTimers(t, now, timers)
	// The clock reads now when a pass starts, and past the budget at every
	// later read: each pass reads one page of timers per phase.
	var reads int
	clk := clock.Func(func() time.Time {
		reads++
		if reads == 1 {
			return now
		}
		return now.Add(time.Hour)
	})
	log := &insertLog{Store: st}
	p := planner.New(planner.Config{Store: log, Index: memindex.New(4), Lookahead: time.Minute, Batch: 10,
		PassBudget: time.Second, Clock: clk})
	planned := map[string]bool{}
	for pass := 1; len(planned) < timers; pass++ {
		if pass > timers {
			t.Fatalf("%d passes planned %d of %d timers", pass-1, len(planned), timers)
		}
		reads = 0
		before := len(log.calls)
		if _, err := p.PlanDue(ctx); err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, call := range log.calls[before:] {
			for _, r := range call {
				seen[r.TimerID] = true
				planned[r.TimerID] = true
			}
		}
		if len(seen) > 20 {
			t.Errorf("pass %d planned %d timers, want at most two pages (20) within its budget", pass, len(seen))
		}
	}
}

// everySecondTimers returns a store holding n enabled every-second timers
// created at now, never planned.
func everySecondTimers(t *testing.T, now time.Time, n int) store.Store {
	t.Helper()
	ctx := context.Background()
	st, err := sqlstore.Open(ctx, "sqlite::memory:", sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for i := range n {
		tm := &model.Timer{
			ID: "t" + string(rune('a'+i)), App: "a", Name: string(rune('a' + i)), Schedule: "* * * * * *", Timezone: "UTC",
			Enabled: true, Action: model.Action{Type: model.ActionHTTP, HTTP: &model.HTTPAction{Method: "POST", URL: "http://x"}},
			Retry: model.RetryPolicy{MaxAttempts: 1}, CreatedAt: now, UpdatedAt: now,
		}
		if _, err := st.SaveTimer(ctx, store.TimerWrite{Timer: tm, Create: true}); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// TestPlanDueWritesInParts: a batch of more runs than one write holds is
// written in parts, each in the order of planner's compareFires (windows
// of 2^34 ns, then the run id after its second, then the second) and
// after the one before, every run once, and every run written is in the
// index.
func TestPlanDueWritesInParts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	const timers = 120 // 120 × 59 runs: two parts of a batch
	st := everySecondTimers(t, now, timers)
	log := &insertLog{Store: st}
	clk := clock.Func(func() time.Time { return now })
	// The index drops slices by its clock: on the system clock, the
	// test's fixed day is months old, and a prune at the turn of a real
	// minute during the test dropped the runs it had (flaky in CI).
	idx := memindex.NewWithOptions(memindex.Options{Buckets: 4, Clock: clk})
	p := planner.New(planner.Config{Store: log, Index: idx, Lookahead: time.Minute, MinAhead: time.Minute, Batch: timers,
		Clock: clk})
	if _, err := p.PlanDue(ctx); err != nil {
		t.Fatal(err)
	}
	total, full := 0, 0
	key := func(r *model.Run) string {
		return fmt.Sprintf("%020d/%s/%s", r.ScheduledAt.UnixNano()>>34, r.ID[8:], r.ID[:8])
	}
	last := ""
	for i, call := range log.calls {
		if len(call) > 5000 {
			t.Errorf("call %d: %d runs, want at most 5000", i, len(call))
		}
		if len(call) == 5000 {
			full++
		}
		if i > 0 && len(log.calls[i-1]) < 5000 {
			last = "" // a new batch (the urgent pass's, then the full pass's)
		}
		for _, r := range call {
			k := key(r)
			if k <= last {
				t.Fatalf("call %d: run %s after %s", i, k, last)
			}
			last = k
			total++
		}
	}
	if full == 0 {
		t.Errorf("no call of 5000 runs: the batch was not written in parts (%d calls)", len(log.calls))
	}
	if want := timers * 59; total != want {
		t.Errorf("inserted %d runs, want %d", total, want)
	}
	var indexed int
	for m := now.Unix() / 60; m <= now.Add(time.Minute).Unix()/60; m++ {
		for b := range 4 {
			entries, _, err := idx.Range(ctx, index.Slice{Minute: m, Bucket: b}, now.Add(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			indexed += len(entries)
		}
	}
	if indexed != timers*59 {
		t.Errorf("%d runs in the index, want %d", indexed, timers*59)
	}
}
