package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// timerStore keeps the timers: reads, saves (with the runs they replace and
// their audit entry), deletes and what planning reads and writes of them.
type timerStore struct {
	*core
	deps *depStore
	runs *runStore
	sec  *securityStore
	// cache keeps the timers that claims return (timersByID).
	cache timerCache
}

const timerCols = `id, app, name, description, schedule, timezone, enabled, action, timeout_ns, retry, created_at, updated_at, planned_until, policy, history, paused, next_fire_at, priority, notify, disabled_reason`

type scanner interface{ Scan(dest ...any) error }

func scanTimer(sc scanner) (*model.Timer, error) {
	var (
		t                         model.Timer
		action, retry, policy     string
		history                   string
		timeout, created, updated int64
		planned, nextFire         int64
		priority                  int
		notify                    string
	)
	if err := sc.Scan(&t.ID, &t.App, &t.Name, &t.Description, &t.Schedule, &t.Timezone, &t.Enabled,
		&action, &timeout, &retry, &created, &updated, &planned, &policy, &history, &t.Paused, &nextFire, &priority, &notify, &t.DisabledReason); err != nil {
		return nil, err
	}
	t.Priority = &priority
	if notify != "" {
		if err := json.Unmarshal([]byte(notify), &t.Notify); err != nil {
			return nil, fmt.Errorf("timer %s: decode notify: %w", t.ID, err)
		}
	}
	if err := json.Unmarshal([]byte(action), &t.Action); err != nil {
		return nil, fmt.Errorf("timer %s: decode action: %w", t.ID, err)
	}
	if err := json.Unmarshal([]byte(retry), &t.Retry); err != nil {
		return nil, fmt.Errorf("timer %s: decode retry: %w", t.ID, err)
	}
	if err := decodePolicy(&t, policy); err != nil {
		return nil, err
	}
	if err := decodeHistory(&t.History, t.ID, history); err != nil {
		return nil, err
	}
	t.Timeout = time.Duration(timeout)
	t.CreatedAt = fromNanos(created)
	t.UpdatedAt = fromNanos(updated)
	t.PlannedUntil = fromNanos(planned)
	if nextFire != noNextFire {
		t.NextFireAt = fromNanos(nextFire)
	}
	return &t, nil
}

// scanTimer is the package's scanTimer that also opens the timer's sealed
// secrets. When they do not open it returns the timer, secrets sealed,
// with an error wrapping ErrSecretKey that names the timer.
func (s *timerStore) scanTimer(sc scanner) (*model.Timer, error) {
	t, err := scanTimer(sc)
	if err != nil {
		return nil, err
	}
	if err := s.openAction(&t.Action); err != nil {
		return t, fmt.Errorf("timer %s (%s/%s): %w", t.ID, t.App, t.Name, err)
	}
	if err := s.openNotify(t.Notify); err != nil {
		return t, fmt.Errorf("timer %s (%s/%s): %w", t.ID, t.App, t.Name, err)
	}
	return t, nil
}

// decodePolicy sets t.Policy from its stored JSON; empty means none.
func decodePolicy(t *model.Timer, policy string) error {
	if policy == "" {
		return nil
	}
	if err := json.Unmarshal([]byte(policy), &t.Policy); err != nil {
		return fmt.Errorf("timer %s: decode policy: %w", t.ID, err)
	}
	return nil
}

// decodeHistory sets h from its stored JSON; empty means the server's
// defaults.
func decodeHistory(h *model.History, id, history string) error {
	if history == "" {
		return nil
	}
	if err := json.Unmarshal([]byte(history), h); err != nil {
		return fmt.Errorf("timer %s: decode history: %w", id, err)
	}
	return nil
}

// encodeHistory is the stored form of h: "" when it sets nothing.
func encodeHistory(h model.History) (string, error) {
	if h.IsZero() {
		return "", nil
	}
	b, err := json.Marshal(h)
	if err != nil {
		return "", fmt.Errorf("encode history: %w", err)
	}
	return string(b), nil
}

