// Planning's writes: InsertRuns (idempotent, reviving cancelled runs),
// InsertPlanned (the same, guarded by the timers' versions) and the cancel
// and delete of a timer's pending runs when it changes.

package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// runStore writes planning's runs, status changes and reruns, and reads
// runs. A status change that ends a run writes what follows it through
// deps and notify.
type runStore struct {
	*core
	deps   *depStore
	notify *notifyStore
}

const insertRunCols = `id, timer_id, timer_hash, scheduled_at, due_at, status, attempt, duration_ms, output, error, node, manual, created_at, reason, finished_at`

// reviveSet is what a cancelled run becomes when it is planned again: a fresh
// pending run (or a skipped one, when planning records a fire skipped).
// Only a run cancelled with no attempt of its own (attempt 0: cancelled
// while pending, never claimed or every claim given back) is revived: one
// cancelled after an attempt (an overlap policy's cancel_running, a
// pending retry) may have executed, and a fresh attempt 1 would execute it
// again.
const reviveSet = `status = excluded.status, due_at = excluded.due_at, attempt = 0, started_at = NULL, finished_at = excluded.finished_at,
	duration_ms = 0, output = '', error = excluded.error, node = '', lease_until = NULL, manual = excluded.manual, reason = excluded.reason, failures = 0`

// InsertRuns inserts pending runs in multi-row statements of up to 500 rows,
// one transaction each, or on SQLite a few while nothing else waits for the
// writer (see extendTx). An error may leave earlier transactions' runs
// inserted, which a retry of the same call makes whole. A run whose
// (TimerID, ScheduledAt) exists is left alone unless it is cancelled with
// attempt 0 (reviveSet): then it is revived as a fresh pending run
// (attempt 0, DueAt from the argument). A run whose Status is skipped is
// inserted skipped, with its Reason, Error and FinishedAt (a fire that
// planning records as not run); any other Status is inserted pending. A
// zero DueAt means ScheduledAt and a zero CreatedAt means now. Duplicates
// within runs are inserted once.
//
// It returns the rows, as stored, that this call inserted or revived,
// pending and skipped ones (callers index the pending ones). On
// SQLite and PostgreSQL that is exact. On MySQL it is exact unless another
// caller inserted some of the same runs concurrently; then those runs may be
// returned by both callers when they are pending (harmless: the slice index
// dedupes on the run id). Rows never double: UNIQUE(timer_id, scheduled_at)
// guards them.
func (s *runStore) InsertRuns(ctx context.Context, runs []*model.Run) ([]*model.Run, error) {
	return s.insertRuns(ctx, runs, nil)
}

// InsertPlanned inserts runs as InsertRuns does, but in each transaction
// first drops the runs whose timer does not have, as the transaction
// reads it, the version that versions gives it (currentRuns). On
// PostgreSQL and MySQL/MariaDB that read locks the timers' rows for share
// until the commit, so that a save of one of them (whose UPDATE of the
// timer comes first in its transaction) waits for the inserts and then
// replaces them, or commits first and the read sees its version; on SQLite
// the transaction holds the one writer. The cost is one SELECT of the
// batch's distinct timers (by primary key) per batch of batchSize runs.
func (s *runStore) InsertPlanned(ctx context.Context, runs []*model.Run, versions map[string]int64) ([]*model.Run, error) {
	return s.insertRuns(ctx, runs, versions)
}

