package sqlstore

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/store"
)

const runCols = `id, timer_id, scheduled_at, due_at, status, attempt, started_at, finished_at, duration_ms, output, error, node, lease_until, manual, created_at`

func scanRun(sc scanner) (*model.Run, error) {
	var (
		r                            model.Run
		scheduled, due, created      int64
		started, finished, leaseTill sql.NullInt64
		status                       string
	)
	if err := sc.Scan(&r.ID, &r.TimerID, &scheduled, &due, &status, &r.Attempt, &started, &finished,
		&r.DurationMS, &r.Output, &r.Error, &r.Node, &leaseTill, &r.Manual, &created); err != nil {
		return nil, err
	}
	r.Status = model.RunStatus(status)
	r.ScheduledAt = fromNanos(scheduled)
	r.DueAt = fromNanos(due)
	r.CreatedAt = fromNanos(created)
	r.StartedAt = nullTime(started)
	r.FinishedAt = nullTime(finished)
	r.LeaseUntil = nullTime(leaseTill)
	return &r, nil
}

func nullTime(n sql.NullInt64) *time.Time {
	if !n.Valid {
		return nil
	}
	t := fromNanos(n.Int64)
	return &t
}

func (s *Store) queryRuns(ctx context.Context, db querier, query string, args ...any) ([]*model.Run, error) {
	rows, err := db.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*model.Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func (s *Store) queryIDs(ctx context.Context, db querier, query string, args ...any) ([]string, error) {
	rows, err := db.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

func stringArgs(ss []string) []any {
	a := make([]any, len(ss))
	for i, s := range ss {
		a[i] = s
	}
	return a
}

// chunks calls fn for consecutive slices of at most batchSize elements.
func chunks[T any](xs []T, fn func([]T) error) error {
	for len(xs) > 0 {
		n := min(len(xs), batchSize)
		if err := fn(xs[:n]); err != nil {
			return err
		}
		xs = xs[n:]
	}
	return nil
}

const insertRunCols = `id, timer_id, timer_hash, scheduled_at, due_at, status, attempt, duration_ms, output, error, node, manual, created_at`

// reviveSet is what a cancelled run becomes when it is planned again: a fresh
// pending run.
const reviveSet = `status = 'pending', due_at = excluded.due_at, attempt = 0, started_at = NULL, finished_at = NULL,
	duration_ms = 0, output = '', error = '', node = '', lease_until = NULL, manual = excluded.manual`

// InsertRuns inserts pending runs in multi-row statements of up to 500 rows,
// one transaction each, or on SQLite a few while nothing else waits for the
// writer (see extendTx). An error may leave earlier transactions' runs
// inserted, which a retry of the same call makes whole. A run whose
// (TimerID, ScheduledAt) exists is left alone unless it is cancelled: then
// it is revived as a fresh pending run
// (attempt 0, DueAt from the argument). The Status of the arguments is
// ignored (always pending); a zero DueAt means ScheduledAt and a zero
// CreatedAt means now. Duplicates within runs are inserted once.
//
// It returns the rows, as stored, that this call inserted or revived. On
// SQLite and PostgreSQL that is exact. On MySQL it is exact unless another
// caller inserted some of the same runs concurrently; then those runs may be
// returned by both callers when they are pending (harmless: the slice index
// dedupes on the run id). Rows never double: UNIQUE(timer_id, scheduled_at)
// guards them.
func (s *Store) InsertRuns(ctx context.Context, runs []*model.Run) ([]*model.Run, error) {
	if len(runs) == 0 {
		return nil, nil
	}
	// Dedupe and sort, so that concurrent callers lock rows in one order.
	type key struct {
		timer string
		at    int64
	}
	seen := make(map[key]bool, len(runs))
	in := make([]*model.Run, 0, len(runs))
	for _, r := range runs {
		k := key{r.TimerID, r.ScheduledAt.UnixNano()}
		if seen[k] {
			continue
		}
		seen[k] = true
		in = append(in, r)
	}
	// In id order: concurrent callers lock rows in one order, and, ids
	// starting with their second, the rows go into the table (clustered on
	// the id on SQLite and InnoDB) in time order, each batch filling a few
	// neighbouring pages instead of touching one page per row.
	id := func(r *model.Run) string {
		if r.ID != "" {
			return r.ID
		}
		return model.RunID(r.TimerID, r.ScheduledAt)
	}
	slices.SortFunc(in, func(a, b *model.Run) int { return strings.Compare(id(a), id(b)) })
	now := time.Now().UnixNano()
	// Short transactions, not one for the whole call: planning is
	// idempotent, so nothing needs the whole insert to be atomic, and the
	// single SQLite writer stays free for claims (extendTx ends a
	// transaction as soon as one waits).
	var out []*model.Run
	for len(in) > 0 {
		s.yieldToHot(ctx)
		var got []*model.Run
		var n int // runs of in written by this transaction
		insert := func(tx *sql.Tx) error {
			got, n = got[:0], 0
			start := time.Now()
			for {
				batch := in[n:min(len(in), n+batchSize)]
				var rs []*model.Run
				var err error
				if s.d == dialectMySQL {
					rs, err = s.insertRunsMySQL(ctx, tx, batch, now)
				} else {
					rs, err = s.insertRunsReturning(ctx, tx, batch, now)
				}
				if err != nil {
					return err
				}
				got = append(got, rs...)
				n += len(batch)
				if n == len(in) || !s.extendTx(start) {
					return nil
				}
			}
		}
		err := s.tx(ctx, insert)
		// PostgreSQL's ON CONFLICT only absorbs conflicts on its arbiter,
		// (timer_id, scheduled_at). When two callers insert the same run
		// at once, both pass the arbiter check and the second one fails
		// on the primary key instead, once the first commits. Again, the
		// arbiter sees the committed row and the statement skips it.
		for attempt := 0; attempt < 3 && s.d == dialectPostgres && isUnique(err); attempt++ {
			err = s.tx(ctx, insert)
		}
		if err != nil {
			return nil, fmt.Errorf("insert runs: %w", err)
		}
		out = append(out, got...)
		in = in[n:]
	}
	return out, nil
}

func insertValues(batch []*model.Run, now int64) (string, []any) {
	args := make([]any, 0, len(batch)*7)
	var b strings.Builder
	for i, r := range batch {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?,?,?,?,?,'pending',0,0,'','','',?,?)")
		due := r.DueAt
		if due.IsZero() {
			due = r.ScheduledAt
		}
		created := nanos(r.CreatedAt)
		if created == 0 {
			created = now
		}
		id := r.ID
		if id == "" {
			id = model.RunID(r.TimerID, r.ScheduledAt)
		}
		args = append(args, id, r.TimerID, int64(model.TimerHash(r.TimerID)), r.ScheduledAt.UnixNano(), due.UnixNano(), r.Manual, created)
	}
	return b.String(), args
}

func (s *Store) insertRunsReturning(ctx context.Context, tx *sql.Tx, batch []*model.Run, now int64) ([]*model.Run, error) {
	values, args := insertValues(batch, now)
	query := `INSERT INTO runs (` + insertRunCols + `) VALUES ` + values + `
		ON CONFLICT (timer_id, scheduled_at) DO UPDATE SET ` + reviveSet + `
		WHERE runs.status = 'cancelled' RETURNING ` + runCols
	return s.queryRuns(ctx, tx, query, args...)
}

// insertRunsMySQL: MySQL has no RETURNING. Lock the existing rows of the
// batch, revive the cancelled ones, INSERT IGNORE the missing ones and read
// back what changed.
func (s *Store) insertRunsMySQL(ctx context.Context, tx *sql.Tx, batch []*model.Run, now int64) ([]*model.Run, error) {
	timerSet := map[string]bool{}
	atSet := map[int64]bool{}
	var tids, ats []any
	for _, r := range batch {
		if !timerSet[r.TimerID] {
			timerSet[r.TimerID] = true
			tids = append(tids, r.TimerID)
		}
		if at := r.ScheduledAt.UnixNano(); !atSet[at] {
			atSet[at] = true
			ats = append(ats, at)
		}
	}
	type key struct {
		timer string
		at    int64
	}
	existing := map[key]string{} // -> status
	rows, err := tx.QueryContext(ctx, `SELECT timer_id, scheduled_at, status FROM runs
		WHERE timer_id IN (`+placeholders(len(tids))+`) AND scheduled_at IN (`+placeholders(len(ats))+`) FOR UPDATE`,
		append(tids, ats...)...)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var k key
		var status string
		if err := rows.Scan(&k.timer, &k.at, &status); err != nil {
			rows.Close()
			return nil, err
		}
		existing[k] = status
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var missing, revive []*model.Run
	for _, r := range batch {
		st, ok := existing[key{r.TimerID, r.ScheduledAt.UnixNano()}]
		switch {
		case !ok:
			missing = append(missing, r)
		case st == string(model.RunCancelled):
			revive = append(revive, r)
		}
	}
	var changed []any // (timer_id, scheduled_at) pairs to read back
	for _, r := range revive {
		due := r.DueAt
		if due.IsZero() {
			due = r.ScheduledAt
		}
		if _, err := tx.ExecContext(ctx, `UPDATE runs SET status = 'pending', due_at = ?, attempt = 0, started_at = NULL,
			finished_at = NULL, duration_ms = 0, output = '', error = '', node = '', lease_until = NULL, manual = ?
			WHERE timer_id = ? AND scheduled_at = ? AND status = 'cancelled'`,
			due.UnixNano(), r.Manual, r.TimerID, r.ScheduledAt.UnixNano()); err != nil {
			return nil, err
		}
		changed = append(changed, r.TimerID, r.ScheduledAt.UnixNano())
	}
	if len(missing) > 0 {
		values, args := insertValues(missing, now)
		if _, err := tx.ExecContext(ctx, `INSERT IGNORE INTO runs (`+insertRunCols+`) VALUES `+values, args...); err != nil {
			return nil, err
		}
		// A missing run that another caller inserted meanwhile was
		// ignored here; it is read back with the others and returned when
		// pending.
		for _, r := range missing {
			changed = append(changed, r.TimerID, r.ScheduledAt.UnixNano())
		}
	}
	if len(changed) == 0 {
		return nil, nil
	}
	var cond strings.Builder
	for i := 0; i < len(changed); i += 2 {
		if i > 0 {
			cond.WriteString(" OR ")
		}
		cond.WriteString("(timer_id = ? AND scheduled_at = ?)")
	}
	return s.queryRuns(ctx, tx, `SELECT `+runCols+` FROM runs WHERE (`+cond.String()+`) AND status = 'pending'`, changed...)
}

// CancelPendingRuns marks the timer's pending runs with DueAt >= from as
// cancelled and returns their ids.
func (s *Store) CancelPendingRuns(ctx context.Context, timerID string, from time.Time) ([]string, error) {
	var ids []string
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var err error
		if s.d == dialectMySQL {
			ids, err = s.queryIDs(ctx, tx, `SELECT id FROM runs WHERE timer_id = ? AND status = 'pending' AND due_at >= ? FOR UPDATE`,
				timerID, nanos(from))
			if err != nil || len(ids) == 0 {
				return err
			}
			return chunks(ids, func(b []string) error {
				_, err := tx.ExecContext(ctx, `UPDATE runs SET status = 'cancelled' WHERE id IN (`+placeholders(len(b))+`)`, stringArgs(b)...)
				return err
			})
		}
		ids, err = s.queryIDs(ctx, tx, `UPDATE runs SET status = 'cancelled' WHERE timer_id = ? AND status = 'pending' AND due_at >= ? RETURNING id`,
			timerID, nanos(from))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cancel pending runs of %s: %w", timerID, err)
	}
	return ids, nil
}