// nanos converts t to Unix nanoseconds; the zero time is 0.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// fromNanos is the inverse of nanos, in UTC.
func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func (s *timerStore) timerArgs(t *model.Timer) ([]any, error) {
	sealed, err := s.sealAction(t.Action)
	if err != nil {
		return nil, fmt.Errorf("encrypt action: %w", err)
	}
	action, err := json.Marshal(sealed)
	if err != nil {
		return nil, fmt.Errorf("encode action: %w", err)
	}
	retry, err := json.Marshal(t.Retry)
	if err != nil {
		return nil, fmt.Errorf("encode retry: %w", err)
	}
	policy := ""
	if t.Policy != (model.Policy{}) {
		b, err := json.Marshal(t.Policy)
		if err != nil {
			return nil, fmt.Errorf("encode policy: %w", err)
		}
		policy = string(b)
	}
	history, err := encodeHistory(t.History)
	if err != nil {
		return nil, err
	}
	notify := ""
	if len(t.Notify) > 0 {
		rules, err := s.sealNotify(t.Notify)
		if err != nil {
			return nil, fmt.Errorf("encrypt notify: %w", err)
		}
		b, err := json.Marshal(rules)
		if err != nil {
			return nil, fmt.Errorf("encode notify: %w", err)
		}
		notify = string(b)
	}
	return []any{t.ID, t.App, t.Name, t.Description, t.Schedule, t.Timezone, t.Enabled,
		string(action), int64(t.Timeout), string(retry), nanos(t.CreatedAt), nanos(t.UpdatedAt), nanos(t.PlannedUntil), policy, history, t.Paused, nextFireNanos(t),
		t.EffectivePriority(), notify, t.DisabledReason}, nil
}

// noNextFire is the next_fire_at of a timer without a next fire: the
// largest BIGINT, so that such timers sort last.
const noNextFire = math.MaxInt64

// nextFireNanos is the stored next_fire_at of t: noNextFire when it is
// disabled or has no NextFireAt.
func nextFireNanos(t *model.Timer) int64 {
	if !t.Enabled || t.NextFireAt.IsZero() {
		return noNextFire
	}
	return t.NextFireAt.UnixNano()
}

// execer runs a statement: the writer pool or a write transaction.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// insertTimer inserts t with ex. A conflict gives an error wrapping
// model.ErrConflict (and not the driver's error, so that isUnique tells it
// from a run's conflict).
func (s *timerStore) insertTimer(ctx context.Context, ex execer, t *model.Timer) error {
	if t.ID == "" {
		return errors.New("empty id")
	}
	args, err := s.timerArgs(t)
	if err != nil {
		return err
	}
	_, err = ex.ExecContext(ctx, s.q(`INSERT INTO timers (`+timerCols+`) VALUES (`+placeholders(20)+`)`), args...)
	if isUnique(err) {
		return fmt.Errorf("%s/%s: %w", t.App, t.Name, model.ErrConflict)
	}
	return err
}

