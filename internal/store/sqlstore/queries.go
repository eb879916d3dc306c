// Reads of runs: one run, the paged list, the pending and due windows
// (the trigger and the slice index read these), the runs a node holds, and
// counts.

package sqlstore

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// GetRun returns the run with id, or an error wrapping model.ErrNotFound.
func (s *runStore) GetRun(ctx context.Context, id string) (*model.Run, error) {
	r, err := scanRun(s.r.QueryRowContext(ctx, s.q(`SELECT `+runCols+` FROM runs WHERE id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get run %s: %w", id, model.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get run %s: %w", id, err)
	}
	return r, nil
}

// ListRuns returns runs ordered by ScheduledAt descending, then ID
// descending (both ascending with f.Ascending). The cursor is opaque.
//
// The indexes that serve it (migration 0025 and the unique key of
// timer_id, scheduled_at): with a TimerID, (timer_id, scheduled_at); with
// the status of ended runs, (status, scheduled_at, id) (partial on SQLite
// and PostgreSQL: the ended runs only); else (scheduled_at, id). The
// cursor's condition starts with a bound on scheduled_at that every
// dialect's planner takes for the range, and the apps' filter is a probe
// of timers by id (TestListRunsPlans checks the plans).
func (s *runStore) ListRuns(ctx context.Context, f store.RunFilter) ([]*model.Run, string, error) {
	limit := clampLimit(f.Limit)
	query, args, err := listRunsQuery(f, limit)
	if err != nil {
		return nil, "", fmt.Errorf("list runs: %w", err)
	}
	runs, err := s.queryRuns(ctx, s.r, query, args...)
	if err != nil {
		return nil, "", fmt.Errorf("list runs: %w", err)
	}
	next := ""
	if len(runs) > limit {
		runs = runs[:limit]
		last := runs[limit-1]
		at := last.ScheduledAt.UnixNano()
		if last.Shard != nil {
			at = model.ShardInstant(last.ScheduledAt, last.Shard.Index).UnixNano() // as stored
		}
		next = encodeRunCursor(at, last.ID)
	}
	return runs, next, nil
}

// listRunsQuery is ListRuns' query of a page of limit runs (and one more,
// to tell whether a next page exists).
func listRunsQuery(f store.RunFilter, limit int) (string, []any, error) {
	where, args := runWhere(f)
	if f.Status != "" {
		// A literal, as RunCounts writes it: a partial index of the
		// ended runs serves only a query whose status it can read.
		if !f.Status.Valid() {
			return "", nil, fmt.Errorf("bad status %q", f.Status)
		}
		where = append(where, "status = '"+string(f.Status)+"'")
	}
	if f.Before != "" {
		at, id, err := decodeRunCursor(f.Before)
		if err != nil {
			return "", nil, err
		}
		if f.Ascending {
			where = append(where, "scheduled_at >= ? AND (scheduled_at > ? OR id > ?)")
		} else {
			where = append(where, "scheduled_at <= ? AND (scheduled_at < ? OR id < ?)")
		}
		args = append(args, at, at, id)
	}
	query := `SELECT ` + runCols + ` FROM runs`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	order := "DESC"
	if f.Ascending {
		order = "ASC"
	}
	query += fmt.Sprintf(" ORDER BY scheduled_at %s, id %s LIMIT %d", order, order, limit+1)
	return query, args, nil
}

// runWhere returns the conditions of f's timer, apps and instants.
func runWhere(f store.RunFilter) ([]string, []any) {
	var where []string
	var args []any
	if f.TimerID != "" {
		where = append(where, "timer_id = ?")
		args = append(args, f.TimerID)
	}
	if f.App != "" || len(f.Apps) > 0 {
		cond := `timer_id IN (SELECT id FROM timers WHERE `
		var apps []string
		if f.App != "" {
			apps = append(apps, "app = ?")
			args = append(args, f.App)
		}
		if len(f.Apps) > 0 {
			apps = append(apps, "app IN ("+placeholders(len(f.Apps))+")")
			args = append(args, stringArgs(f.Apps)...)
		}
		where = append(where, cond+strings.Join(apps, " AND ")+")")
	}
	if !f.ScheduledFrom.IsZero() {
		where = append(where, "scheduled_at >= ?")
		args = append(args, nanos(f.ScheduledFrom))
	}
	if !f.ScheduledBefore.IsZero() {
		where = append(where, "scheduled_at < ?")
		args = append(args, nanos(f.ScheduledBefore))
	}
	return where, args
}

// runCountsQuery is RunCounts' query.
func runCountsQuery(f store.RunFilter) (string, []any) {
	where, args := runWhere(f)
	var parts []string
	var all []any
	for _, st := range model.RunStatuses {
		// The statuses are the code's own words, safe as literals (a
		// parameter in the select list has no type on PostgreSQL, and a
		// partial index serves only a query whose status it can read).
		cond := append([]string{"status = '" + string(st) + "'"}, where...)
		parts = append(parts, `SELECT '`+string(st)+`', COUNT(*) FROM runs WHERE `+strings.Join(cond, " AND "))
		all = append(all, args...)
	}
	return strings.Join(parts, " UNION ALL "), all
}

// RunCounts implements store.Store: one count per status, each a range
// of an index (of the ended runs by status, of the pending or running
// runs, of the runs by instant, or of the timer's runs), in one statement.
func (s *runStore) RunCounts(ctx context.Context, f store.RunFilter) (map[model.RunStatus]int64, error) {
	query, args := runCountsQuery(f)
	rows, err := s.r.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, fmt.Errorf("count runs: %w", err)
	}
	defer rows.Close()
	out := map[model.RunStatus]int64{}
	for rows.Next() {
		var st string
		var n int64
		if err := rows.Scan(&st, &n); err != nil {
			return nil, fmt.Errorf("count runs: %w", err)
		}
		if n > 0 {
			out[model.RunStatus(st)] = n
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count runs: %w", err)
	}
	return out, nil
}

func encodeRunCursor(at int64, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(at, 10) + ":" + id))
}

func decodeRunCursor(c string) (int64, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, "", fmt.Errorf("bad cursor %q", c)
	}
	a, id, ok := strings.Cut(string(b), ":")
	at, err := strconv.ParseInt(a, 10, 64)
	if !ok || err != nil {
		return 0, "", fmt.Errorf("bad cursor %q", c)
	}
	return at, id, nil
}

// PendingRuns returns pending runs with from <= DueAt < to, ordered by DueAt
// then ID, at most limit (all when limit <= 0).
func (s *runStore) PendingRuns(ctx context.Context, from, to time.Time, limit int) ([]*model.Run, error) {
	query := `SELECT ` + runCols + ` FROM runs WHERE status = 'pending' AND due_at >= ? AND due_at < ? ORDER BY due_at, id`
	if limit > 0 {
		query += ` LIMIT ` + strconv.Itoa(limit)
	}
	runs, err := s.queryRuns(ctx, s.r, query, nanos(from), nanos(to))
	if err != nil {
		return nil, fmt.Errorf("pending runs: %w", err)
	}
	return runs, nil
}

// DueRuns returns the id, timer id and due instant of the pending runs with
// from <= DueAt < to, ordered by DueAt, whose timer falls in one of the
// buckets in of buckets (all when buckets <= 1 or in is empty). The buckets
// are selected in SQL, from the timer hash kept with each run.
func (s *runStore) DueRuns(ctx context.Context, from, to time.Time, buckets int, in ...int) ([]*model.Run, error) {
	query := `SELECT id, timer_id, due_at FROM runs WHERE status = 'pending' AND due_at >= ? AND due_at < ?`
	args := []any{nanos(from), nanos(to)}
	in = slices.Compact(slices.Sorted(slices.Values(in)))
	if buckets > 1 && len(in) > 0 && len(in) < buckets {
		query += ` AND timer_hash % ? IN (` + placeholders(len(in)) + `)`
		args = append(args, buckets)
		for _, b := range in {
			args = append(args, b)
		}
	}
	rows, err := s.r.QueryContext(ctx, s.q(query+` ORDER BY due_at, id`), args...)
	if err != nil {
		return nil, fmt.Errorf("due runs: %w", err)
	}
	defer rows.Close()
	var out []*model.Run
	for rows.Next() {
		r := &model.Run{Status: model.RunPending}
		var due int64
		if err := rows.Scan(&r.ID, &r.TimerID, &due); err != nil {
			return nil, fmt.Errorf("due runs: %w", err)
		}
		r.DueAt = fromNanos(due)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("due runs: %w", err)
	}
	return out, nil
}

// RunningOn returns up to limit (default 1000) runs that node holds, oldest
// claim first (by started_at, which a claim sets and only a result changes;
// lease_until moves with every extension).
func (s *runStore) RunningOn(ctx context.Context, node string, limit int) ([]*model.Run, error) {
	if limit <= 0 {
		limit = 1000
	}
	// A fire waiting for its shards (no lease) is no node's to give back.
	runs, err := s.queryRuns(ctx, s.r, `SELECT `+runCols+` FROM runs WHERE status = 'running' AND node = ? AND lease_until IS NOT NULL
		ORDER BY started_at, id LIMIT `+strconv.Itoa(limit), node)
	if err != nil {
		return nil, fmt.Errorf("runs on node %s: %w", node, err)
	}
	return runs, nil
}

// CountRuns counts a timer's runs in the given statuses (all when none).
func (s *runStore) CountRuns(ctx context.Context, timerID string, statuses ...model.RunStatus) (int, error) {
	query := `SELECT COUNT(*) FROM runs WHERE timer_id = ?`
	args := []any{timerID}
	if len(statuses) > 0 {
		query += ` AND status IN (` + placeholders(len(statuses)) + `)`
		for _, st := range statuses {
			args = append(args, string(st))
		}
	}
	var n int
	if err := s.r.QueryRowContext(ctx, s.q(query), args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count runs of timer %s: %w", timerID, err)
	}
	return n, nil
}

// scheduledFire is the condition of a run that is one of its timer's
// scheduled fires (store.Store.CountFires), over the row's columns.
const scheduledFire = `manual = ? AND shard_index < 0 AND (upstream_run_id IS NULL OR upstream_run_id = '')`

// CountFires implements store.Store: the timer's rows that are scheduled
// fires, by status, plus timers.fires_pruned, which PruneRuns raises by
// the ended ones it deletes.
func (s *runStore) CountFires(ctx context.Context, timerID string) (store.FireCount, error) {
	var c store.FireCount
	var pruned sql.NullInt64
	err := s.r.QueryRowContext(ctx, s.q(`SELECT
			COALESCE(SUM(CASE WHEN status IN ('succeeded', 'failed') THEN 1 ELSE 0 END), 0),
			COALESCE(SUM(CASE WHEN status IN ('pending', 'running') THEN 1 ELSE 0 END), 0),
			(SELECT fires_pruned FROM timers WHERE id = ?)
		FROM runs WHERE timer_id = ? AND status IN ('succeeded', 'failed', 'pending', 'running') AND `+scheduledFire),
		timerID, timerID, false).Scan(&c.Ended, &c.Open, &pruned)
	if err != nil {
		return c, fmt.Errorf("count fires of timer %s: %w", timerID, err)
	}
	c.Ended += int(pruned.Int64)
	return c, nil
}
