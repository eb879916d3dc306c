// Leases of running runs: extension by their holder, expiry, and the
// sweeper's requeue of an expired run.

package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// ExtendLeases sets lease_until of the attempts of leases that node still
// holds to until, and returns the leases it no longer holds. The pair (id,
// attempt) is the condition, as a row-value IN list that every dialect
// takes, so that an extension never reaches a later attempt of the same
// run, even when both attempts are in leases; the plain IN list of the ids
// beside it is what the primary key serves.
//
// The leases are extended in run id order, and on MySQL and PostgreSQL
// their rows locked in that order before they are written: the order in
// which FinishRuns locks, so that the two never deadlock over the same
// runs.
func (s *claimStore) ExtendLeases(ctx context.Context, node string, leases []store.Lease, until time.Time) ([]store.Lease, error) {
	defer s.hotOp()()
	// In run id order, FinishRuns' lock order (see there).
	leases = slices.Clone(leases)
	slices.SortFunc(leases, func(a, b store.Lease) int {
		if c := strings.Compare(a.RunID, b.RunID); c != 0 {
			return c
		}
		return a.Attempt - b.Attempt
	})
	var lost []store.Lease
	err := chunks(leases, func(b []store.Lease) error {
		pairs, ids, pairArgs := leasePairs(b, 0)
		where := `node = ? AND status = 'running' AND id IN (` + placeholders(len(ids)) + `) AND (id, attempt) IN (` + pairs + `)`
		whereArgs := append(append([]any{node}, ids...), pairArgs...)
		var held []store.Lease
		scan := func(rows *sql.Rows) (err error) {
			held, err = scanLeases(rows)
			return err
		}
		var err error
		if s.d == dialectMySQL {
			err = s.tx(ctx, func(tx *wtx) error {
				rows, err := tx.QueryContext(ctx, `SELECT id, attempt FROM runs WHERE `+where+` ORDER BY id FOR UPDATE`, whereArgs...)
				if err != nil {
					return err
				}
				if err := scan(rows); err != nil || len(held) == 0 {
					return err
				}
				_, err = tx.ExecContext(ctx, `UPDATE runs SET lease_until = ? WHERE `+where, append([]any{nanos(until)}, whereArgs...)...)
				return err
			})
		} else if s.combineWrites {
			// On SQLite, with the claims and results waiting for the
			// writer (one commit for all).
			err = s.hotTx(ctx, func(ctx context.Context, tx *wtx) error {
				rows, err := tx.QueryContext(ctx, s.q(`UPDATE runs SET lease_until = ? WHERE `+where+` RETURNING id, attempt`),
					append([]any{nanos(until)}, whereArgs...)...)
				if err != nil {
					return err
				}
				return scan(rows)
			})
		} else if s.d == dialectPostgres {
			// The rows are locked first, in id order (FinishRuns' order), by
			// the materialised CTE: an UPDATE alone locks them in the order
			// of its scan (a bitmap scan's is the heap's), and deadlocked
			// with result batches over the same runs. The (id, attempt)
			// pairs go as two arrays, so that the statement's text is the
			// same for every batch and its plan is cached: a row-value IN
			// list of 500 pairs was planned anew at each call, 89 ms a call
			// in a 3,000 fires/s run (pg_stat_statements).
			runIDs := make([]string, len(b))
			attempts := make([]int64, len(b))
			for i, l := range b {
				runIDs[i], attempts[i] = l.RunID, int64(l.Attempt)
			}
			var rows *sql.Rows
			rows, err = s.w.QueryContext(ctx, s.q(`WITH l AS MATERIALIZED (SELECT r.id FROM runs r
					JOIN unnest(?::text[], ?::int[]) AS v(id, attempt) ON r.id = v.id AND r.attempt = v.attempt
					WHERE r.node = ? AND r.status = 'running' ORDER BY r.id FOR UPDATE OF r)
				UPDATE runs SET lease_until = ? FROM l WHERE runs.id = l.id RETURNING runs.id, runs.attempt`),
				runIDs, attempts, node, nanos(until))
			if err == nil {
				err = scan(rows)
			}
		} else {
			var rows *sql.Rows
			rows, err = s.w.QueryContext(ctx, s.q(`UPDATE runs SET lease_until = ? WHERE `+where+` RETURNING id, attempt`),
				append([]any{nanos(until)}, whereArgs...)...)
			if err == nil {
				err = scan(rows)
			}
		}
		if err != nil {
			return fmt.Errorf("extend %d leases: %w", len(b), err)
		}
		got := make(map[store.Lease]bool, len(held))
		for _, l := range held {
			got[l] = true
		}
		for _, l := range b {
			if !got[l] {
				lost = append(lost, l)
			}
		}
		return nil
	})
	return lost, err
}

