package sqlstore

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/base/testenv"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/internal/store/storetest"
	"github.com/chimehq/chime/model"
)

// TestListRunsPlans: on each backend every form of ListRuns' and
// RunCounts' queries (by timer, app, token apps, status, instants, after a
// cursor, either order) reads the runs through an index, never by a scan
// of the table. Each form is bounded as the API asks it: by a timer, or by
// an instant (a list across timers ends at now unless told otherwise; an
// unbounded list of a table this small is a sort of the table on
// MariaDB, cheaper than the index at this size). The plans are asked of databases holding a history of a
// few thousand runs, analysed; PostgreSQL is asked with sequential scans
// discouraged (on tables this small it prefers them to any index), which
// still shows one where no index serves the query.
func TestListRunsPlans(t *testing.T) {
	backends := map[string]func(tb testing.TB) *Store{
		"sqlite":   func(tb testing.TB) *Store { return mustOpen(tb, "sqlite::memory:") },
		"mariadb":  func(tb testing.TB) *Store { return mustOpen(tb, testenv.MySQLDatabase(tb)) },
		"postgres": func(tb testing.TB) *Store { return mustOpen(tb, testenv.PostgresDatabase(tb)) },
	}
	base := time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)
	cursor := encodeRunCursor(base.Add(time.Hour).UnixNano(), "x")
	// A list across timers ends at now unless told otherwise: "to" is
	// always set, as the API sets it.
	to := base.Add(time.Hour)
	filters := map[string]store.RunFilter{
		"all to":             {ScheduledBefore: to},
		"all from":           {ScheduledFrom: base, ScheduledBefore: to},
		"all after a cursor": {Before: cursor, ScheduledBefore: to},
		"status":             {Status: model.RunFailed, ScheduledBefore: to},
		"status from":        {Status: model.RunFailed, ScheduledFrom: base, ScheduledBefore: to},
		"status cursor":      {Status: model.RunSucceeded, Before: cursor, ScheduledFrom: base, ScheduledBefore: to},
		"pending":            {Status: model.RunPending, ScheduledFrom: base, ScheduledBefore: to},
		"running":            {Status: model.RunRunning, ScheduledBefore: to},
		"app":                {App: "a1", ScheduledFrom: base, ScheduledBefore: to},
		"app status":         {App: "a1", Status: model.RunFailed, ScheduledFrom: base, ScheduledBefore: to},
		"token apps":         {Apps: []string{"a1", "a2"}, Before: cursor, ScheduledBefore: to},
		"timer":              {TimerID: "t", ScheduledBefore: to},
		"timer status":       {TimerID: "t", Status: model.RunSucceeded, Before: cursor, ScheduledBefore: to},
		"timer upcoming":     {TimerID: "t", Status: model.RunPending, ScheduledFrom: base, Ascending: true, Before: cursor},
	}
	for name, open := range backends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			ctx := context.Background()
			fillHistory(t, s, base)
			for fname, f := range filters {
				query, args, err := listRunsQuery(f, 100)
				if err != nil {
					t.Fatal(err)
				}
				if scan := runsScan(t, s, query, args); scan != "" {
					t.Errorf("list %s: the plan scans runs: %s", fname, scan)
				}
				cq, cargs := runCountsQuery(f)
				if scan := runsScan(t, s, cq, cargs); scan != "" {
					t.Errorf("counts %s: the plan scans runs: %s", fname, scan)
				}
				// And the store runs them.
				if _, _, err := s.ListRuns(ctx, f); err != nil {
					t.Errorf("ListRuns %s: %v", fname, err)
				}
				if _, err := s.RunCounts(ctx, f); err != nil {
					t.Errorf("RunCounts %s: %v", fname, err)
				}
			}
		})
	}
}

// fillHistory writes 4,000 runs of 40 timers of 4 apps, one a second,
// most of them succeeded, and has the database analyse the tables.
func fillHistory(t *testing.T, s *Store, base time.Time) {
	t.Helper()
	ctx := context.Background()
	var runs []*model.Run
	for i := range 40 {
		tm := storetest.NewTimer("a"+string(rune('1'+i%4)), "t"+string(rune('a'+i/4))+string(rune('a'+i%4)))
		if _, err := s.SaveTimer(ctx, store.TimerWrite{Timer: tm, Create: true}); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, storetest.NewRuns(tm.ID, base.Add(time.Duration(i)*time.Millisecond), 40*time.Millisecond, 100)...)
	}
	if _, err := s.InsertRuns(ctx, runs); err != nil {
		t.Fatal(err)
	}
	for i, st := range []string{"succeeded", "failed", "skipped"} {
		if _, err := s.w.ExecContext(ctx, s.q(`UPDATE runs SET status = ? WHERE scheduled_at < ?`), st, nanos(base.Add(time.Duration(100-40*i)*time.Second))); err != nil {
			t.Fatal(err)
		}
	}
	stmt := map[dialect]string{dialectSQLite: `ANALYZE`, dialectMySQL: `ANALYZE TABLE runs, timers`, dialectPostgres: `ANALYZE runs, timers`}[s.d]
	if _, err := s.w.ExecContext(ctx, stmt); err != nil {
		t.Fatal(err)
	}
}

// runsScan returns the step of query's plan that scans the runs table,
// "" when none does.
func runsScan(t *testing.T, s *Store, query string, args []any) string {
	t.Helper()
	ctx := context.Background()
	switch s.d {
	case dialectSQLite:
		for step := range strings.SplitSeq(explain(t, s, query, args...), "; ") {
			// "SCAN runs" alone walks the table; "SCAN runs USING
			// [COVERING] INDEX" walks an index in its order.
			if step == "SCAN runs" || strings.HasPrefix(step, "SCAN runs ") && !strings.Contains(step, " INDEX ") {
				return step
			}
		}
	case dialectPostgres:
		tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, `SET LOCAL enable_seqscan = off`); err != nil {
			t.Fatal(err)
		}
		rows, err := tx.QueryContext(ctx, s.q(`EXPLAIN `+query), args...)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, strings.TrimSpace(line))
		}
		for _, line := range plan {
			if strings.Contains(line, "Seq Scan on runs") {
				return strings.Join(plan, "\n")
			}
		}
	case dialectMySQL:
		rows, err := s.r.QueryContext(ctx, `EXPLAIN `+query, args...)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		cols, err := rows.Columns()
		if err != nil {
			t.Fatal(err)
		}
		vals := make([]sql.NullString, len(cols))
		dest := make([]any, len(cols))
		for i := range vals {
			dest[i] = &vals[i]
		}
		for rows.Next() {
			if err := rows.Scan(dest...); err != nil {
				t.Fatal(err)
			}
			row := map[string]string{}
			for i, c := range cols {
				row[c] = vals[i].String
			}
			if row["table"] == "runs" && row["type"] == "ALL" {
				return "type ALL: " + strings.Join(func() []string {
					var out []string
					for i, c := range cols {
						out = append(out, c+"="+vals[i].String)
					}
					return out
				}(), " ")
			}
		}
	}
	return ""
}
