// Retention: the deletes of old finished runs and audit entries, one
// bounded statement at a time.

package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/chimehq/chime/internal/store"
)

// historyStore deletes what retention no longer keeps and stores the
// dashboard's minutes.
type historyStore struct {
	*core
}

// finishedIn is the condition of a finished run: the only ones retention
// deletes.
const finishedIn = `status IN ('succeeded', 'failed', 'skipped', 'cancelled')`

func pruneLimit(n int) int {
	if n <= 0 {
		return store.MaxPruneBatch
	}
	return min(n, store.MaxPruneBatch)
}

// TimerHistories implements store.Retention.
func (s *historyStore) TimerHistories(ctx context.Context, after string, limit int) ([]store.TimerHistory, error) {
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	rows, err := s.r.QueryContext(ctx, s.q(`SELECT id, history FROM timers WHERE id > ? ORDER BY id LIMIT `+fmt.Sprint(limit)), after)
	if err != nil {
		return nil, fmt.Errorf("timer histories: %w", err)
	}
	defer rows.Close()
	var out []store.TimerHistory
	for rows.Next() {
		var (
			th      store.TimerHistory
			history string
		)
		if err := rows.Scan(&th.ID, &history); err != nil {
			return nil, fmt.Errorf("timer histories: %w", err)
		}
		if err := decodeHistory(&th.History, th.ID, history); err != nil {
			return nil, fmt.Errorf("timer histories: %w", err)
		}
		out = append(out, th)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("timer histories: %w", err)
	}
	return out, nil
}

