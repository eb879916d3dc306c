// Reads of the runs of a period, for reports (generate_report).

package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// periodCols are the columns RunsScheduled reads: not output and error.
const periodCols = `id, timer_id, scheduled_at, due_at, status, attempt, started_at, finished_at, duration_ms, node, manual`

// runIDSecond is the first 8 hex digits of the ids of the runs scheduled
// in Unix second sec (model.RunID), clamped to the 32 bits they hold.
func runIDSecond(sec int64) string {
	sec = max(0, min(sec, 1<<32-1))
	return fmt.Sprintf("%08x", uint32(sec))
}

// RunsScheduled implements store.Reports: one range of the primary key
// (see the interface).
func (s *runStore) RunsScheduled(ctx context.Context, f store.PeriodFilter) ([]*model.Run, string, error) {
	limit := f.Limit
	if limit <= 0 || limit > store.MaxPeriodPage {
		limit = store.MaxPeriodPage
	}
	if !f.From.Before(f.To) {
		return nil, "", nil
	}
	lo, hi := runIDSecond(f.From.Unix()), runIDSecond(f.To.Unix()+1)
	if f.To.Unix()+1 > 1<<32-1 {
		hi = "g" // after every hex digit
	}
	query := `SELECT ` + periodCols + ` FROM runs WHERE id >= ? AND id < ? AND scheduled_at >= ? AND scheduled_at < ?`
	args := []any{lo, hi, nanos(f.From), nanos(f.To)}
	if f.After != "" {
		query += ` AND id > ?`
		args = append(args, f.After)
	}
	// No join with timers for Apps: every optimizer then keeps to the
	// primary key's order instead of sorting the period's runs of the
	// apps' timers for each page. The apps are filtered below.
	query += fmt.Sprintf(` ORDER BY id LIMIT %d`, limit+1)
	out, err := s.scanPeriod(ctx, query, args...)
	if err != nil {
		return nil, "", fmt.Errorf("runs scheduled: %w", err)
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		next = out[limit-1].ID
	}
	if len(f.Apps) > 0 {
		if out, err = s.keepApps(ctx, out, f.Apps); err != nil {
			return nil, "", fmt.Errorf("runs scheduled: %w", err)
		}
	}
	return out, next, nil
}

// keepApps keeps the runs of timers of apps, looking the apps of the
// runs' timers up by primary key.
func (s *runStore) keepApps(ctx context.Context, runs []*model.Run, apps []string) ([]*model.Run, error) {
	var ids []string
	seen := map[string]bool{}
	for _, r := range runs {
		if !seen[r.TimerID] {
			seen[r.TimerID] = true
			ids = append(ids, r.TimerID)
		}
	}
	keep := map[string]bool{}
	for len(ids) > 0 {
		n := min(len(ids), batchSize)
		rows, err := s.r.QueryContext(ctx, s.q(`SELECT id, app FROM timers WHERE id IN (`+placeholders(n)+`)`), stringArgs(ids[:n])...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var id, app string
			if err := rows.Scan(&id, &app); err != nil {
				rows.Close()
				return nil, err
			}
			keep[id] = slices.Contains(apps, app)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		ids = ids[n:]
	}
	return slices.DeleteFunc(runs, func(r *model.Run) bool { return !keep[r.TimerID] }), nil
}

func (s *runStore) scanPeriod(ctx context.Context, query string, args ...any) ([]*model.Run, error) {
	rows, err := s.r.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*model.Run
	for rows.Next() {
		var (
			r                 model.Run
			scheduled, due    int64
			started, finished sql.NullInt64
			status            string
		)
		if err := rows.Scan(&r.ID, &r.TimerID, &scheduled, &due, &status, &r.Attempt, &started, &finished,
			&r.DurationMS, &r.Node, &r.Manual); err != nil {
			return nil, err
		}
		r.Status = model.RunStatus(status)
		r.ScheduledAt, r.DueAt = fromNanos(scheduled), fromNanos(due)
		r.StartedAt, r.FinishedAt = nullTime(started), nullTime(finished)
		out = append(out, &r)
	}
	return out, rows.Err()
}