// GetTimer returns the timer with id, or an error wrapping model.ErrNotFound.
func (s *timerStore) GetTimer(ctx context.Context, id string) (*model.Timer, error) {
	t, err := s.scanTimer(s.r.QueryRowContext(ctx, s.q(`SELECT `+timerCols+` FROM timers WHERE id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get timer %s: %w", id, model.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get timer %s: %w", id, err)
	}
	if err := s.deps.loadAfter(ctx, s.r, t); err != nil {
		return nil, fmt.Errorf("get timer %s: %w", id, err)
	}
	return t, nil
}

// GetTimerByName returns the timer (app, name), or an error wrapping
// model.ErrNotFound.
func (s *timerStore) GetTimerByName(ctx context.Context, app, name string) (*model.Timer, error) {
	t, err := s.scanTimer(s.r.QueryRowContext(ctx, s.q(`SELECT `+timerCols+` FROM timers WHERE app = ? AND name = ?`), app, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get timer %s/%s: %w", app, name, model.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get timer %s/%s: %w", app, name, err)
	}
	if err := s.deps.loadAfter(ctx, s.r, t); err != nil {
		return nil, fmt.Errorf("get timer %s/%s: %w", app, name, err)
	}
	return t, nil
}

// UpdateTimer replaces every field of the timer with t.ID except CreatedAt,
// which keeps its stored value.
func (s *timerStore) UpdateTimer(ctx context.Context, t *model.Timer) error {
	err := s.tx(ctx, func(tx *wtx) error {
		if err := s.updateTimer(ctx, tx, t); err != nil {
			return err
		}
		return s.deps.writeDeps(ctx, tx, t)
	})
	if err != nil {
		return fmt.Errorf("update timer %s: %w", t.ID, err)
	}
	return nil
}

// updateTimer is UpdateTimer with ex; its errors wrap model.ErrConflict or
// model.ErrNotFound, never the driver's conflict.
func (s *timerStore) updateTimer(ctx context.Context, ex execer, t *model.Timer) error {
	args, err := s.timerArgs(t)
	if err != nil {
		return err
	}
	// args: id, app, name, description, schedule, timezone, enabled, action,
	// timeout, retry, created, updated, planned, policy, history, paused,
	// next fire, priority, notify, disabled reason.
	res, err := ex.ExecContext(ctx, s.q(`UPDATE timers SET app = ?, name = ?, description = ?, schedule = ?, timezone = ?,
		enabled = ?, action = ?, timeout_ns = ?, retry = ?, updated_at = ?, planned_until = ?, policy = ?, history = ?,
		paused = ?, next_fire_at = ?, priority = ?, notify = ?, disabled_reason = ?, version = version + 1 WHERE id = ?`),
		args[1], args[2], args[3], args[4], args[5], args[6], args[7], args[8], args[9], args[11], args[12], args[13], args[14],
		args[15], args[16], args[17], args[18], args[19], args[0])
	if isUnique(err) {
		return fmt.Errorf("%s/%s: %w", t.App, t.Name, model.ErrConflict)
	}
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return model.ErrNotFound
	}
	return nil
}

// DeleteTimer deletes the timer and all its runs in one transaction. It
// refuses, with an error wrapping model.ErrHasDependents that names them,
// while other timers run after it (see DetachDependents).
//
// The timer's row is deleted before its runs, as a save updates it before
// its runs: a delete that comes while InsertPlanned holds the timer's row
// locked for share waits for it there, and its delete of the runs, which
// comes after, finds the runs that the planner committed. Deleting the
// runs first left those runs behind, of a timer that no longer exists
// (storetest Planning/GuardedConcurrently), or deadlocked with the
// planner's insert of a run it had just deleted.
func (s *timerStore) DeleteTimer(ctx context.Context, id string) error {
	err := s.tx(ctx, func(tx *wtx) error {
		if err := s.deps.refuseDependents(ctx, tx, id); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM timer_deps WHERE timer_id = ?`), id); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, s.q(`DELETE FROM timers WHERE id = ?`), id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return model.ErrNotFound
		}
		// The attempts go with their runs.
		_, err = tx.ExecContext(ctx, s.q(`DELETE FROM run_attempts WHERE run_id IN (SELECT id FROM runs WHERE timer_id = ?)`), id)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, s.q(`DELETE FROM runs WHERE timer_id = ?`), id)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete timer %s: %w", id, err)
	}
	return nil
}

func clampLimit(n int) int {
	if n <= 0 {
		return 100
	}
	return min(n, 1000)
}

// appWhere returns the conditions (and their args) of a list filtered to
// app, when set, and to the apps of an app-scoped token, when any.
func appWhere(app string, apps []string) (where []string, args []any) {
	if app != "" {
		where = append(where, "app = ?")
		args = append(args, app)
	}
	if len(apps) > 0 {
		where = append(where, "app IN ("+placeholders(len(apps))+")")
		for _, a := range apps {
			args = append(args, a)
		}
	}
	return where, args
}

