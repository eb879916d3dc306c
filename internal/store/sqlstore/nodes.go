package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// nodeStore keeps the node list (heartbeats) and the database's locks.
type nodeStore struct {
	*core
}

// Heartbeat inserts or updates the node n (address, start, last seen,
// slices, whether it stands by).
func (s *nodeStore) Heartbeat(ctx context.Context, n model.Node) error {
	slices := n.Slices
	if slices == nil {
		slices = []string{}
	}
	sl, err := json.Marshal(slices)
	if err != nil {
		return fmt.Errorf("heartbeat %s: encode slices: %w", n.ID, err)
	}
	var handlers any // NULL: the node did not tell
	if n.Handlers != nil {
		b, err := json.Marshal(n.Handlers)
		if err != nil {
			return fmt.Errorf("heartbeat %s: encode handlers: %w", n.ID, err)
		}
		handlers = string(b)
	}
	var mode, coord any // NULL: the node did not tell
	if n.ClaimMode != "" {
		mode = cleanText(n.ClaimMode, 16)
	}
	if n.Coordination != "" {
		coord = cleanText(n.Coordination, 16)
	}
	query := `INSERT INTO nodes (id, addr, started_at, seen_at, slices, pool_in_use, pool_capacity, handlers, claim_mode, standby, coordination) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET addr = excluded.addr, started_at = excluded.started_at,
		seen_at = excluded.seen_at, slices = excluded.slices, pool_in_use = excluded.pool_in_use,
		pool_capacity = excluded.pool_capacity, handlers = excluded.handlers, claim_mode = excluded.claim_mode,
		standby = excluded.standby, coordination = excluded.coordination`
	if s.d == dialectMySQL {
		query = `INSERT INTO nodes (id, addr, started_at, seen_at, slices, pool_in_use, pool_capacity, handlers, claim_mode, standby, coordination) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON DUPLICATE KEY UPDATE addr = VALUES(addr), started_at = VALUES(started_at),
			seen_at = VALUES(seen_at), slices = VALUES(slices), pool_in_use = VALUES(pool_in_use),
			pool_capacity = VALUES(pool_capacity), handlers = VALUES(handlers), claim_mode = VALUES(claim_mode),
			standby = VALUES(standby), coordination = VALUES(coordination)`
	}
	// The address is only shown: cut to what every dialect's column takes
	// (VARCHAR(255) on MySQL).
	addr := cleanText(n.Addr, 255)
	if _, err := s.w.ExecContext(ctx, s.q(query), n.ID, addr, nanos(n.StartedAt), nanos(n.SeenAt), string(sl),
		n.PoolInUse, n.PoolCapacity, handlers, mode, n.Standby, coord); err != nil {
		return fmt.Errorf("heartbeat %s: %w", n.ID, err)
	}
	return nil
}

// ListNodes returns the nodes seen at or after seenSince, ordered by ID.
func (s *nodeStore) ListNodes(ctx context.Context, seenSince time.Time) ([]model.Node, error) {
	rows, err := s.r.QueryContext(ctx, s.q(`SELECT id, addr, started_at, seen_at, slices, pool_in_use, pool_capacity, handlers, claim_mode, standby, coordination FROM nodes WHERE seen_at >= ? ORDER BY id`), nanos(seenSince))
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	defer rows.Close()
	var out []model.Node
	for rows.Next() {
		var (
			n             model.Node
			started, seen int64
			sl            string
			handlers      sql.NullString
			mode, coord   sql.NullString
		)
		if err := rows.Scan(&n.ID, &n.Addr, &started, &seen, &sl, &n.PoolInUse, &n.PoolCapacity, &handlers, &mode, &n.Standby, &coord); err != nil {
			return nil, fmt.Errorf("list nodes: %w", err)
		}
		if err := json.Unmarshal([]byte(sl), &n.Slices); err != nil {
			return nil, fmt.Errorf("list nodes: node %s: decode slices: %w", n.ID, err)
		}
		if handlers.Valid {
			if err := json.Unmarshal([]byte(handlers.String), &n.Handlers); err != nil {
				return nil, fmt.Errorf("list nodes: node %s: decode handlers: %w", n.ID, err)
			}
		}
		n.StartedAt, n.SeenAt, n.ClaimMode, n.Coordination = fromNanos(started), fromNanos(seen), mode.String, coord.String
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	return out, nil
}

// DeleteNode removes the node; deleting a missing node is not an error.
func (s *nodeStore) DeleteNode(ctx context.Context, id string) error {
	if _, err := s.w.ExecContext(ctx, s.q(`DELETE FROM nodes WHERE id = ?`), id); err != nil {
		return fmt.Errorf("delete node %s: %w", id, err)
	}
	return nil
}

// Stats counts timers by state and runs by status.
func (s *core) Stats(ctx context.Context) (store.Stats, error) {
	st := store.Stats{Runs: map[model.RunStatus]int64{}}
	rows, err := s.r.QueryContext(ctx, `SELECT enabled, COUNT(*) FROM timers GROUP BY enabled`)
	if err != nil {
		return st, fmt.Errorf("stats: %w", err)
	}
	for rows.Next() {
		var enabled bool
		var n int64
		if err := rows.Scan(&enabled, &n); err != nil {
			rows.Close()
			return st, fmt.Errorf("stats: %w", err)
		}
		if enabled {
			st.TimersEnabled += n
		} else {
			st.TimersDisabled += n
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return st, fmt.Errorf("stats: %w", err)
	}
	rows, err = s.r.QueryContext(ctx, `SELECT status, COUNT(*) FROM runs GROUP BY status`)
	if err != nil {
		return st, fmt.Errorf("stats: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var status string
		var n int64
		if err := rows.Scan(&status, &n); err != nil {
			return st, fmt.Errorf("stats: %w", err)
		}
		st.Runs[model.RunStatus(status)] = n
	}
	if err := rows.Err(); err != nil {
		return st, fmt.Errorf("stats: %w", err)
	}
	return st, nil
}

// Now returns the store's clock. On MySQL/MariaDB and PostgreSQL it is the
// database server's clock, read to the microsecond; SQLite runs in this
// process, so its clock is this machine's (time.Now, which is what SQLite's
// own 'now' reads too).
func (s *core) Now(ctx context.Context) (time.Time, error) {
	var query string
	switch s.d {
	case dialectMySQL:
		query = `SELECT CAST(UNIX_TIMESTAMP(SYSDATE(6)) * 1000000 AS SIGNED)`
	case dialectPostgres:
		query = `SELECT (extract(epoch from clock_timestamp()) * 1000000)::bigint`
	default:
		return time.Now(), nil
	}
	var us int64
	if err := s.r.QueryRowContext(ctx, query).Scan(&us); err != nil {
		return time.Time{}, fmt.Errorf("store clock: %w", err)
	}
	return time.UnixMicro(us).UTC(), nil
}