// DeletePendingRuns deletes the timer's pending runs with ScheduledAt >= from
// and returns their ids.
func (s *Store) DeletePendingRuns(ctx context.Context, timerID string, from time.Time) ([]string, error) {
	var ids []string
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var err error
		if s.d == dialectMySQL {
			ids, err = s.queryIDs(ctx, tx, `SELECT id FROM runs WHERE timer_id = ? AND status = 'pending' AND scheduled_at >= ? FOR UPDATE`,
				timerID, nanos(from))
			if err != nil || len(ids) == 0 {
				return err
			}
			return chunks(ids, func(b []string) error {
				_, err := tx.ExecContext(ctx, `DELETE FROM runs WHERE id IN (`+placeholders(len(b))+`)`, stringArgs(b)...)
				return err
			})
		}
		ids, err = s.queryIDs(ctx, tx, `DELETE FROM runs WHERE timer_id = ? AND status = 'pending' AND scheduled_at >= ? RETURNING id`,
			timerID, nanos(from))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("delete pending runs of %s: %w", timerID, err)
	}
	return ids, nil
}

// GetRun returns the run with id, or an error wrapping model.ErrNotFound.
func (s *Store) GetRun(ctx context.Context, id string) (*model.Run, error) {
	r, err := scanRun(s.r.QueryRowContext(ctx, s.q(`SELECT `+runCols+` FROM runs WHERE id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get run %s: %w", id, model.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get run %s: %w", id, err)
	}
	return r, nil
}

// ListRuns returns runs ordered by ScheduledAt descending, then ID
// descending. The cursor is opaque.
func (s *Store) ListRuns(ctx context.Context, f store.RunFilter) ([]*model.Run, string, error) {
	limit := clampLimit(f.Limit)
	var where []string
	var args []any
	if f.TimerID != "" {
		where = append(where, "timer_id = ?")
		args = append(args, f.TimerID)
	}
	if f.Status != "" {
		where = append(where, "status = ?")
		args = append(args, string(f.Status))
	}
	if !f.ScheduledBefore.IsZero() {
		where = append(where, "scheduled_at < ?")
		args = append(args, nanos(f.ScheduledBefore))
	}
	if f.Before != "" {
		at, id, err := decodeRunCursor(f.Before)
		if err != nil {
			return nil, "", fmt.Errorf("list runs: %w", err)
		}
		where = append(where, "(scheduled_at < ? OR (scheduled_at = ? AND id < ?))")
		args = append(args, at, at, id)
	}
	query := `SELECT ` + runCols + ` FROM runs`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += fmt.Sprintf(" ORDER BY scheduled_at DESC, id DESC LIMIT %d", limit+1)
	runs, err := s.queryRuns(ctx, s.r, query, args...)
	if err != nil {
		return nil, "", fmt.Errorf("list runs: %w", err)
	}
	next := ""
	if len(runs) > limit {
		runs = runs[:limit]
		last := runs[limit-1]
		next = encodeRunCursor(last.ScheduledAt.UnixNano(), last.ID)
	}
	return runs, next, nil
}

func encodeRunCursor(at int64, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(at, 10) + ":" + id))
}

func decodeRunCursor(c string) (int64, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, "", fmt.Errorf("bad cursor %q", c)
	}
	a, id, ok := strings.Cut(string(b), ":")
	at, err := strconv.ParseInt(a, 10, 64)
	if !ok || err != nil {
		return 0, "", fmt.Errorf("bad cursor %q", c)
	}
	return at, id, nil
}

// PendingRuns returns pending runs with from <= DueAt < to, ordered by DueAt
// then ID, at most limit (all when limit <= 0).
func (s *Store) PendingRuns(ctx context.Context, from, to time.Time, limit int) ([]*model.Run, error) {
	query := `SELECT ` + runCols + ` FROM runs WHERE status = 'pending' AND due_at >= ? AND due_at < ? ORDER BY due_at, id`
	if limit > 0 {
		query += ` LIMIT ` + strconv.Itoa(limit)
	}
	runs, err := s.queryRuns(ctx, s.r, query, nanos(from), nanos(to))
	if err != nil {
		return nil, fmt.Errorf("pending runs: %w", err)
	}
	return runs, nil
}

// DueRuns returns the id, timer id and due instant of the pending runs with
// from <= DueAt < to, ordered by DueAt, whose timer falls in bucket of
// buckets (all when buckets <= 1). The bucket is selected in SQL, from the
// timer hash kept with each run.
func (s *Store) DueRuns(ctx context.Context, from, to time.Time, buckets, bucket int) ([]*model.Run, error) {
	query := `SELECT id, timer_id, due_at FROM runs WHERE status = 'pending' AND due_at >= ? AND due_at < ?`
	args := []any{nanos(from), nanos(to)}
	if buckets > 1 {
		query += ` AND timer_hash % ? = ?`
		args = append(args, buckets, bucket)
	}
	rows, err := s.r.QueryContext(ctx, s.q(query+` ORDER BY due_at, id`), args...)
	if err != nil {
		return nil, fmt.Errorf("due runs: %w", err)
	}
	defer rows.Close()
	var out []*model.Run
	for rows.Next() {
		r := &model.Run{Status: model.RunPending}
		var due int64
		if err := rows.Scan(&r.ID, &r.TimerID, &due); err != nil {
			return nil, fmt.Errorf("due runs: %w", err)
		}
		r.DueAt = fromNanos(due)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("due runs: %w", err)
	}
	return out, nil
}

// ClaimRuns moves each run that is still pending to running. A claim with
// DueBy set applies only when the run's DueAt is not after DueBy. Claims that share
// Node, LeaseUntil, Now and DueBy (the usual case: one batch of one node) are applied
// by one statement per 500 runs. It returns the claimed runs, as stored, in
// no particular order, with their timers. A pending run whose timer no
// longer exists is deleted instead of claimed.
func (s *Store) ClaimRuns(ctx context.Context, claims []store.Claim) ([]store.ClaimedRun, error) {
	if len(claims) == 0 {
		return nil, nil
	}
	defer s.hotOp()()
	type group struct {
		node                string
		lease, start, dueBy int64
	}
	groups := map[group][]string{}
	var order []group
	for _, c := range claims {
		g := group{c.Node, nanos(c.LeaseUntil), nanos(c.Now), nanos(c.DueBy)}
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], c.RunID)
	}
	var claimed []*model.Run
	err := s.tx(ctx, func(tx *sql.Tx) error {
		claimed = claimed[:0]
		for _, g := range order {
			ids := slices.Clone(groups[g])
			slices.Sort(ids)
			ids = slices.Compact(ids)
			err := chunks(ids, func(b []string) error {
				got, err := s.claimBatch(ctx, tx, b, g.node, g.lease, g.start, g.dueBy)
				claimed = append(claimed, got...)
				return err
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim runs: %w", err)
	}
	if len(claimed) == 0 {
		return nil, nil
	}
	timers, sealed, err := s.timersByID(ctx, claimed)
	if err != nil {
		return nil, fmt.Errorf("claim runs: %w", err)
	}
	out := make([]store.ClaimedRun, 0, len(claimed))
	var orphans []string
	var unreadable []model.Result
	for _, r := range claimed {
		if err := sealed[r.TimerID]; err != nil {
			unreadable = append(unreadable, unreadableResult(r, err))
			continue
		}
		t := timers[r.TimerID]
		if t == nil {
			orphans = append(orphans, r.ID)
			continue
		}
		out = append(out, store.ClaimedRun{Run: r, Timer: t})
	}
	if len(orphans) > 0 {
		// The timer was deleted while its run was planned: drop the run.
		err := chunks(orphans, func(b []string) error {
			_, err := s.w.ExecContext(ctx, s.q(`DELETE FROM runs WHERE id IN (`+placeholders(len(b))+`) AND status = 'running'`), stringArgs(b)...)
			return err
		})
		if err != nil {
			return out, fmt.Errorf("claim runs: delete runs of deleted timers: %w", err)
		}
	}
	if len(unreadable) > 0 {
		// The run cannot be performed without its secrets: it fails, with
		// the reason, instead of blocking the claims of the other timers.
		if _, err := s.FinishRuns(ctx, unreadable); err != nil {
			return out, fmt.Errorf("claim runs: fail runs of timers whose secrets do not decrypt: %w", err)
		}
	}
	return out, nil
}

// unreadableResult fails the claimed run r, whose timer's secrets do not
// decrypt (err).
func unreadableResult(r *model.Run, err error) model.Result {
	now := time.Now().UTC()
	start := now
	if r.StartedAt != nil {
		start = *r.StartedAt
	}
	return model.Result{RunID: r.ID, Node: r.Node, Attempt: r.Attempt, Status: model.RunFailed,
		StartedAt: start, FinishedAt: now, Error: err.Error()}
}

const claimSet = `status = 'running', node = ?, lease_until = ?, started_at = ?, finished_at = NULL, duration_ms = 0, attempt = attempt + 1`

func (s *Store) claimBatch(ctx context.Context, tx *sql.Tx, ids []string, node string, lease, start, dueBy int64) ([]*model.Run, error) {
	idArgs := stringArgs(ids)
	// cond ends the WHERE clause: still pending, and due by dueBy if set.
	cond := ` AND status = 'pending'`
	if dueBy != 0 {
		cond += ` AND due_at <= ` + strconv.FormatInt(dueBy, 10)
	}
	switch s.d {
	case dialectSQLite, dialectPostgres:
		// SQLite: the write transaction is exclusive, no row locks to
		// order. PostgreSQL: concurrent claimers of one batch lock its rows
		// in the same order (the sorted IN list of an index scan, or heap
		// order), so deadlocks are rare, and retried; a row that another
		// claimer took is re-checked once its lock is released, found
		// running, and skipped.
		return s.queryRuns(ctx, tx, `UPDATE runs SET `+claimSet+` WHERE id IN (`+placeholders(len(ids))+`)`+cond+` RETURNING `+runCols,
			append([]any{node, lease, start}, idArgs...)...)
	}
	got, err := s.queryIDs(ctx, tx, `SELECT id FROM runs WHERE id IN (`+placeholders(len(ids))+`)`+cond+` ORDER BY id FOR UPDATE`, idArgs...)
	if err != nil || len(got) == 0 {
		return nil, err
	}
	gotArgs := stringArgs(got)
	if _, err := tx.ExecContext(ctx, `UPDATE runs SET `+claimSet+` WHERE id IN (`+placeholders(len(got))+`) AND status = 'pending'`,
		append([]any{node, lease, start}, gotArgs...)...); err != nil {
		return nil, err
	}
	return s.queryRuns(ctx, tx, `SELECT `+runCols+` FROM runs WHERE id IN (`+placeholders(len(got))+`)`, gotArgs...)
}

// timersByID loads the timers of runs in one query per 500 timers. sealed
// holds the errors of the timers whose secrets do not decrypt.
func (s *Store) timersByID(ctx context.Context, runs []*model.Run) (timers map[string]*model.Timer, sealed map[string]error, err error) {
	var ids []string
	seen := map[string]bool{}
	for _, r := range runs {
		if !seen[r.TimerID] {
			seen[r.TimerID] = true
			ids = append(ids, r.TimerID)
		}
	}
	out := make(map[string]*model.Timer, len(ids))
	sealed = map[string]error{}
	var missing []string
	// Most claims are of timers claimed before: read only their versions
	// (bumped by every UpdateTimer), and the whole rows of the timers that
	// changed.
	err = chunks(ids, func(b []string) error {
		rows, err := s.r.QueryContext(ctx, s.q(`SELECT id, version FROM timers WHERE id IN (`+placeholders(len(b))+`)`), stringArgs(b)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			var version int64
			if err := rows.Scan(&id, &version); err != nil {
				return err
			}
			if t := s.timers.get(id, version); t != nil {
				out[id] = t
			} else {
				missing = append(missing, id)
			}
		}
		return rows.Err()
	})
	if err == nil {
		err = chunks(missing, func(b []string) error {
			rows, err := s.r.QueryContext(ctx, s.q(`SELECT `+timerCols+`, version FROM timers WHERE id IN (`+placeholders(len(b))+`)`), stringArgs(b)...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var version int64
				t, err := s.scanTimer(scanFunc(func(dest ...any) error { return rows.Scan(append(dest, &version)...) }))
				if t != nil && errors.Is(err, ErrSecretKey) {
					sealed[t.ID] = err
					continue
				}
				if err != nil {
					return err
				}
				out[t.ID] = t
				s.timers.put(t, version)
			}
			return rows.Err()
		})
	}
	if err != nil {
		return nil, nil, fmt.Errorf("load timers: %w", err)
	}
	return out, sealed, nil
}

// timerCache keeps decoded timers by id and version for ClaimRuns.
// Entries are shared and must not be modified.
type timerCache struct {
	mu sync.Mutex
	m  map[string]cachedTimer
}

type cachedTimer struct {
	t       *model.Timer
	version int64
}

// scanFunc adapts a function to the scanner that scanTimer takes.
type scanFunc func(dest ...any) error

func (f scanFunc) Scan(dest ...any) error { return f(dest...) }

// maxCachedTimers bounds the cache; past it, the cache starts afresh. The
// cache pays where few timers fire often (10,000 fires/s from 12,500 timers
// decode no timer); with a million timers it would hold hundreds of MiB of
// timers that fire once an hour.
const maxCachedTimers = 50_000

func (c *timerCache) get(id string, version int64) *model.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[id]; ok && e.version == version {
		return e.t
	}
	return nil
}

func (c *timerCache) put(t *model.Timer, version int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCachedTimers {
		c.m = make(map[string]cachedTimer)
	}
	c.m[t.ID] = cachedTimer{t: t, version: version}
}

// SetRunStatus moves a run from status from to status to, recording reason in
// Error (cleaned as a result's error is). Moving to a terminal status also clears the lease. It returns an
// error wrapping model.ErrNotFound when the run does not exist and
// model.ErrNotClaimed when it is not in status from.
func (s *Store) SetRunStatus(ctx context.Context, runID string, from, to model.RunStatus, reason string) error {
	query := `UPDATE runs SET status = ?, error = ? WHERE id = ? AND status = ?`
	if to.Terminal() {
		query = `UPDATE runs SET status = ?, error = ?, lease_until = NULL WHERE id = ? AND status = ?`
	}
	res, err := s.w.ExecContext(ctx, s.q(query), string(to), cleanText(reason, store.MaxResultText), runID, string(from))
	if err != nil {
		return fmt.Errorf("set run %s status %s: %w", runID, to, err)
	}
	return s.checkRunUpdated(ctx, res, runID, fmt.Sprintf("set run %s status %s -> %s", runID, from, to))
}

// checkRunUpdated turns "no row updated" into ErrNotFound or ErrNotClaimed.
func (s *Store) checkRunUpdated(ctx context.Context, res sql.Result, runID, what string) error {
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if n > 0 {
		return nil
	}
	var one int
	err = s.r.QueryRowContext(ctx, s.q(`SELECT 1 FROM runs WHERE id = ?`), runID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s: %w", what, model.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return fmt.Errorf("%s: %w", what, model.ErrNotClaimed)
}

// RescheduleRun sets DueAt of a pending run. It returns an error wrapping
// model.ErrNotClaimed when the run is not pending (ErrNotFound when missing).
func (s *Store) RescheduleRun(ctx context.Context, runID string, dueAt time.Time) error {
	res, err := s.w.ExecContext(ctx, s.q(`UPDATE runs SET due_at = ? WHERE id = ? AND status = 'pending'`), nanos(dueAt), runID)
	if err != nil {
		return fmt.Errorf("reschedule run %s: %w", runID, err)
	}
	return s.checkRunUpdated(ctx, res, runID, "reschedule run "+runID)
}

// ExpiredLeases returns running runs whose lease ended before now, oldest
// lease first, at most limit (default 1000).
func (s *Store) ExpiredLeases(ctx context.Context, now time.Time, limit int) ([]*model.Run, error) {
	if limit <= 0 {
		limit = 1000
	}
	query := `SELECT ` + runCols + ` FROM runs WHERE status = 'running' AND lease_until < ?
		ORDER BY lease_until, id LIMIT ` + strconv.Itoa(limit)
	runs, err := s.queryRuns(ctx, s.r, query, nanos(now))
	if err == nil && len(runs) > 0 && s.d == dialectSQLite {
		// SQLite answers reads while another process holds its write lock
		// (WAL): a lease seen expired then may belong to a holder that is
		// alive and only waiting to write its extension. Read again under
		// the write lock (an immediate transaction), so that the answer
		// means the holders could write, as a sighting must.
		err = s.tx(ctx, func(tx *sql.Tx) error {
			runs, err = s.queryRuns(ctx, tx, query, nanos(now))
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
func (s *Store) Requeue(ctx context.Context, r *model.Run, dueAt, now time.Time) error {
	query := `UPDATE runs SET status = 'pending', due_at = ?, lease_until = NULL
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

// RunningOn returns up to limit (default 1000) runs that node holds, oldest
// claim first (by started_at, which a claim sets and only a result changes;
// lease_until moves with every extension).
func (s *Store) RunningOn(ctx context.Context, node string, limit int) ([]*model.Run, error) {
	if limit <= 0 {
		limit = 1000
	}
	runs, err := s.queryRuns(ctx, s.r, `SELECT `+runCols+` FROM runs WHERE status = 'running' AND node = ?
		ORDER BY started_at, id LIMIT `+strconv.Itoa(limit), node)
	if err != nil {
		return nil, fmt.Errorf("runs on node %s: %w", node, err)
	}
	return runs, nil
}

// ExtendLeases sets lease_until of the attempts of leases that node still
// holds to until, and returns the leases it no longer holds. The pair (id,
// attempt) is the condition, as a row-value IN list that every dialect
// takes, so that an extension never reaches a later attempt of the same
// run, even when both attempts are in leases; the plain IN list of the ids
// beside it is what the primary key serves.
func (s *Store) ExtendLeases(ctx context.Context, node string, leases []store.Lease, until time.Time) ([]store.Lease, error) {
	defer s.hotOp()()
	var lost []store.Lease
	err := chunks(leases, func(b []store.Lease) error {
		var pairs strings.Builder
		ids := make([]any, 0, len(b))
		pairArgs := make([]any, 0, 2*len(b))
		seen := make(map[string]bool, len(b))
		for i, l := range b {
			if i > 0 {
				pairs.WriteByte(',')
			}
			pairs.WriteString("(?,?)")
			pairArgs = append(pairArgs, l.RunID, l.Attempt)
			if !seen[l.RunID] {
				seen[l.RunID] = true
				ids = append(ids, l.RunID)
			}
		}
		where := `node = ? AND status = 'running' AND id IN (` + placeholders(len(ids)) + `) AND (id, attempt) IN (` + pairs.String() + `)`
		whereArgs := append(append([]any{node}, ids...), pairArgs...)
		var held []store.Lease
		scan := func(rows *sql.Rows) error {
			defer rows.Close()
			for rows.Next() {
				var l store.Lease
				if err := rows.Scan(&l.RunID, &l.Attempt); err != nil {
					return err
				}
				held = append(held, l)
			}
			return rows.Err()
		}
		var err error
		if s.d == dialectMySQL {
			err = s.tx(ctx, func(tx *sql.Tx) error {
				held = held[:0]
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

// Release gives back a run this node claimed but did not start (an overlap
// policy holds it): running → pending with DueAt = dueAt, undoing the
// claim's attempt count. Fenced on r.Node and r.Attempt.
func (s *Store) Release(ctx context.Context, r *model.Run, dueAt time.Time) error {
	res, err := s.w.ExecContext(ctx, s.q(`UPDATE runs SET status = 'pending', due_at = ?, lease_until = NULL,
		attempt = attempt - 1, started_at = NULL WHERE id = ? AND status = 'running' AND node = ? AND attempt = ?`),
		nanos(dueAt), r.ID, r.Node, r.Attempt)
	if err != nil {
		return fmt.Errorf("release run %s: %w", r.ID, err)
	}
	return s.checkRunUpdated(ctx, res, r.ID, "release run "+r.ID)
}

// CountRuns counts a timer's runs in the given statuses (all when none).
func (s *Store) CountRuns(ctx context.Context, timerID string, statuses ...model.RunStatus) (int, error) {
	query := `SELECT COUNT(*) FROM runs WHERE timer_id = ?`
	args := []any{timerID}
	if len(statuses) > 0 {
		query += ` AND status IN (` + placeholders(len(statuses)) + `)`
		for _, st := range statuses {
			args = append(args, string(st))
		}
	}
	var n int
	if err := s.r.QueryRowContext(ctx, s.q(query), args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count runs of timer %s: %w", timerID, err)
	}
	return n, nil
}