// ExpiredLeases returns running runs whose lease ended before now and not
// before since (when set), oldest lease first, at most limit (default
// 1000).
func (s *claimStore) ExpiredLeases(ctx context.Context, since, now time.Time, limit int) ([]*model.Run, error) {
	if limit <= 0 {
		limit = 1000
	}
	query := `SELECT ` + runCols + ` FROM runs WHERE status = 'running' AND lease_until < ? AND lease_until >= ?
		ORDER BY lease_until, id LIMIT ` + strconv.Itoa(limit)
	from := int64(math.MinInt64)
	if !since.IsZero() {
		from = nanos(since)
	}
	runs, err := s.queryRuns(ctx, s.r, query, nanos(now), from)
	if err == nil && len(runs) > 0 && s.d == dialectSQLite {
		// SQLite answers reads while another process holds its write lock
		// (WAL): a lease seen expired then may belong to a holder that is
		// alive and only waiting to write its extension. Read again under
		// the write lock (an immediate transaction), so that the answer
		// means the holders could write, as a sighting must.
		err = s.tx(ctx, func(tx *wtx) error {
			runs, err = s.queryRuns(ctx, tx, query, nanos(now), from)
			return err
		})
	}
	if err != nil {
		return nil, fmt.Errorf("expired leases: %w", err)
	}
	return runs, nil
}

// Requeue moves a running run back to pending with DueAt = dueAt, fenced on
// r.Node and r.Attempt and, when r.LeaseUntil is set, on lease_until being
// unchanged and before now; the attempt count is kept.
func (s *claimStore) Requeue(ctx context.Context, r *model.Run, dueAt, now time.Time) error {
	// A requeued run is anybody's again: a shard placed on a node that
	// died is taken over like any run.
	query := `UPDATE runs SET status = 'pending', due_at = ?, lease_until = NULL, target_node = ''
		WHERE id = ? AND status = 'running' AND node = ? AND attempt = ?`
	args := []any{nanos(dueAt), r.ID, r.Node, r.Attempt}
	if r.LeaseUntil != nil {
		query += ` AND lease_until = ? AND lease_until < ?`
		args = append(args, nanos(*r.LeaseUntil), nanos(now))
	}
	res, err := s.w.ExecContext(ctx, s.q(query), args...)
	if err != nil {
		return fmt.Errorf("requeue run %s: %w", r.ID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("requeue run %s: %w", r.ID, err)
	}
	if n == 0 {
		return fmt.Errorf("requeue run %s (node %s, attempt %d): %w", r.ID, r.Node, r.Attempt, model.ErrNotClaimed)
	}
	return nil
}

// scanLeases reads rows of (id, attempt) and closes them.
func scanLeases(rows *sql.Rows) ([]store.Lease, error) {
	defer rows.Close()
	var ls []store.Lease
	for rows.Next() {
		var l store.Lease
		if err := rows.Scan(&l.RunID, &l.Attempt); err != nil {
			return nil, err
		}
		ls = append(ls, l)
	}
	return ls, rows.Err()
}

// leasePairs returns the row-value list "(?,?),…" of leases, the distinct
// run ids among them, and the list's arguments: each lease's run id and
// its attempt plus delta.
func leasePairs(ls []store.Lease, delta int) (pairs string, ids, args []any) {
	var b strings.Builder
	ids = make([]any, 0, len(ls))
	args = make([]any, 0, 2*len(ls))
	seen := make(map[string]bool, len(ls))
	for i, l := range ls {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?,?)")
		args = append(args, l.RunID, l.Attempt+delta)
		if !seen[l.RunID] {
			seen[l.RunID] = true
			ids = append(ids, l.RunID)
		}
	}
	return b.String(), ids, args
}
