package sqlstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// SaveTimer writes w in one transaction (see store.Store.SaveTimer).
func (s *timerStore) SaveTimer(ctx context.Context, w store.TimerWrite) ([]*model.Run, error) {
	t := w.Timer
	runs := prepareRuns(w.Runs)
	now := time.Now().UnixNano()
	var out []*model.Run
	save := func(ctx context.Context, tx *wtx) error {
		out = out[:0]
		if w.Create {
			if err := s.insertTimer(ctx, tx, t); err != nil {
				return err
			}
		} else if err := s.updateTimer(ctx, tx, t); err != nil {
			return err
		}
		if err := s.deps.writeDeps(ctx, tx, t); err != nil {
			return err
		}
		// Neither needs the ids back (the slice index drops entries whose
		// claim fails), so one statement each on every dialect.
		switch {
		case w.CancelPending && !w.Create:
			// The fires still to come go; those that came stay, cancelled.
			from := now
			if !w.ReplaceFrom.IsZero() {
				from = nanos(w.ReplaceFrom)
			}
			if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM runs WHERE timer_id = ? AND status = 'pending' AND scheduled_at >= ?
				AND attempt = 0 AND manual = ? AND shard_index < 0`), t.ID, from, false); err != nil {
				return fmt.Errorf("delete planned runs: %w", err)
			}
			if _, err := tx.ExecContext(ctx, s.q(`UPDATE runs SET status = 'cancelled' WHERE timer_id = ? AND status = 'pending'`), t.ID); err != nil {
				return fmt.Errorf("cancel pending runs: %w", err)
			}
		case !w.ReplaceFrom.IsZero() && !w.Create:
			if err := s.replacePending(ctx, tx, t.ID, w.ReplaceFrom, runs); err != nil {
				return fmt.Errorf("delete pending runs: %w", err)
			}
		}
		err := chunks(runs, func(batch []*model.Run) error {
			rs, err := s.runs.insertBatch(ctx, tx, batch, now)
			out = append(out, rs...)
			return err
		})
		if err != nil {
			return fmt.Errorf("insert runs: %w", err)
		}
		if w.Audit != nil {
			if err := s.sec.appendAudit(ctx, tx, w.Audit); err != nil {
				return fmt.Errorf("append audit: %w", err)
			}
		}
		return nil
	}
	// On SQLite the save joins the group commit: saves that arrive
	// together, and the claims and results meanwhile, share one fsync.
	err := s.hotTx(ctx, save)
	// A run inserted at once by the planner loses PostgreSQL's primary-key
	// race as in InsertRuns; the timer's own conflict is not isUnique.
	for attempt := 0; attempt < 3 && s.d == dialectPostgres && isUnique(err); attempt++ {
		err = s.hotTx(ctx, save)
	}
	if err != nil {
		return nil, fmt.Errorf("save timer %s: %w", t.ID, err)
	}
	return out, nil
}

// replacePending deletes the timer's pending runs scheduled at or after
// from, and its runs skipped because it was paused scheduled then too (a
// database written by an older planner holds such rows of fires to come),
// but for the pending ones that runs (its new plan) has as they
// are: the same instant due at the same time (its jittered instant, see
// model.Policy.Jitter), attempt 0, not manual. The insert that follows
// keeps them as they are, so a schedule change that keeps most fires
// (every second to every second but :00) rewrites the few it changes, not
// the whole plan, and a jitter change rewrites every due time. A plan of
// more than batchSize runs replaces every pending run.
func (s *timerStore) replacePending(ctx context.Context, tx *wtx, timerID string, from time.Time, runs []*model.Run) error {
	query := `DELETE FROM runs WHERE timer_id = ? AND (status = 'pending' OR (status = 'skipped' AND reason = ?)) AND scheduled_at >= ?`
	args := []any{timerID, model.SkipPaused, nanos(from)}
	var keep []*model.Run
	for _, r := range runs {
		if r.Status != model.RunSkipped {
			keep = append(keep, r)
		}
	}
	if n := len(keep); n > 0 && n <= batchSize {
		pairs := make([]string, n)
		for i, r := range keep {
			pairs[i] = "(?, ?)"
			due := r.DueAt
			if due.IsZero() {
				due = r.ScheduledAt
			}
			args = append(args, r.ScheduledAt.UnixNano(), due.UnixNano())
		}
		query += ` AND NOT (status = 'pending' AND (scheduled_at, due_at) IN (` + strings.Join(pairs, ", ") + `) AND attempt = 0 AND manual = ?)`
		args = append(args, false)
	}
	_, err := tx.ExecContext(ctx, s.q(query), args...)
	return err
}