// PruneRuns implements store.Retention. It reads the cut-off and the ids
// on the read pool (index ranges of runs(timer_id, scheduled_at)), then
// deletes those ids that are still finished on the writer (deleteIDs).
func (s *historyStore) PruneRuns(ctx context.Context, p store.RunPrune) (int, error) {
	limit := pruneLimit(p.Limit)
	cut, err := s.pruneCut(ctx, p)
	if err != nil {
		return 0, fmt.Errorf("prune runs of timer %s: %w", p.TimerID, err)
	}
	if cut == 0 {
		return 0, nil
	}
	// The shards of a fire still waiting stay: FinishFires counts them.
	// A fire waits only after its shards exist, and ends only after they
	// all did, so the delete need not check again.
	ids, err := s.queryIDs(ctx, s.r, `SELECT id FROM runs WHERE timer_id = ? AND scheduled_at < ? AND `+finishedIn+`
		AND (shard_index < 0 OR NOT EXISTS (SELECT 1 FROM runs f WHERE f.id = runs.fire_id AND f.status = 'running'))
		ORDER BY scheduled_at LIMIT `+fmt.Sprint(limit), p.TimerID, cut)
	if err != nil {
		return 0, fmt.Errorf("prune runs of timer %s: %w", p.TimerID, err)
	}
	// The ended scheduled fires among the rows deleted are added to the
	// timer's fires_pruned in the same transaction (store.CountFires):
	// the rows are locked first, so that two nodes pruning the same runs
	// count each once.
	n, err := s.deleteIDs(ctx, `DELETE FROM runs WHERE id IN (%s) AND `+finishedIn, ids, func(tx *wtx, part []string) error {
		// The attempts go with their runs (the runs are ended: no attempt
		// of theirs is recorded any more).
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM run_attempts WHERE run_id IN (`+placeholders(len(part))+`)`),
			stringArgs(part)...); err != nil {
			return err
		}
		lock := ""
		if s.d != dialectSQLite {
			lock = " FOR UPDATE"
		}
		var fires int
		rows, err := tx.QueryContext(ctx, s.q(`SELECT CASE WHEN status IN ('succeeded', 'failed') AND `+scheduledFire+` THEN 1 ELSE 0 END
			FROM runs WHERE id IN (`+placeholders(len(part))+`) AND `+finishedIn+` ORDER BY id`+lock), append([]any{false}, stringArgs(part)...)...)
		if err != nil {
			return err
		}
		for rows.Next() {
			var one int
			if err := rows.Scan(&one); err != nil {
				rows.Close()
				return err
			}
			fires += one
		}
		rows.Close()
		if err := rows.Err(); err != nil || fires == 0 {
			return err
		}
		_, err = tx.ExecContext(ctx, s.q(`UPDATE timers SET fires_pruned = fires_pruned + ? WHERE id = ?`), fires, p.TimerID)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune runs of timer %s: %w", p.TimerID, err)
	}
	return n, nil
}

// pruneCut returns the instant before which p deletes finished runs, in
// Unix nanoseconds: the later of p.Before and the Keep-th newest finished
// run's, but no later than p.Recent; 0 when p deletes nothing.
func (s *historyStore) pruneCut(ctx context.Context, p store.RunPrune) (int64, error) {
	cut := nanos(p.Before)
	if p.Keep > 0 {
		// First an index-only look: a timer with at most Keep runs of any
		// status has no finished run beyond Keep, and needs no read of its
		// rows' statuses.
		var at int64
		err := s.r.QueryRowContext(ctx, s.q(`SELECT scheduled_at FROM runs WHERE timer_id = ?
			ORDER BY scheduled_at DESC LIMIT 1 OFFSET `+fmt.Sprint(p.Keep)), p.TimerID).Scan(&at)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return 0, err
		default:
			err := s.r.QueryRowContext(ctx, s.q(`SELECT scheduled_at FROM runs WHERE timer_id = ? AND `+finishedIn+`
				ORDER BY scheduled_at DESC LIMIT 1 OFFSET `+fmt.Sprint(p.Keep-1)), p.TimerID).Scan(&at)
			switch {
			case errors.Is(err, sql.ErrNoRows):
			case err != nil:
				return 0, err
			default:
				cut = max(cut, at)
			}
		}
	}
	if recent := nanos(p.Recent); cut != 0 && recent != 0 {
		cut = min(cut, recent)
	}
	return cut, nil
}

// PruneAudit implements store.Retention, through index audit(at).
func (s *historyStore) PruneAudit(ctx context.Context, before time.Time, limit int) (int, error) {
	if before.IsZero() {
		return 0, nil
	}
	ids, err := s.queryIDs(ctx, s.r, `SELECT id FROM audit WHERE at < ? ORDER BY at LIMIT `+fmt.Sprint(pruneLimit(limit)), nanos(before))
	if err != nil {
		return 0, fmt.Errorf("prune audit: %w", err)
	}
	n, err := s.deleteIDs(ctx, `DELETE FROM audit WHERE id IN (%s)`, ids, nil)
	if err != nil {
		return 0, fmt.Errorf("prune audit: %w", err)
	}
	return n, nil
}

// sqlitePruneChunk is the most rows one delete statement takes on SQLite:
// there the statement holds the one writer that claims and results need,
// and a statement of 1,000 scattered runs held it for tens of
// milliseconds (BenchmarkStats/prune in package api).
const sqlitePruneChunk = 100

// deleteIDs runs the delete query, whose %s is the list of ids, on the
// writer, after the hot path's waiting writes had it, and returns the rows
// it deleted: one statement, or on SQLite one transaction of a statement
// per sqlitePruneChunk ids, each after yieldToHot. before, when not nil,
// runs first in each transaction, with its ids.
func (s *historyStore) deleteIDs(ctx context.Context, query string, ids []string, before func(tx *wtx, ids []string) error) (int, error) {
	chunk := len(ids)
	if s.d == dialectSQLite {
		chunk = sqlitePruneChunk
	}
	total := 0
	for len(ids) > 0 {
		part := ids[:min(chunk, len(ids))]
		ids = ids[len(part):]
		s.yieldToHot(ctx)
		var n int64
		err := s.tx(ctx, func(tx *wtx) error {
			if before != nil {
				if err := before(tx, part); err != nil {
					return err
				}
			}
			res, err := tx.ExecContext(ctx, s.q(fmt.Sprintf(query, placeholders(len(part)))), stringArgs(part)...)
			if err != nil {
				return err
			}
			n, err = res.RowsAffected()
			return err
		})
		total += int(n)
		if err != nil {
			return total, err
		}
	}
	return total, nil
}
