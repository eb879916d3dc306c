package sqlstore

import (
	"context"
	"database/sql"
	"strings"

	"github.com/chimehq/chime/model"
)

// finishBatchPostgres applies a batch of results with one UPDATE ... FROM
// (VALUES ...) and reports, per result, whether its fence held.
func (s *Store) finishBatchPostgres(ctx context.Context, tx *sql.Tx, rs []model.Result, ok []bool) error {
	const row = `(?::text, ?::boolean, ?::bigint, ?::bigint, ?::bigint, ?::bigint, ?::text, ?::text, ?::text, ?::text, ?::integer)`
	var b strings.Builder
	args := make([]any, 0, len(rs)*11)
	for i, r := range rs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(row)
		args = append(args, finishArgs(r)...)
	}
	done, err := s.queryIDs(ctx, tx, `UPDATE runs SET status = v.status,
		due_at = CASE WHEN v.retry THEN v.retry_at ELSE runs.due_at END, started_at = v.started_at,
		finished_at = v.finished_at, duration_ms = v.duration_ms, output = v.output, error = v.error, lease_until = NULL
		FROM (VALUES `+b.String()+`) AS v(status, retry, retry_at, started_at, finished_at, duration_ms, output, error, id, node, attempt)
		WHERE runs.id = v.id AND runs.status = 'running' AND runs.node = v.node AND runs.attempt = v.attempt
		RETURNING runs.id`, args...)
	if err != nil {
		return err
	}
	applied := make(map[string]bool, len(done))
	for _, id := range done {
		applied[id] = true
	}
	for i, r := range rs {
		ok[i] = applied[r.RunID]
	}
	return nil
}

// finishBatchMySQL locks the batch's running rows, checks the fences, and
// applies the results that hold theirs with one multi-table UPDATE.
func (s *Store) finishBatchMySQL(ctx context.Context, tx *sql.Tx, rs []model.Result, ok []bool) error {
	ids := make([]any, len(rs))
	for i, r := range rs {
		ids[i] = r.RunID
	}
	rows, err := tx.QueryContext(ctx, `SELECT id, node, attempt FROM runs WHERE id IN (`+placeholders(len(ids))+`)
		AND status = 'running' ORDER BY id FOR UPDATE`, ids...)
	if err != nil {
		return err
	}
	type fence struct {
		node    string
		attempt int
	}
	held := map[string]fence{}
	for rows.Next() {
		var id string
		var f fence
		if err := rows.Scan(&id, &f.node, &f.attempt); err != nil {
			rows.Close()
			return err
		}
		held[id] = f
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	var b strings.Builder
	var args []any
	used := map[string]bool{}
	for i, r := range rs {
		f, found := held[r.RunID]
		if !found || f.node != r.Node || f.attempt != r.Attempt || used[r.RunID] {
			continue
		}
		used[r.RunID] = true
		ok[i] = true
		if len(args) == 0 {
			b.WriteString(`SELECT ? AS status, ? AS retry, ? AS retry_at, ? AS started_at, ? AS finished_at,
				? AS duration_ms, ? AS output, ? AS error, ? AS id`)
		} else {
			b.WriteString(` UNION ALL SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?`)
		}
		args = append(args, finishArgs(r)[:9]...)
	}
	if len(args) == 0 {
		return nil
	}
	_, err = tx.ExecContext(ctx, `UPDATE runs JOIN (`+b.String()+`) v ON runs.id = v.id
		SET runs.due_at = IF(v.retry, v.retry_at, runs.due_at), runs.status = v.status, runs.started_at = v.started_at,
		runs.finished_at = v.finished_at, runs.duration_ms = v.duration_ms, runs.output = v.output,
		runs.error = v.error, runs.lease_until = NULL`, args...)
	return err
}

// batchResults calls fn for consecutive batches of rs and the matching ok.
func batchResults(rs []model.Result, ok []bool, fn func([]model.Result, []bool) error) error {
	for len(rs) > 0 {
		n := min(len(rs), batchSize)
		if err := fn(rs[:n], ok[:n]); err != nil {
			return err
		}
		rs, ok = rs[n:], ok[n:]
	}
	return nil
}
