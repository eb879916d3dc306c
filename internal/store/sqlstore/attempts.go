// The attempts of runs (run_attempts, written by FinishRuns) and reruns.

package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/chimehq/chime/model"
)

// RunAttempts returns the recorded attempts of run id, by attempt number;
// none for a run that has none or does not exist.
func (s *runStore) RunAttempts(ctx context.Context, id string) ([]model.Attempt, error) {
	rows, err := s.r.QueryContext(ctx, s.q(`SELECT attempt, node, started_at, finished_at, duration_ms, status, http_status,
		response_headers, error, output FROM run_attempts WHERE run_id = ? ORDER BY attempt`), id)
	if err != nil {
		return nil, fmt.Errorf("attempts of run %s: %w", id, err)
	}
	defer rows.Close()
	var out []model.Attempt
	for rows.Next() {
		var (
			a                 model.Attempt
			started, finished sql.NullInt64
			status, headers   string
		)
		if err := rows.Scan(&a.Attempt, &a.Node, &started, &finished, &a.DurationMS, &status, &a.HTTPStatus,
			&headers, &a.Error, &a.Output); err != nil {
			return nil, fmt.Errorf("attempts of run %s: %w", id, err)
		}
		a.Status = model.RunStatus(status)
		if started.Valid {
			a.StartedAt = fromNanos(started.Int64)
		}
		if finished.Valid {
			a.EndedAt = fromNanos(finished.Int64)
		}
		if headers != "" {
			// Headers that do not decode (cut by cleanText) are shown as
			// none.
			_ = json.Unmarshal([]byte(headers), &a.ResponseHeaders)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("attempts of run %s: %w", id, err)
	}
	return out, nil
}

// InsertRerun inserts r, a pending manual run with RerunOf and
// RerunScheduledAt set, due at r.DueAt. It fails when a run with r's id,
// or of r's timer at r's instant, exists.
func (s *runStore) InsertRerun(ctx context.Context, r *model.Run) error {
	if r.RerunOf == "" || r.RerunScheduledAt.IsZero() {
		return fmt.Errorf("insert rerun %s: RerunOf and RerunScheduledAt must be set", r.ID)
	}
	_, err := s.w.ExecContext(ctx, s.q(`INSERT INTO runs (`+insertRunCols+`, rerun_of, rerun_scheduled_at)
		VALUES (?,?,?,?,?,?,0,0,'','','',?,?,'',NULL,?,?)`),
		r.ID, r.TimerID, int64(model.TimerHash(r.TimerID)), r.ScheduledAt.UnixNano(), r.DueAt.UnixNano(), string(model.RunPending),
		true, r.CreatedAt.UnixNano(), r.RerunOf, r.RerunScheduledAt.UnixNano())
	if err != nil {
		return fmt.Errorf("insert rerun %s of run %s: %w", r.ID, r.RerunOf, err)
	}
	return nil
}
