// Status changes outside claims and results: a run skipped or cancelled,
// a pending run moved, and the error that tells a fence from a missing run.

package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// SetRunStatus moves a run from status from to status to, recording reason in
// Error (cleaned as a result's error is). Moving to a terminal status also clears the lease. It returns an
// error wrapping model.ErrNotFound when the run does not exist and
// model.ErrNotClaimed when it is not in status from. A move to failed or
// succeeded returns the runs it made for the timers after the run's.
func (s *runStore) SetRunStatus(ctx context.Context, runID string, from, to model.RunStatus, reason string) ([]*model.Run, error) {
	query := `UPDATE runs SET status = ?, error = ? WHERE id = ? AND status = ?`
	if to.Terminal() {
		query = `UPDATE runs SET status = ?, error = ?, lease_until = NULL WHERE id = ? AND status = ?`
	}
	args := []any{string(to), cleanText(reason, store.MaxResultText), runID, string(from)}
	what := fmt.Sprintf("set run %s status %s -> %s", runID, from, to)
	if to != model.RunFailed && to != model.RunSucceeded {
		res, err := s.w.ExecContext(ctx, s.q(query), args...)
		if err != nil {
			return nil, fmt.Errorf("set run %s status %s: %w", runID, to, err)
		}
		return nil, s.checkRunUpdated(ctx, res, runID, what)
	}
	// An end (a run failed by the sweeper at its last attempt): the runs
	// of the timers after it, and its notify event, are made in the same
	// transaction.
	var res sql.Result
	var made []*model.Run
	err := s.tx(ctx, func(tx *wtx) error {
		var err error
		made = nil
		if res, err = tx.ExecContext(ctx, s.q(query), args...); err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		now := time.Now().UTC()
		if made, err = s.deps.follow(ctx, tx, []ended{{runID: runID, status: to, at: now}}); err != nil {
			return err
		}
		// Its notify event (failure notifications), as a result's.
		var timerID string
		var attempt int
		if err := tx.QueryRowContext(ctx, s.q(`SELECT timer_id, attempt FROM runs WHERE id = ?`), runID).Scan(&timerID, &attempt); err != nil {
			return err
		}
		return s.notify.writeNotifyEvents(ctx, tx, []model.Result{{RunID: runID, Attempt: attempt, TimerID: timerID, Status: to,
			FinishedAt: now, Notify: true}}, []bool{true})
	})
	if err != nil {
		return nil, fmt.Errorf("set run %s status %s: %w", runID, to, err)
	}
	return made, s.checkRunUpdated(ctx, res, runID, what)
}

// RescheduleRun sets DueAt of a pending run. It returns an error wrapping
// model.ErrNotClaimed when the run is not pending (ErrNotFound when
// missing).
func (s *runStore) RescheduleRun(ctx context.Context, runID string, dueAt time.Time) error {
	res, err := s.w.ExecContext(ctx, s.q(`UPDATE runs SET due_at = ? WHERE id = ? AND status = 'pending'`), nanos(dueAt), runID)
	if err != nil {
		return fmt.Errorf("reschedule run %s: %w", runID, err)
	}
	return s.checkRunUpdated(ctx, res, runID, "reschedule run "+runID)
}
