package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/chimehq/chime/internal/store"
)

// The web UI dashboard's table: each node's counts of each minute.

// PutStatsMinutes inserts or replaces rows by (minute, node), in one
// statement.
func (s *historyStore) PutStatsMinutes(ctx context.Context, rows []store.StatsMinute) error {
	if len(rows) == 0 {
		return nil
	}
	var b strings.Builder
	args := make([]any, 0, 5*len(rows))
	for i, r := range rows {
		fires, err := json.Marshal(nonNilMap(r.Fires))
		if err != nil {
			return fmt.Errorf("put stats minutes: %w", err)
		}
		delays, err := json.Marshal(nonNil(r.Delays))
		if err != nil {
			return fmt.Errorf("put stats minutes: %w", err)
		}
		timers, err := json.Marshal(nonNil(r.Timers))
		if err != nil {
			return fmt.Errorf("put stats minutes: %w", err)
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, ?, ?)")
		args = append(args, nanos(r.Minute), cleanText(r.Node, 255), string(fires), string(delays), string(timers))
	}
	query := `INSERT INTO stats_minutes (minute, node, fires, delays, timers) VALUES ` + b.String() + `
		ON CONFLICT (minute, node) DO UPDATE SET fires = excluded.fires, delays = excluded.delays, timers = excluded.timers`
	if s.d == dialectMySQL {
		query = `INSERT INTO stats_minutes (minute, node, fires, delays, timers) VALUES ` + b.String() + `
			ON DUPLICATE KEY UPDATE fires = VALUES(fires), delays = VALUES(delays), timers = VALUES(timers)`
	}
	if _, err := s.w.ExecContext(ctx, s.q(query), args...); err != nil {
		return fmt.Errorf("put stats minutes: %w", err)
	}
	return nil
}

func nonNil[T any](xs []T) []T {
	if xs == nil {
		return []T{}
	}
	return xs
}

func nonNilMap(m map[string]int64) map[string]int64 {
	if m == nil {
		return map[string]int64{}
	}
	return m
}

// StatsMinutes returns the rows from since on, by minute and node.
func (s *historyStore) StatsMinutes(ctx context.Context, since time.Time) ([]store.StatsMinute, error) {
	rows, err := s.r.QueryContext(ctx, s.q(`SELECT minute, node, fires, delays, timers FROM stats_minutes
		WHERE minute >= ? ORDER BY minute, node`), nanos(since))
	if err != nil {
		return nil, fmt.Errorf("stats minutes: %w", err)
	}
	defer rows.Close()
	var out []store.StatsMinute
	for rows.Next() {
		var (
			r                     store.StatsMinute
			minute                int64
			fires, delays, timers string
		)
		if err := rows.Scan(&minute, &r.Node, &fires, &delays, &timers); err != nil {
			return nil, fmt.Errorf("stats minutes: %w", err)
		}
		r.Minute = fromNanos(minute)
		if err := json.Unmarshal([]byte(fires), &r.Fires); err != nil {
			return nil, fmt.Errorf("stats minutes: node %s: decode fires: %w", r.Node, err)
		}
		if err := json.Unmarshal([]byte(delays), &r.Delays); err != nil {
			return nil, fmt.Errorf("stats minutes: node %s: decode delays: %w", r.Node, err)
		}
		if err := json.Unmarshal([]byte(timers), &r.Timers); err != nil {
			return nil, fmt.Errorf("stats minutes: node %s: decode timers: %w", r.Node, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("stats minutes: %w", err)
	}
	return out, nil
}

// PruneStatsMinutes deletes the rows of minutes before before.
func (s *historyStore) PruneStatsMinutes(ctx context.Context, before time.Time) (int, error) {
	res, err := s.w.ExecContext(ctx, s.q(`DELETE FROM stats_minutes WHERE minute < ?`), nanos(before))
	if err != nil {
		return 0, fmt.Errorf("prune stats minutes: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("prune stats minutes: %w", err)
	}
	return int(n), nil
}