// insertRuns is InsertRuns, or InsertPlanned when versions is not nil.
func (s *runStore) insertRuns(ctx context.Context, runs []*model.Run, versions map[string]int64) ([]*model.Run, error) {
	if len(runs) == 0 {
		return nil, nil
	}
	in := prepareRuns(runs)
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
		insert := func(tx *wtx) error {
			got, n = got[:0], 0
			start := time.Now()
			for {
				batch := in[n:min(len(in), n+batchSize)]
				n += len(batch)
				if versions != nil {
					var err error
					if batch, err = s.currentRuns(ctx, tx, batch, versions); err != nil {
						return err
					}
				}
				if len(batch) > 0 {
					rs, err := s.insertBatch(ctx, tx, batch, now)
					if err != nil {
						return err
					}
					got = append(got, rs...)
				}
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

// currentRuns returns the runs of batch (at most batchSize) whose timer
// has, read in tx, the version that versions gives it, and those whose
// timer has none there (zero): InsertPlanned's guard. On PostgreSQL and
// MySQL/MariaDB the read locks the timers' rows for share until tx ends,
// in id order; a timer that a concurrent transaction is writing is waited
// for, then read as that one committed it (read committed: the locking
// read sees the latest version; a deleted timer is not found). It returns
// batch itself when it keeps every run.
func (s *runStore) currentRuns(ctx context.Context, tx *wtx, batch []*model.Run, versions map[string]int64) ([]*model.Run, error) {
	var ids []string
	seen := map[string]bool{}
	for _, r := range batch {
		if versions[r.TimerID] != 0 && !seen[r.TimerID] {
			seen[r.TimerID] = true
			ids = append(ids, r.TimerID)
		}
	}
	if len(ids) == 0 {
		return batch, nil
	}
	slices.Sort(ids)
	var rows *sql.Rows
	var err error
	switch s.d {
	case dialectPostgres:
		// One statement text for every batch, as the inserts.
		rows, err = tx.QueryContext(ctx, s.q(`SELECT id, version FROM timers WHERE id = ANY(?::text[]) ORDER BY id FOR SHARE`), ids)
	case dialectMySQL:
		// LOCK IN SHARE MODE: MariaDB (10.11 in scripts/services.sh) has
		// no FOR SHARE; MySQL 8 keeps the older form.
		rows, err = tx.QueryContext(ctx, `SELECT id, version FROM timers WHERE id IN (`+placeholders(len(ids))+`) ORDER BY id LOCK IN SHARE MODE`,
			stringArgs(ids)...)
	default:
		rows, err = tx.QueryContext(ctx, s.q(`SELECT id, version FROM timers WHERE id IN (`+placeholders(len(ids))+`)`), stringArgs(ids)...)
	}
	if err != nil {
		return nil, fmt.Errorf("timer versions: %w", err)
	}
	current := make(map[string]bool, len(ids))
	for rows.Next() {
		var id string
		var v int64
		if err := rows.Scan(&id, &v); err != nil {
			rows.Close()
			return nil, fmt.Errorf("timer versions: %w", err)
		}
		current[id] = modelVersion(v) == versions[id]
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("timer versions: %w", err)
	}
	keep := func(r *model.Run) bool { return versions[r.TimerID] == 0 || current[r.TimerID] }
	if !slices.ContainsFunc(batch, func(r *model.Run) bool { return !keep(r) }) {
		return batch, nil
	}
	out := make([]*model.Run, 0, len(batch))
	for _, r := range batch {
		if keep(r) {
			out = append(out, r)
		}
	}
	return out, nil
}

// prepareRuns returns runs without duplicates of (TimerID, ScheduledAt),
// sorted by run id.
func prepareRuns(runs []*model.Run) []*model.Run {
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
	slices.SortFunc(in, func(a, b *model.Run) int { return strings.Compare(runIDOf(a), runIDOf(b)) })
	return in
}

// runIDOf is the id r is inserted with: its own, or the one of its timer
// and instant (model.RunID).
func runIDOf(r *model.Run) string {
	if r.ID != "" {
		return r.ID
	}
	return model.RunID(r.TimerID, r.ScheduledAt)
}

// insertBatch inserts at most batchSize runs in tx as InsertRuns does and
// returns those that are pending after it (new or revived).
func (s *runStore) insertBatch(ctx context.Context, tx *wtx, batch []*model.Run, now int64) ([]*model.Run, error) {
	switch s.d {
	case dialectMySQL:
		return s.insertRunsMySQL(ctx, tx, batch, now)
	case dialectPostgres:
		return s.insertRunsPostgres(ctx, tx, batch, now)
	default:
		return s.insertRunsReturning(ctx, tx, batch, now)
	}
}

func insertValues(batch []*model.Run, now int64) (string, []any) {
	args := make([]any, 0, len(batch)*7)
	var b strings.Builder
	for i, r := range batch {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?,?,?,?,?,?,0,0,'',?,'',?,?,?,?)")
		v := insertRowOf(r, now)
		args = append(args, v.id, v.timerID, v.hash, v.scheduled, v.due, v.status, v.err, v.manual, v.created, v.reason, v.finished)
	}
	return b.String(), args
}

// insertRow is what InsertRuns writes of a run, its defaults applied.
type insertRow struct {
	id, timerID                   string
	hash, scheduled, due, created int64
	manual                        bool
	// status is pending, or skipped with reason, err and finished.
	status, reason, err string
	finished            sql.NullInt64
}

// insertRowOf returns r's row: DueAt defaults to ScheduledAt, CreatedAt to
// now, the id to the one derived from (timer, instant).
func insertRowOf(r *model.Run, now int64) insertRow {
	v := insertRow{id: runIDOf(r), timerID: r.TimerID, hash: int64(model.TimerHash(r.TimerID)),
		scheduled: r.ScheduledAt.UnixNano(), due: r.DueAt.UnixNano(), created: nanos(r.CreatedAt), manual: r.Manual}
	if r.DueAt.IsZero() {
		v.due = v.scheduled
	}
	if v.created == 0 {
		v.created = now
	}
	v.status = string(model.RunPending)
	if r.Status == model.RunSkipped {
		v.status, v.reason, v.err = string(model.RunSkipped), cleanText(r.Reason, 32), cleanText(r.Error, store.MaxResultText)
		v.finished = sql.NullInt64{Int64: v.created, Valid: true}
		if r.FinishedAt != nil && !r.FinishedAt.IsZero() {
			v.finished.Int64 = r.FinishedAt.UnixNano()
		}
	}
	return v
}

func (s *runStore) insertRunsReturning(ctx context.Context, tx *wtx, batch []*model.Run, now int64) ([]*model.Run, error) {
	values, args := insertValues(batch, now)
	query := `INSERT INTO runs (` + insertRunCols + `) VALUES ` + values + `
		ON CONFLICT (timer_id, scheduled_at) DO UPDATE SET ` + reviveSet + `
		WHERE runs.status = 'cancelled' AND runs.attempt = 0 RETURNING ` + runCols
	return s.queryRuns(ctx, tx, query, args...)
}

// insertRunsPostgres inserts from arrays (unnest), one statement text for
// every batch, so that the statement and plan caches serve each batch.
func (s *runStore) insertRunsPostgres(ctx context.Context, tx *wtx, batch []*model.Run, now int64) ([]*model.Run, error) {
	n := len(batch)
	ids, timers := make([]string, n), make([]string, n)
	hashes, scheduled, due, created := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	manual := make([]bool, n)
	statuses, reasons, errs := make([]string, n), make([]string, n), make([]string, n)
	finished := make([]*int64, n)
	for i, r := range batch {
		v := insertRowOf(r, now)
		ids[i], timers[i], hashes[i], scheduled[i], due[i], manual[i], created[i] = v.id, v.timerID, v.hash, v.scheduled, v.due, v.manual, v.created
		statuses[i], reasons[i], errs[i], finished[i] = v.status, v.reason, v.err, nullPtr(v.finished)
	}
	query := `INSERT INTO runs (` + insertRunCols + `)
		SELECT v.id, v.timer_id, v.timer_hash, v.scheduled_at, v.due_at, v.status, 0, 0, '', v.error, '', v.manual, v.created_at, v.reason, v.finished_at
		FROM unnest(?::text[], ?::text[], ?::bigint[], ?::bigint[], ?::bigint[], ?::boolean[], ?::bigint[], ?::text[], ?::text[], ?::text[], ?::bigint[])
			AS v(id, timer_id, timer_hash, scheduled_at, due_at, manual, created_at, status, reason, error, finished_at)
		ON CONFLICT (timer_id, scheduled_at) DO UPDATE SET ` + reviveSet + `
		WHERE runs.status = 'cancelled' AND runs.attempt = 0 RETURNING ` + runCols
	return s.queryRuns(ctx, tx, query, ids, timers, hashes, scheduled, due, manual, created, statuses, reasons, errs, finished)
}

// insertRunsMySQL: MySQL has no RETURNING. Lock the existing rows of the
// batch, revive the cancelled ones, INSERT IGNORE the missing ones and read
// back what changed.
func (s *runStore) insertRunsMySQL(ctx context.Context, tx *wtx, batch []*model.Run, now int64) ([]*model.Run, error) {
	// The rows of the batch's (timer, instant) pairs that exist already,
	// read as one range of instants per timer: the batch's instants are
	// close together (planning writes in time order), so each timer's
	// range holds its few runs of that stretch. An IN list of the
	// instants beside the IN list of the timers made the server consider
	// every pair of the two (500 × 500 for a batch of 500 runs of 500
	// timers): 217 ms a call at 1,000 fires/s on MariaDB, the largest
	// statement of the run (performance_schema), against a few ms now.
	timerSet := map[string]bool{}
	var tids []any
	first, last := batch[0].ScheduledAt.UnixNano(), batch[0].ScheduledAt.UnixNano()
	for _, r := range batch {
		if !timerSet[r.TimerID] {
			timerSet[r.TimerID] = true
			tids = append(tids, r.TimerID)
		}
		at := r.ScheduledAt.UnixNano()
		first, last = min(first, at), max(last, at)
	}
	type key struct {
		timer string
		at    int64
	}
	existing := map[key]string{} // -> status, "revivable" for a cancelled run of attempt 0
	rows, err := tx.QueryContext(ctx, `SELECT timer_id, scheduled_at, status, attempt FROM runs
		WHERE timer_id IN (`+placeholders(len(tids))+`) AND scheduled_at BETWEEN ? AND ? FOR UPDATE`,
		append(tids, first, last)...)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var k key
		var status string
		var attempt int
		if err := rows.Scan(&k.timer, &k.at, &status, &attempt); err != nil {
			rows.Close()
			return nil, err
		}
		if status == string(model.RunCancelled) && attempt == 0 {
			status = "revivable"
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
		case st == "revivable":
			revive = append(revive, r)
		}
	}
	var changed []any // (timer_id, scheduled_at) pairs of revived runs, to read back
	for _, r := range revive {
		v := insertRowOf(r, now)
		if _, err := tx.ExecContext(ctx, `UPDATE runs SET status = ?, due_at = ?, attempt = 0, started_at = NULL,
			finished_at = ?, duration_ms = 0, output = '', error = ?, node = '', lease_until = NULL, manual = ?, reason = ?, failures = 0
			WHERE timer_id = ? AND scheduled_at = ? AND status = 'cancelled' AND attempt = 0`,
			v.status, v.due, v.finished, v.err, r.Manual, v.reason, r.TimerID, r.ScheduledAt.UnixNano()); err != nil {
			return nil, err
		}
		changed = append(changed, r.TimerID, r.ScheduledAt.UnixNano())
	}
	if len(missing) > 0 {
		values, args := insertValues(missing, now)
		if _, err := tx.ExecContext(ctx, `INSERT IGNORE INTO runs (`+insertRunCols+`) VALUES `+values, args...); err != nil {
			return nil, err
		}
	}
	var out []*model.Run
	if len(missing) > 0 {
		// The inserted runs are read back by their ids, through the
		// primary key (a condition of 500 ORed pairs took as long as the
		// insert). A missing run that another caller inserted meanwhile
		// was ignored here: read back when it has the id this call gave
		// it (ids are a function of the timer and the instant unless the
		// caller set them), and returned by its inserter either way.
		ids := make([]any, len(missing))
		for i, r := range missing {
			ids[i] = runIDOf(r)
		}
		got, err := s.queryRuns(ctx, tx, `SELECT `+runCols+` FROM runs WHERE id IN (`+placeholders(len(ids))+`) AND status IN ('pending', 'skipped')`, ids...)
		if err != nil {
			return nil, err
		}
		out = got
	}
	if len(changed) > 0 {
		var cond strings.Builder
		for i := 0; i < len(changed); i += 2 {
			if i > 0 {
				cond.WriteString(" OR ")
			}
			cond.WriteString("(timer_id = ? AND scheduled_at = ?)")
		}
		got, err := s.queryRuns(ctx, tx, `SELECT `+runCols+` FROM runs WHERE (`+cond.String()+`) AND status IN ('pending', 'skipped')`, changed...)
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	return out, nil
}