// likeEscaper escapes a LIKE pattern's wildcards with '!'.
var likeEscaper = strings.NewReplacer("!", "!!", "%", "!%", "_", "!_")

// timerWhere returns the conditions (and their args) of f's App, Apps and
// NameContains.
func (s *timerStore) timerWhere(f store.TimerFilter) (where []string, args []any) {
	where, args = appWhere(f.App, f.Apps)
	if f.NameContains != "" {
		// '!' escapes the pattern's own % and _.
		pattern := "%" + likeEscaper.Replace(strings.ToLower(f.NameContains)) + "%"
		if s.d == dialectSQLite {
			// LIKE ignores ASCII case in SQLite. The names are matched
			// in a scan of the (app, name) index, which holds every
			// name and its rowid, before any row is read: reading the
			// rows in id order to test each name took 365 ms p50 for
			// 100,000 timers.
			where = append(where, "rowid IN (SELECT rowid FROM timers WHERE name LIKE ? ESCAPE '!')")
		} else {
			// LOWER on both sides: LIKE ignores case in MySQL's default
			// collation but not in PostgreSQL.
			where = append(where, "LOWER(name) LIKE ? ESCAPE '!'")
		}
		args = append(args, pattern)
	}
	return where, args
}

// CountTimers counts the timers f selects by state: one grouped scan of
// the rows (or of the app index's range) they select.
func (s *timerStore) CountTimers(ctx context.Context, f store.TimerFilter) (store.TimerCounts, error) {
	var c store.TimerCounts
	where, args := s.timerWhere(f)
	query := `SELECT enabled, paused, COUNT(*) FROM timers`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	rows, err := s.r.QueryContext(ctx, s.q(query+" GROUP BY enabled, paused"), args...)
	if err != nil {
		return c, fmt.Errorf("count timers: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var enabled, paused bool
		var n int64
		if err := rows.Scan(&enabled, &paused, &n); err != nil {
			return c, fmt.Errorf("count timers: %w", err)
		}
		switch {
		case !enabled:
			c.Disabled += n
		case paused:
			c.Paused += n
		default:
			c.Enabled += n
		}
	}
	if err := rows.Err(); err != nil {
		return c, fmt.Errorf("count timers: %w", err)
	}
	return c, nil
}

// ListTimers returns timers ordered by ID, or by next fire then ID. The
// cursor is the last ID of the page, or its next fire and ID.
func (s *timerStore) ListTimers(ctx context.Context, f store.TimerFilter) ([]*model.Timer, string, error) {
	limit := clampLimit(f.Limit)
	where, args := s.timerWhere(f)
	if f.Enabled != nil {
		where = append(where, "enabled = ?")
		args = append(args, *f.Enabled)
	}
	if f.Paused != nil {
		where = append(where, "paused = ?")
		args = append(args, *f.Paused)
	}
	order := "id"
	switch f.Sort {
	case store.SortID:
		if f.After != "" {
			where = append(where, "id > ?")
			args = append(args, f.After)
		}
	case store.SortNextFire:
		// An index range of (next_fire_at, id), or of (app,
		// next_fire_at, id) for one app, from the cursor on.
		order = "next_fire_at, id"
		if f.After != "" {
			at, id, err := decodeRunCursor(f.After)
			if err != nil {
				return nil, "", fmt.Errorf("list timers: %w", err)
			}
			if s.d == dialectMySQL {
				// MySQL's range optimizer reads this form as index
				// ranges (see TimersToPlan).
				where = append(where, "(next_fire_at > ? OR (next_fire_at = ? AND id > ?))")
				args = append(args, at, at, id)
			} else {
				// A row value: one index range in SQLite and PostgreSQL
				// (the OR form scanned the index from its start: page
				// 200 of 100,000 timers took 5 times page 1).
				where = append(where, "(next_fire_at, id) > (?, ?)")
				args = append(args, at, id)
			}
		}
	default:
		return nil, "", fmt.Errorf("list timers: unknown sort %q", f.Sort)
	}
	query := `SELECT ` + timerCols + ` FROM timers`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += fmt.Sprintf(" ORDER BY %s LIMIT %d", order, limit+1)
	timers, err := s.queryTimers(ctx, s.r, query, args...)
	if err != nil {
		return nil, "", fmt.Errorf("list timers: %w", err)
	}
	if err := s.deps.loadAfter(ctx, s.r, timers...); err != nil {
		return nil, "", fmt.Errorf("list timers: %w", err)
	}
	next := ""
	if len(timers) > limit {
		timers = timers[:limit]
		last := timers[limit-1]
		next = last.ID
		if f.Sort == store.SortNextFire {
			// The stored value, as the rows are ordered.
			at := int64(noNextFire)
			if !last.NextFireAt.IsZero() {
				at = last.NextFireAt.UnixNano()
			}
			next = encodeRunCursor(at, last.ID)
		}
	}
	return timers, next, nil
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func (s *timerStore) queryTimers(ctx context.Context, db querier, query string, args ...any) ([]*model.Timer, error) {
	rows, err := db.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*model.Timer
	for rows.Next() {
		t, err := s.scanTimer(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// TimersToPlan implements store.Store. It reads only the columns planning
// needs: a million timers' actions decoded for nothing were half of a
// cold start's reading.
func (s *timerStore) TimersToPlan(ctx context.Context, horizon time.Time, after store.PlanCursor, limit int) ([]*model.Timer, error) {
	if limit <= 0 {
		limit = 1000
	}
	// A range of index (enabled, planned_until, id), in its order, that
	// starts right after the cursor (also among the many timers that share
	// one planned_until, such as those never planned).
	pu := nanos(after.PlannedUntil)
	cursor := `(planned_until, id) > (?, ?)`
	args := []any{true, pu, after.ID, nanos(horizon)}
	if s.d == dialectMySQL {
		// MySQL's range optimizer reads this form as two index ranges.
		cursor = `(planned_until > ? OR (planned_until = ? AND id > ?))`
		args = []any{true, pu, pu, after.ID, nanos(horizon)}
	}
	rows, err := s.r.QueryContext(ctx, s.q(`SELECT id, schedule, timezone, enabled, created_at, updated_at, planned_until, policy, paused, version
		FROM timers WHERE enabled = ? AND `+cursor+` AND planned_until < ?
		ORDER BY planned_until, id LIMIT `+fmt.Sprint(limit)), args...)
	if err != nil {
		return nil, fmt.Errorf("timers to plan: %w", err)
	}
	defer rows.Close()
	var out []*model.Timer
	for rows.Next() {
		var (
			t                         model.Timer
			created, updated, planned int64
			policy                    string
		)
		if err := rows.Scan(&t.ID, &t.Schedule, &t.Timezone, &t.Enabled, &created, &updated, &planned, &policy, &t.Paused, &t.Version); err != nil {
			return nil, fmt.Errorf("timers to plan: %w", err)
		}
		if err := decodePolicy(&t, policy); err != nil {
			return nil, fmt.Errorf("timers to plan: %w", err)
		}
		t.CreatedAt, t.UpdatedAt, t.PlannedUntil = fromNanos(created), fromNanos(updated), fromNanos(planned)
		t.Version = modelVersion(t.Version)
		out = append(out, &t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("timers to plan: %w", err)
	}
	return out, nil
}

// modelVersion is the model.Timer.Version of a timer whose version column
// is v: the column counts a timer's writes from 0 (its default), and a
// model.Timer.Version of zero means "not read", so the two are one apart.
func modelVersion(v int64) int64 { return v + 1 }

// storedVersion is the version column of a timer whose model.Timer.Version
// is v, or -1 for zero: no version, which planSQL and currentRuns do not
// check.
func storedVersion(v int64) int64 {
	if v == 0 {
		return -1
	}
	return v - 1
}

// SetPlannedUntil records how far each timer of plans is planned, and its
// next fire, in one transaction, never moving a timer's PlannedUntil
// backwards (nor its next fire, then). Timers that no longer exist are
// skipped, and so are those whose version is no longer their plan's
// Version, when it has one: the UPDATE's own condition, atomic with it
// (a save that commits first changed the version; one that comes after
// waits for the row and writes its own PlannedUntil).
func (s *timerStore) SetPlannedUntil(ctx context.Context, plans map[string]store.Plan) error {
	if len(plans) == 0 {
		return nil
	}
	// Timers planned in one pass mostly share their new PlannedUntil (the
	// pass's horizon): one UPDATE per value and per batchSize ids, not one
	// per timer, joined with the ids' next fires.
	byUntil := map[int64][]string{}
	for id, p := range plans {
		n := nanos(p.Until)
		byUntil[n] = append(byUntil[n], id)
	}
	values := slices.Sorted(maps.Keys(byUntil))
	err := s.tx(ctx, func(tx *wtx) error {
		for _, n := range values {
			ids := byUntil[n]
			slices.Sort(ids) // one lock order for every writer
			err := chunks(ids, func(batch []string) error {
				_, err := tx.ExecContext(ctx, s.q(s.planSQL(len(batch))), s.planArgs(n, batch, plans)...)
				return err
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("set planned until of %d timers: %w", len(plans), err)
	}
	return nil
}

// planSQL is the statement of SetPlannedUntil for n timers of one
// PlannedUntil: the timers joined with a table of (id, next fire, version),
// one lookup per id (a CASE of n branches, evaluated for each of the n
// rows, would cost n² comparisons: 250,000 a batch). A row is updated only
// while its version is the one of its plan (a negative ver: any). Its
// arguments are planArgs'.
func (s *timerStore) planSQL(n int) string {
	const guard = ` AND (v.ver < 0 OR timers.version = v.ver)`
	var b strings.Builder
	switch s.d {
	case dialectMySQL:
		for i := range n {
			if i == 0 {
				b.WriteString("SELECT ? AS id, ? AS nf, ? AS ver")
			} else {
				b.WriteString(" UNION ALL SELECT ?, ?, ?")
			}
		}
		return `UPDATE timers JOIN (` + b.String() + `) v ON timers.id = v.id
			SET timers.planned_until = ?, timers.next_fire_at = CASE WHEN timers.enabled THEN v.nf ELSE timers.next_fire_at END
			WHERE timers.planned_until < ?` + guard
	case dialectPostgres:
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(?, ?::bigint, ?::bigint)")
		}
		return `UPDATE timers SET planned_until = ?, next_fire_at = CASE WHEN timers.enabled THEN v.nf ELSE timers.next_fire_at END
			FROM (VALUES ` + b.String() + `) AS v(id, nf, ver)
			WHERE timers.id = v.id AND timers.planned_until < ?` + guard
	}
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?)")
	}
	return `UPDATE timers SET planned_until = ?, next_fire_at = CASE WHEN timers.enabled THEN v.nf ELSE timers.next_fire_at END
		FROM (SELECT column1 AS id, column2 AS nf, column3 AS ver FROM (VALUES ` + b.String() + `)) AS v
		WHERE timers.id = v.id AND timers.planned_until < ?` + guard
}

// planArgs are the arguments of planSQL: the PlannedUntil until, each id
// of batch with its next fire (noNextFire for none) and its stored
// version (storedVersion: -1 for a plan without one), and until again (or,
// on MySQL, the triples first).
func (s *timerStore) planArgs(until int64, batch []string, plans map[string]store.Plan) []any {
	pairs := make([]any, 0, 3*len(batch))
	for _, id := range batch {
		p := plans[id]
		nf := int64(noNextFire)
		if f := p.NextFire; !f.IsZero() {
			nf = f.UnixNano()
		}
		pairs = append(pairs, id, nf, storedVersion(p.Version))
	}
	if s.d == dialectMySQL {
		return append(pairs, until, until)
	}
	return append(append([]any{until}, pairs...), until)
}
