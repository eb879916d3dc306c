// The run row: its columns, scanning, and the query helpers the other
// files of runs share.

package sqlstore

import (
	"context"
	"database/sql"
	"time"

	"github.com/chimehq/chime/model"
)

const runCols = `id, timer_id, scheduled_at, due_at, status, attempt, started_at, finished_at, duration_ms, output, error, node, lease_until, manual, created_at, fire_id, shard_index, shard_total, target_node, reason, request, upstream_run_id`

func scanRun(sc scanner) (*model.Run, error) {
	var (
		r                            model.Run
		scheduled, due, created      int64
		started, finished, leaseTill sql.NullInt64
		status, request              string
		shardIndex, shardTotal       int
		upstream                     sql.NullString
	)
	if err := sc.Scan(&r.ID, &r.TimerID, &scheduled, &due, &status, &r.Attempt, &started, &finished,
		&r.DurationMS, &r.Output, &r.Error, &r.Node, &leaseTill, &r.Manual, &created,
		&r.FireID, &shardIndex, &shardTotal, &r.TargetNode, &r.Reason, &request, &upstream); err != nil {
		return nil, err
	}
	if shardIndex >= 0 {
		// A shard's row is kept under its own instant (model.ShardInstant).
		r.Shard = &model.Shard{Index: shardIndex, Total: shardTotal}
		scheduled -= int64(shardIndex + 1)
	}
	r.Status = model.RunStatus(status)
	r.ScheduledAt = fromNanos(scheduled)
	r.DueAt = fromNanos(due)
	r.CreatedAt = fromNanos(created)
	r.StartedAt = nullTime(started)
	r.FinishedAt = nullTime(finished)
	r.LeaseUntil = nullTime(leaseTill)
	r.UpstreamRunID = upstream.String
	if request != "" {
		// A request that does not decode (cut by cleanText) is dropped:
		// it is shown, never acted on. Its headers that repeat the row's
		// columns are put back from them (see storedRequest).
		r.Request = rebuildRequest(request, &r)
	}
	return &r, nil
}

func nullTime(n sql.NullInt64) *time.Time {
	if !n.Valid {
		return nil
	}
	t := fromNanos(n.Int64)
	return &t
}

func (s *Store) queryRuns(ctx context.Context, db querier, query string, args ...any) ([]*model.Run, error) {
	rows, err := db.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*model.Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func (s *Store) queryIDs(ctx context.Context, db querier, query string, args ...any) ([]string, error) {
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
