// The run row: its columns, scanning, and the query and update-check
// helpers every part of the store shares.

package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/chimehq/chime/model"
)

const runCols = `id, timer_id, scheduled_at, due_at, status, attempt, started_at, finished_at, duration_ms, output, error, node, lease_until, manual, created_at, fire_id, shard_index, shard_total, target_node, reason, request, upstream_run_id, failures, rerun_of, rerun_scheduled_at`

func scanRun(sc scanner) (*model.Run, error) {
	var b runScan
	return b.scan(sc)
}

// runScan reads run rows, one after the other, into the same
// destinations: Scan takes them as a []any of pointers, which a
// function's own variables made escape, a dozen allocations a row
// (queryRuns reads the hundreds of rows of a claim or a planning batch).
type runScan struct {
	r                            model.Run
	scheduled, due, created      int64
	started, finished, leaseTill sql.NullInt64
	status, request              string
	shardIndex, shardTotal       int
	upstream, rerunOf            sql.NullString
	rerunScheduled               sql.NullInt64
	dest                         []any
}

// scan reads one row and returns it as a new run.
func (b *runScan) scan(sc scanner) (*model.Run, error) {
	if b.dest == nil {
		b.dest = []any{&b.r.ID, &b.r.TimerID, &b.scheduled, &b.due, &b.status, &b.r.Attempt, &b.started, &b.finished,
			&b.r.DurationMS, &b.r.Output, &b.r.Error, &b.r.Node, &b.leaseTill, &b.r.Manual, &b.created,
			&b.r.FireID, &b.shardIndex, &b.shardTotal, &b.r.TargetNode, &b.r.Reason, &b.request, &b.upstream, &b.r.Failures,
			&b.rerunOf, &b.rerunScheduled}
	}
	if err := sc.Scan(b.dest...); err != nil {
		return nil, err
	}
	r := &model.Run{ID: b.r.ID, TimerID: b.r.TimerID, Attempt: b.r.Attempt, DurationMS: b.r.DurationMS,
		Output: b.r.Output, Error: b.r.Error, Node: b.r.Node, Manual: b.r.Manual, FireID: b.r.FireID,
		TargetNode: b.r.TargetNode, Reason: b.r.Reason, Failures: b.r.Failures}
	scheduled := b.scheduled
	if b.shardIndex >= 0 {
		// A shard's row is kept under its own instant (model.ShardInstant).
		r.Shard = &model.Shard{Index: b.shardIndex, Total: b.shardTotal}
		scheduled -= int64(b.shardIndex + 1)
	}
	r.Status = model.RunStatus(b.status)
	r.ScheduledAt = fromNanos(scheduled)
	r.DueAt = fromNanos(b.due)
	r.CreatedAt = fromNanos(b.created)
	r.StartedAt = nullTime(b.started)
	r.FinishedAt = nullTime(b.finished)
	r.LeaseUntil = nullTime(b.leaseTill)
	r.UpstreamRunID = b.upstream.String
	if r.RerunOf = b.rerunOf.String; b.rerunScheduled.Valid {
		r.RerunScheduledAt = fromNanos(b.rerunScheduled.Int64)
	}
	if b.request != "" {
		// A request that does not decode (cut by cleanText) is dropped:
		// it is shown, never acted on. Its headers that repeat the row's
		// columns are put back from them (see storedRequest).
		r.Request = rebuildRequest(b.request, r)
	}
	return r, nil
}

func nullTime(n sql.NullInt64) *time.Time {
	if !n.Valid {
		return nil
	}
	t := fromNanos(n.Int64)
	return &t
}

func (s *core) queryRuns(ctx context.Context, db querier, query string, args ...any) ([]*model.Run, error) {
	rows, err := db.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*model.Run
	var b runScan
	for rows.Next() {
		r, err := b.scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func (s *core) queryIDs(ctx context.Context, db querier, query string, args ...any) ([]string, error) {
	rows, err := db.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

func stringArgs(ss []string) []any {
	a := make([]any, len(ss))
	for i, s := range ss {
		a[i] = s
	}
	return a
}

// chunks calls fn for consecutive slices of at most batchSize elements.
func chunks[T any](xs []T, fn func([]T) error) error {
	for len(xs) > 0 {
		n := min(len(xs), batchSize)
		if err := fn(xs[:n]); err != nil {
			return err
		}
		xs = xs[n:]
	}
	return nil
}

// checkRunUpdated turns "no row updated" into ErrNotFound or ErrNotClaimed.
func (s *core) checkRunUpdated(ctx context.Context, res sql.Result, runID, what string) error {
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if n > 0 {
		return nil
	}
	var one int
	err = s.r.QueryRowContext(ctx, s.q(`SELECT 1 FROM runs WHERE id = ?`), runID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s: %w", what, model.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return fmt.Errorf("%s: %w", what, model.ErrNotClaimed)
}
