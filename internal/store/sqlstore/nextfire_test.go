package sqlstore

import (
	"context"
	"strings"
	"testing"

	"github.com/chimehq/chime/internal/store"
)

// TestNextFirePlan: on SQLite a page of the timers by next fire, all of
// them or one app's, after a cursor, is a search of a next-fire index in
// its order (no sort, no scan from the index's start).
func TestNextFirePlan(t *testing.T) {
	t.Parallel()
	s := mustOpen(t, "sqlite::memory:")
	ctx := context.Background()
	for _, tc := range []struct {
		where, index string
		args         []any
	}{
		{"(next_fire_at, id) > (?, ?)", "timers_next_fire", []any{1, "x"}},
		{"app = ? AND (next_fire_at, id) > (?, ?)", "timers_app_next_fire", []any{"a", 1, "x"}},
	} {
		got := explain(t, s, `SELECT `+timerCols+` FROM timers WHERE `+tc.where+` ORDER BY next_fire_at, id LIMIT 51`, tc.args...)
		if !strings.Contains(got, "SEARCH timers USING INDEX "+tc.index+" (") || strings.Contains(got, "TEMP B-TREE") {
			t.Errorf("%s: plan %q, want a search of %s without a sort", tc.where, got, tc.index)
		}
	}
	// The query ListTimers makes is that one.
	if _, _, err := s.ListTimers(ctx, store.TimerFilter{Sort: store.SortNextFire, App: "a", After: encodeRunCursor(1, "x")}); err != nil {
		t.Fatal(err)
	}
}

// explain returns SQLite's query plan of query, its steps joined by "; ".
func explain(t *testing.T, s *Store, query string, args ...any) string {
	t.Helper()
	rows, err := s.r.QueryContext(context.Background(), `EXPLAIN QUERY PLAN `+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	return strings.Join(plan, "; ")
}

// TestPlacedRunsPlan: on SQLite the sweep of runs placed on nodes reads
// the index of placed runs, not every pending run.
func TestPlacedRunsPlan(t *testing.T) {
	t.Parallel()
	s := mustOpen(t, "sqlite::memory:")
	if got := explain(t, s, placedRunsQuery+"1000"); !strings.Contains(got, "USING INDEX runs_pending_target") || strings.Contains(got, "TEMP B-TREE") {
		t.Errorf("plan %q, want a scan of runs_pending_target without a sort", got)
	}
}

// TestWaitingFiresPlan: on SQLite the sweeper's read of the fires waiting
// for their shards searches the index of running leases for the NULL ones,
// whose entries are in id order (no sort, no walk of the table); on
// PostgreSQL they have an index of their own (migration 0013).
func TestWaitingFiresPlan(t *testing.T) {
	t.Parallel()
	s := mustOpen(t, "sqlite::memory:")
	if got := explain(t, s, waitingFiresQuery+"1000", ""); !strings.Contains(got, "SEARCH runs USING INDEX runs_running_lease_until") || strings.Contains(got, "TEMP B-TREE") {
		t.Errorf("plan %q, want a search of runs_running_lease_until without a sort", got)
	}
}

// TestPlanUpdatePlan: on SQLite SetPlannedUntil's statement looks each id
// up by the primary key (no scan of the timers).
func TestPlanUpdatePlan(t *testing.T) {
	t.Parallel()
	s := mustOpen(t, "sqlite::memory:")
	plans := map[string]store.Plan{"a": {}, "b": {}, "c": {}}
	got := explain(t, s, s.planSQL(3), s.planArgs(1, []string{"a", "b", "c"}, plans)...)
	if strings.Contains(got, "SCAN timers") || !strings.Contains(got, "SEARCH timers USING INDEX") {
		t.Errorf("plan %q, want a search of timers by id", got)
	}
}
