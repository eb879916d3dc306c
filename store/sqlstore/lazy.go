// Lazy claims (docs/guarantees.md, "Lazy claims"): the slice owner reads
// the runs it starts without claiming them (PeekRuns), writes the claims
// of the attempts that outlive a lease (PromoteRuns), and a new owner of a
// slice fences off the attempts of the previous one (FenceSlice). The lazy
// result's fence is in finish.go.

package sqlstore

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/store"
)

// peekSQL reads the pending runs of a batch that node may claim, due by
// the last argument. On PostgreSQL the ids go as one array (peekSQLPostgres),
// so that the text is the same for every batch.
func peekSQL(n int) string {
	return `SELECT ` + runCols + ` FROM runs WHERE id IN (` + placeholders(n) + `) AND status = 'pending'` + claimTarget + ` AND due_at <= ?`
}

const peekSQLPostgres = `SELECT ` + runCols + ` FROM runs WHERE id = ANY(?::text[]) AND status = 'pending'` + claimTarget + ` AND due_at <= ?`

// PeekRuns reads the runs of ids that are pending, due by dueBy (when not
// zero) and claimable by node, with their timers loaded as ClaimRuns loads
// them (timersByID; Timer nil when the timer is gone or its secrets do not
// decrypt), sorted by store.ClaimOrder (which takes a nil timer at the
// default priority). It writes nothing: on SQLite it reads through the
// reader pool, beside the writer.
func (s *Store) PeekRuns(ctx context.Context, node string, ids []string, dueBy time.Time) ([]store.ClaimedRun, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	ids = slices.Clone(ids)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	due := int64(math.MaxInt64)
	if !dueBy.IsZero() {
		due = nanos(dueBy)
	}
	var runs []*model.Run
	err := chunks(ids, func(b []string) error {
		var got []*model.Run
		var err error
		if s.d == dialectPostgres {
			got, err = s.queryRuns(ctx, s.r, peekSQLPostgres, b, node, due)
		} else {
			got, err = s.queryRuns(ctx, s.r, peekSQL(len(b)), append(stringArgs(b), node, due)...)
		}
		runs = append(runs, got...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("peek runs: %w", err)
	}
	if len(runs) == 0 {
		return nil, nil
	}
	timers, sealed, err := s.timersByID(ctx, runs)
	if err != nil {
		return nil, fmt.Errorf("peek runs: %w", err)
	}
	out := make([]store.ClaimedRun, len(runs))
	for i, r := range runs {
		out[i] = store.ClaimedRun{Run: r}
		if sealed[r.TimerID] == nil {
			out[i].Timer = timers[r.TimerID] // nil when the timer is gone
		}
	}
	slices.SortFunc(out, store.ClaimOrder)
	return out, nil
}

// promoteSet is what a promotion writes; the attempt count goes from the
// lease's attempt-1, the fence, to the lease's.
const promoteSet = `status = 'running', node = ?, attempt = attempt + 1, lease_until = ?, started_at = ?, finished_at = NULL, duration_ms = 0`

// PromoteRuns writes the lazy claims of leases: each run still pending at
// attempt l.Attempt-1 and claimable by node becomes running for node at
// l.Attempt, with its lease until until, started at now. It returns the
// leases not so promoted. The whole call is one write transaction (on
// SQLite joining the group commit of claims and results), in statements
// of 500 leases, in run id order; on MySQL and PostgreSQL the rows are
// locked in that order before they are written (ExtendLeases' and
// FinishRuns' order).
//
// The per-dialect shapes are ExtendLeases': on PostgreSQL a constant
// statement over two arrays (run ids, fenced attempts) whose materialised
// CTE locks the rows in id order; on MySQL a locking read, then the update
// of the rows it locked; on SQLite one UPDATE … RETURNING per batch with
// a row-value IN list of (id, attempt) pairs.
func (s *Store) PromoteRuns(ctx context.Context, node string, leases []store.Lease, now, until time.Time) ([]store.Lease, error) {
	if len(leases) == 0 {
		return nil, nil
	}
	defer s.hotOp()()
	leases = slices.Clone(leases)
	slices.SortFunc(leases, func(a, b store.Lease) int {
		if c := strings.Compare(a.RunID, b.RunID); c != 0 {
			return c
		}
		return a.Attempt - b.Attempt
	})
	leases = slices.Compact(leases)
	// On MySQL a claim reads back its rows by (node, start): a promotion
	// takes a start of its own too, so that no claim of this node mistakes
	// the rows it promoted for its own.
	start, lease := s.claimStart(nanos(now)), nanos(until)
	held := map[store.Lease]bool{}
	err := s.hotTx(ctx, func(ctx context.Context, tx *wtx) error {
		clear(held)
		return chunks(leases, func(b []store.Lease) error {
			got, err := s.promoteBatch(ctx, tx, node, b, start, lease)
			for _, l := range got {
				held[l] = true
			}
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("promote %d runs: %w", len(leases), err)
	}
	var lost []store.Lease
	for _, l := range leases {
		if !held[l] {
			lost = append(lost, l)
		}
	}
	return lost, nil
}

// promoteBatch promotes a batch of leases, sorted by run id, in tx, and
// returns those promoted (at their new attempt, the lease's).
func (s *Store) promoteBatch(ctx context.Context, tx *wtx, node string, b []store.Lease, start, lease int64) ([]store.Lease, error) {
	if s.d == dialectPostgres {
		runIDs := make([]string, len(b))
		attempts := make([]int64, len(b))
		for i, l := range b {
			runIDs[i], attempts[i] = l.RunID, int64(l.Attempt-1)
		}
		rows, err := tx.QueryContext(ctx, s.q(`WITH l AS MATERIALIZED (SELECT r.id FROM runs r
				JOIN unnest(?::text[], ?::int[]) AS v(id, attempt) ON r.id = v.id AND r.attempt = v.attempt
				WHERE r.status = 'pending' AND (r.target_node = '' OR r.target_node = ?) ORDER BY r.id FOR UPDATE OF r)
			UPDATE runs SET `+promoteSet+` FROM l WHERE runs.id = l.id RETURNING runs.id, runs.attempt`),
			runIDs, attempts, node, node, lease, start)
		if err != nil {
			return nil, err
		}
		return scanLeases(rows)
	}
	pairs, ids, pairArgs := leasePairs(b, -1)
	where := `status = 'pending' AND id IN (` + placeholders(len(ids)) + `) AND (id, attempt) IN (` + pairs + `)` + claimTarget
	whereArgs := append(append(ids, pairArgs...), node)
	if s.d == dialectSQLite {
		rows, err := tx.QueryContext(ctx, `UPDATE runs SET `+promoteSet+` WHERE `+where+` RETURNING id, attempt`,
			append([]any{node, lease, start}, whereArgs...)...)
		if err != nil {
			return nil, err
		}
		return scanLeases(rows)
	}
	// MySQL: lock in id order, then update the rows locked (by their ids
	// and fenced attempts again: the lock holds them as read).
	rows, err := tx.QueryContext(ctx, `SELECT id, attempt + 1 FROM runs WHERE `+where+` ORDER BY id FOR UPDATE`, whereArgs...)
	if err != nil {
		return nil, err
	}
	held, err := scanLeases(rows)
	if err != nil || len(held) == 0 {
		return nil, err
	}
	// held: the promoted attempts, distinct runs, each at its stored
	// attempt + 1.
	pairs, ids, pairArgs = leasePairs(held, -1)
	args := append([]any{node, lease, start}, ids...)
	_, err = tx.ExecContext(ctx, `UPDATE runs SET `+promoteSet+` WHERE status = 'pending' AND id IN (`+placeholders(len(ids))+`)
		AND (id, attempt) IN (`+pairs+`)`, append(args, pairArgs...)...)
	if err != nil {
		return nil, err
	}
	return held, nil
}

// fenceSliceSQL adds one to the attempt count of the pending runs due in
// [from, to), over the index of pending runs by due_at (TestFenceSlicePlan);
// with bucketed, only those of one bucket, computed as DueRuns computes it.
func fenceSliceSQL(bucketed bool) string {
	q := `UPDATE runs SET attempt = attempt + 1 WHERE status = 'pending' AND due_at >= ? AND due_at < ?`
	if bucketed {
		q += ` AND timer_hash % ? = ?`
	}
	return q
}

// FenceSlice adds one to the attempt count of every pending run with from
// <= DueAt < to whose timer falls in bucket of buckets (every run when
// buckets <= 1), in one statement, and returns how many.
func (s *Store) FenceSlice(ctx context.Context, from, to time.Time, buckets, bucket int) (int, error) {
	args := []any{nanos(from), nanos(to)}
	if buckets > 1 {
		args = append(args, buckets, bucket)
	}
	var n int64
	err := s.tx(ctx, func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, s.q(fenceSliceSQL(buckets > 1)), args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("fence slice [%s, %s) bucket %d/%d: %w", from.Format(time.RFC3339Nano), to.Format(time.RFC3339Nano), bucket, buckets, err)
	}
	return int(n), nil
}
