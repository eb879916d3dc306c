package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// Recording results.
//
// The store takes any model.Result: cleanResult makes its text storable in
// every dialect (PostgreSQL rejects NUL bytes and invalid UTF-8 in text,
// MySQL's utf8mb4 columns invalid UTF-8, and each column has a size) before
// a statement sees it. Should a statement fail on a value all the same (a
// "data error": a value the database would not take, not a lost connection
// or a lock), FinishRuns records the batch again one result at a time, each
// under its own savepoint, and a result that still fails alone is recorded
// with its text replaced by a note that says why (textless, as a last
// resort), so that one bad value never fails the other results.

const finishSQL = `UPDATE runs SET status = ?, due_at = CASE WHEN ? THEN ? ELSE due_at END, started_at = ?, finished_at = ?,
	duration_ms = ?, output = ?, error = ?, reason = ?, request = ?, failures = failures + CASE WHEN ? THEN 1 ELSE 0 END, lease_until = NULL
	WHERE id = ? AND status = 'running' AND node = ? AND attempt = ?`

// maxBatchText bounds the output and error bytes of one multi-row result
// statement (past its first result): with every byte escaped, a statement
// stays well below MySQL's max_allowed_packet (16 MiB by default on
// MariaDB, 64 MiB on MySQL 8), which a batch of 500 results of 64 KiB of
// output each would pass.
const maxBatchText = 4 << 20

// maxNote bounds the note that replaces a result's text that the database
// rejected.
const maxNote = 200

// cleanText makes s storable in every dialect: valid UTF-8 (each invalid
// sequence becomes U+FFFD), no NUL bytes, at most max bytes, cut at a rune
// boundary. Text that is fine already is returned as is, without copying.
func cleanText(s string, max int) string {
	if len(s) <= max && utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "")
	if len(s) > max {
		n := max
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n]
	}
	return s
}

// cleanResult returns r as it is stored: its text cleaned and, when its
// status is not final, failed with a note saying so.
func cleanResult(r model.Result) model.Result {
	if !r.Status.Terminal() {
		note := fmt.Sprintf("chime: result status %q is not final; recorded as failed", cleanText(string(r.Status), 32))
		if r.Error != "" {
			note += ": " + r.Error
		}
		r.Status, r.Error = model.RunFailed, note
	}
	r.Output = cleanText(r.Output, store.MaxResultText)
	r.Error = cleanText(r.Error, store.MaxResultText)
	return r
}

// finishRow is what recording r writes: a failed attempt with a retry
// time goes back to pending.
type finishRow struct {
	status            string
	retry             bool
	retryAt, duration int64
	started, finished sql.NullInt64
	output, err       string
	reason            string // the skip reason code; empty unless skipped
	request           string
	runID, node       string
	attempt           int
	failed            bool // the attempt ran and failed: the run's failures grow by one
}

func finishRowOf(r model.Result) finishRow {
	v := finishRow{status: string(r.Status), retry: !r.RetryAt.IsZero() && r.Status == model.RunFailed, retryAt: nanos(r.RetryAt),
		output: r.Output, err: r.Error,
		reason: r.Reason, request: requestText(r), runID: r.RunID, node: r.Node, attempt: r.Attempt,
		failed: r.Status == model.RunFailed}
	v.started, v.finished, v.duration = timesOf(r)
	if v.retry {
		v.status = string(model.RunPending)
	}
	if r.Status != model.RunSkipped {
		v.reason = ""
	}
	return v
}

// timesOf returns r's start and end as stored, and its duration in
// milliseconds (zero unless both are known).
func timesOf(r model.Result) (started, finished sql.NullInt64, durationMS int64) {
	if !r.StartedAt.IsZero() && !r.FinishedAt.IsZero() {
		durationMS = r.FinishedAt.Sub(r.StartedAt).Milliseconds()
	}
	return nullNanos(r.StartedAt), nullNanos(r.FinishedAt), durationMS
}

// finishArgs are the arguments of finishSQL for r, in its order.
func finishArgs(r model.Result) []any {
	v := finishRowOf(r)
	return []any{v.status, v.retry, v.retryAt, v.started, v.finished, v.duration, v.output, v.err, v.reason, v.request, v.failed,
		v.runID, v.node, v.attempt}
}

// finishValues are the values of r's row in MySQL's derived tables of
// results, in the order of their columns (finishBatchMySQL).
func finishValues(r model.Result) []any {
	v := finishRowOf(r)
	return []any{v.status, v.retry, v.retryAt, v.started, v.finished, v.duration, v.output, v.err, v.reason, v.request, v.runID, v.node, v.attempt, v.failed}
}

// attemptCols are the columns of a run_attempts row, in the order of
// attemptValues.
const attemptCols = `run_id, attempt, node, started_at, finished_at, duration_ms, status, http_status, response_headers, error, output`

// attemptSQL is the statement that records the attempts of n results
// whose fence held, in the dialect d (an attempt recorded already stays).
func attemptSQL(d dialect, n int) string {
	values := strings.TrimSuffix(strings.Repeat("(?,?,?,?,?,?,?,?,?,?,?),", n), ",")
	if d == dialectMySQL {
		return `INSERT INTO run_attempts (` + attemptCols + `) VALUES ` + values + ` ON DUPLICATE KEY UPDATE run_id = run_id`
	}
	return `INSERT INTO run_attempts (` + attemptCols + `) VALUES ` + values + ` ON CONFLICT (run_id, attempt) DO NOTHING`
}

// attemptRow is the run_attempts row of a result: the attempt's own
// status (failed also when the run goes on to a retry), its text cut to
// model.MaxAttemptText.
type attemptRow struct {
	runID, node, status string
	attempt, httpStatus int
	started, finished   sql.NullInt64
	duration            int64
	headers, err, out   string
}

func attemptRowOf(r model.Result) attemptRow {
	v := attemptRow{runID: r.RunID, node: r.Node, status: string(r.Status), attempt: r.Attempt, httpStatus: r.HTTPStatus,
		err: cleanText(r.Error, model.MaxAttemptText), out: cleanText(r.Output, model.MaxAttemptText)}
	v.started, v.finished, v.duration = timesOf(r)
	if len(r.ResponseHeader) > 0 {
		if b, err := json.Marshal(r.ResponseHeader); err == nil {
			v.headers = cleanText(string(b), maxHeadersText)
		}
	}
	return v
}

// maxHeadersText bounds the stored JSON of an attempt's response headers
// (model.ResponseHeaders bounds them well below it); JSON cut by it does
// not decode, and is shown as no headers.
const maxHeadersText = 48 << 10

// attemptValues are the values of r's run_attempts row, in the order of
// attemptCols.
func attemptValues(r model.Result) []any {
	v := attemptRowOf(r)
	return []any{v.runID, v.attempt, v.node, v.started, v.finished, v.duration, v.status, v.httpStatus, v.headers, v.err, v.out}
}

func nullNanos(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixNano(), Valid: true}
}

// fallbacks returns what to record, in order, for a result whose text the
// database rejected with err: the text replaced by a note, then no text at
// all.
func fallbacks(r model.Result, err error) []model.Result {
	noted := r
	noted.Output, noted.Request = "", nil
	noted.Error = cleanText("chime: the database rejected this attempt's output or error, which are not kept: "+err.Error(), maxNote)
	bare := r
	bare.Output, bare.Error, bare.Request = "", "", nil
	return []model.Result{noted, bare}
}

// FinishRuns records many results, in statements of up to 500 results
// (and 4 MiB of text) on MySQL and PostgreSQL. ok[i] reports whether the
// fence of rs[i] held (its run is running with its Node and Attempt); a
// result that lost its fence is no error. When one run appears twice in rs, at most one of its
// results applies.
//
// The results are applied in the order of their run ids, whatever the
// order of rs, and on MySQL and PostgreSQL each batch locks its rows in
// that order before it writes them: ExtendLeases locks in the same order,
// so that a result batch and a lease extension over the same runs wait
// for each other instead of deadlocking. On SQLite the whole call is one
// transaction (joining the group commit). On MySQL and PostgreSQL each
// batch is a transaction of its own, so that a large call never holds
// thousands of row locks at once, nor is lost whole to a timeout: when a
// batch fails, FinishRuns returns the error together with ok, in which the
// results of the batches committed before it are reported (their ok[i]
// true where the fence held) and the others are false, not recorded. A
// caller that retries should retry only the results not reported.
//
// The results are cleaned first. Should a statement fail on a data error
// all the same, the batch (the whole call on SQLite) is made again in a
// second transaction in which each statement batch runs under a
// savepoint, and a batch that fails is recorded one result at a time (see
// fallbacks for a result that fails alone).
//
// Each result whose fence held records its attempt (run_attempts, see
// RunAttempts) in the statements of its batch: on PostgreSQL in the
// batch's one statement, on MySQL with one more INSERT per batch, on
// SQLite with one more in-process statement per result; never one round
// trip more per result.
//
// The runs of the timers that run after the recorded runs' timers
// (model.Timer.After) are made in the same transaction as the results
// that end their upstream runs, after the fenced writes, from the results
// whose fence held (see follow): one upstream run's end makes at most one
// run of each downstream timer, whoever records it and however often. So
// every result goes through a transaction, on PostgreSQL too. The runs
// made by the committed transactions are returned, for the caller to
// index.
func (s *claimStore) FinishRuns(ctx context.Context, rs []model.Result) ([]bool, []*model.Run, error) {
	ok := make([]bool, len(rs))
	if len(rs) == 0 {
		return ok, nil, nil
	}
	defer s.hotOp()()
	// Sorted by run id: the lock order (see above).
	order := make([]int, len(rs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return strings.Compare(rs[a].RunID, rs[b].RunID) })
	clean := make([]model.Result, len(rs))
	for i, j := range order {
		clean[i] = cleanResult(rs[j])
	}
	sorted := make([]bool, len(rs))
	var (
		made []*model.Run
		err  error
	)
	if s.d == dialectSQLite {
		made, err = s.finishTx(ctx, clean, sorted)
	} else {
		// A transaction per batch; done counts the results of the batches
		// committed.
		done := 0
		err = batchResults(clean, sorted, func(rs []model.Result, ok []bool) error {
			m, err := s.finishTx(ctx, rs, ok)
			if err != nil {
				return err
			}
			made = append(made, m...)
			done += len(rs)
			return nil
		})
		if err != nil {
			clear(sorted[done:])
		}
	}
	for i, j := range order {
		ok[j] = sorted[i]
	}
	// The downstream runs of the committed results are returned with
	// them, for the index.
	if err != nil {
		if s.d == dialectSQLite {
			return nil, nil, fmt.Errorf("finish runs: %w", err)
		}
		return ok, made, fmt.Errorf("finish runs: %w", err)
	}
	return ok, made, nil
}

// finishTx records rs, sorted by run id, in one transaction, setting ok
// per result, and makes in it the downstream runs of the results that end
// their upstream runs, which it returns, and their notify events; on a
// data error it tries again
// the careful way (see FinishRuns).
func (s *claimStore) finishTx(ctx context.Context, clean []model.Result, ok []bool) ([]*model.Run, error) {
	var made []*model.Run
	finish := func(careful bool) error {
		return s.hotTx(ctx, func(ctx context.Context, tx *wtx) (err error) {
			clear(ok)
			made = nil
			err = batchResults(clean, ok, func(rs []model.Result, ok []bool) error {
				if !careful {
					return s.finishBatch(ctx, tx, rs, ok)
				}
				err := savepoint(ctx, tx, "chime_batch", func() error { return s.finishBatch(ctx, tx, rs, ok) })
				if !isDataError(err) {
					return err
				}
				clear(ok)
				for i, r := range rs {
					if ok[i], err = s.finishAlone(ctx, tx, r); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
			var ends []ended
			for i, r := range clean {
				if e, final := endOf(r); ok[i] && final {
					ends = append(ends, e)
				}
			}
			if made, err = s.deps.follow(ctx, tx, ends); err != nil {
				return err
			}
			// The notify events of the results that end their runs.
			return s.notify.writeNotifyEvents(ctx, tx, clean, ok)
		})
	}
	err := finish(false)
	if isDataError(err) {
		err = finish(true)
	}
	if err != nil {
		clear(ok)
		return nil, err
	}
	return made, nil
}

// finishBatch records a batch of results in tx with the dialect's
// multi-row statement (one statement per result on SQLite, where
// statements are cheap in process).
func (s *claimStore) finishBatch(ctx context.Context, tx *wtx, rs []model.Result, ok []bool) error {
	switch s.d {
	case dialectPostgres:
		return s.finishBatchPostgres(ctx, tx, rs, ok)
	case dialectMySQL:
		return s.finishBatchMySQL(ctx, tx, rs, ok)
	}
	stmt, err := tx.prepare(ctx, s.q(finishSQL))
	if err != nil {
		return err
	}
	defer stmt.Close()
	att, err := tx.prepare(ctx, s.q(attemptSQL(s.d, 1)))
	if err != nil {
		return err
	}
	defer att.Close()
	for i, r := range rs {
		tx.n.Add(1)
		res, err := stmt.ExecContext(ctx, finishArgs(r)...)
		if err != nil {
			return fmt.Errorf("run %s: %w", r.RunID, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if ok[i] = n > 0; ok[i] {
			if _, err := att.ExecContext(ctx, attemptValues(r)...); err != nil {
				return fmt.Errorf("attempt %d of run %s: %w", r.Attempt, r.RunID, err)
			}
		}
	}
	return nil
}

// finishAlone records one result in tx under a savepoint, falling back to
// a note instead of its text, then to no text, while the database rejects
// it on a data error. It reports whether the fence held.
func (s *claimStore) finishAlone(ctx context.Context, tx *wtx, r model.Result) (bool, error) {
	exec := func(r model.Result) (n int64, err error) {
		err = savepoint(ctx, tx, "chime_result", func() error {
			res, err := tx.ExecContext(ctx, s.q(finishSQL), finishArgs(r)...)
			if err != nil {
				return err
			}
			if n, err = res.RowsAffected(); err != nil || n == 0 {
				return err
			}
			_, err = tx.ExecContext(ctx, s.q(attemptSQL(s.d, 1)), attemptValues(r)...)
			return err
		})
		return n, err
	}
	n, err := withFallbacks(r, exec)
	if err != nil {
		return false, fmt.Errorf("run %s: %w", r.RunID, err)
	}
	return n > 0, nil
}

// savepoint runs fn under a savepoint of tx: when fn fails, what it did is
// rolled back and its error returned, and the transaction goes on (on
// PostgreSQL, a failed statement otherwise aborts the whole transaction).
func savepoint(ctx context.Context, tx *wtx, name string, fn func() error) error {
	if _, err := tx.ExecContext(ctx, "SAVEPOINT "+name); err != nil {
		return fmt.Errorf("savepoint: %w", err)
	}
	if err := fn(); err != nil {
		if _, rerr := tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT "+name); rerr != nil {
			// The transaction is lost, whatever err was: the error does
			// not wrap err (the combiner tells a lost transaction by
			// that), but a deadlock that lost it (MySQL rolls a deadlocked
			// transaction back whole, savepoints and all) still makes it
			// retryable.
			return &txLostError{cause: err, rollback: rerr}
		}
		if _, rerr := tx.ExecContext(ctx, "RELEASE SAVEPOINT "+name); rerr != nil {
			return fmt.Errorf("%v; release savepoint: %w", err, rerr)
		}
		return err
	}
	if _, err := tx.ExecContext(ctx, "RELEASE SAVEPOINT "+name); err != nil {
		return fmt.Errorf("release savepoint: %w", err)
	}
	return nil
}

// txLostError is savepoint's error when the rollback to the savepoint
// failed: the transaction is lost. It unwraps to the rollback's error
// only; cause is fn's error, which the transaction's retry looks at.
type txLostError struct{ cause, rollback error }

func (e *txLostError) Error() string {
	return fmt.Sprintf("%v; rollback to savepoint: %v", e.cause, e.rollback)
}

func (e *txLostError) Unwrap() error { return e.rollback }

// isDataError reports whether err is the database rejecting a value of the
// statement (too long, badly encoded, out of range, against a constraint),
// as opposed to a failure of the connection, the transaction or a lock,
// after which the same statement could succeed.
func isDataError(err error) bool {
	if err == nil {
		return false
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_TOOBIG, sqlite3.SQLITE_CONSTRAINT, sqlite3.SQLITE_MISMATCH:
			return true
		}
		return false
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1048, // column cannot be null
			1153, // packet bigger than max_allowed_packet
			1264, // out of range
			1265, // data truncated
			1292, // incorrect value
			1300, // invalid character string
			1366, // incorrect string value (encoding)
			1406, // data too long
			3819, // check constraint (MySQL)
			4025: // check constraint (MariaDB)
			return true
		}
		return false
	}
	if errors.Is(err, mysql.ErrPktTooLarge) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// Class 22: data exception (encoding, length, range); class 23:
		// integrity constraint; 54000: a value past a program limit.
		return strings.HasPrefix(pe.Code, "22") || strings.HasPrefix(pe.Code, "23") || pe.Code == "54000"
	}
	return false
}

// finishBatchPostgres applies a batch of results with one UPDATE ... FROM
// unnest(arrays) and reports, per result, whether its fence held. The
// statement's text does not depend on the batch, so pgx's statement cache
// and the server's plan cache serve every batch (a VALUES list of 11
// placeholders per result was parsed and planned anew for every batch
// size).
func (s *claimStore) finishBatchPostgres(ctx context.Context, tx querier, rs []model.Result, ok []bool) error {
	n := len(rs)
	var (
		status, output, errs, ids, nodes = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		reasons                          = make([]string, n)
		requests                         = make([]string, n)
		retry, failed                    = make([]bool, n), make([]bool, n)
		retryAt, durs                    = make([]int64, n), make([]int64, n)
		started, finished                = make([]*int64, n), make([]*int64, n)
		attempts                         = make([]int32, n)
		// The attempts' rows (attemptRowOf).
		aStatus, aHeaders, aErrs, aOutput = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		aHTTP                             = make([]int32, n)
	)
	for i, r := range rs {
		v := finishRowOf(r)
		status[i], retry[i], retryAt[i] = v.status, v.retry, v.retryAt
		started[i], finished[i] = nullPtr(v.started), nullPtr(v.finished)
		durs[i], output[i], errs[i], ids[i], nodes[i], attempts[i] = v.duration, v.output, v.err, v.runID, v.node, int32(v.attempt)
		reasons[i] = v.reason
		requests[i] = v.request
		failed[i] = v.failed
		a := attemptRowOf(r)
		aStatus[i], aHTTP[i], aHeaders[i], aErrs[i], aOutput[i] = a.status, int32(a.httpStatus), a.headers, a.err, a.out
	}
	// The rows are locked first, in id order (the order ExtendLeases
	// locks in), by the materialised CTE; the update then touches only
	// rows it locked, each checked against its result's fence, and the
	// attempts of the rows it updated are recorded by the same statement.
	done, err := s.queryIDs(ctx, tx, `WITH l AS MATERIALIZED (
			SELECT id FROM runs WHERE id = ANY(?::text[]) AND status = 'running' ORDER BY id FOR UPDATE),
		v AS MATERIALIZED (SELECT * FROM unnest(?::text[], ?::boolean[], ?::bigint[], ?::bigint[], ?::bigint[], ?::bigint[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::integer[], ?::boolean[],
				?::text[], ?::integer[], ?::text[], ?::text[], ?::text[])
			AS v(status, retry, retry_at, started_at, finished_at, duration_ms, output, error, reason, request, id, node, attempt, failed,
				a_status, http_status, response_headers, a_error, a_output)),
		u AS (UPDATE runs SET status = v.status,
			due_at = CASE WHEN v.retry THEN v.retry_at ELSE runs.due_at END, started_at = v.started_at,
			finished_at = v.finished_at, duration_ms = v.duration_ms, output = v.output, error = v.error, reason = v.reason,
			request = v.request, failures = runs.failures + CASE WHEN v.failed THEN 1 ELSE 0 END, lease_until = NULL
			FROM l, v
			WHERE runs.id = l.id AND runs.id = v.id AND runs.status = 'running' AND runs.node = v.node AND runs.attempt = v.attempt
			RETURNING runs.id, runs.node, runs.attempt),
		a AS (INSERT INTO run_attempts (`+attemptCols+`)
			SELECT v.id, v.attempt, v.node, v.started_at, v.finished_at, v.duration_ms, v.a_status, v.http_status, v.response_headers, v.a_error, v.a_output
			FROM v JOIN u ON u.id = v.id AND u.node = v.node AND u.attempt = v.attempt
			ON CONFLICT (run_id, attempt) DO NOTHING)
		SELECT id FROM u`, ids, status, retry, retryAt, started, finished, durs, output, errs, reasons, requests, ids, nodes, attempts, failed,
		aStatus, aHTTP, aHeaders, aErrs, aOutput)
	if err != nil {
		return err
	}
	applied := make(map[string]bool, len(done))
	for _, id := range done {
		applied[id] = true
	}
	for i, r := range rs {
		ok[i] = applied[r.RunID]
	}
	return nil
}

func nullPtr(n sql.NullInt64) *int64 {
	if !n.Valid {
		return nil
	}
	return &n.Int64
}

// finishBatchMySQL applies a batch of results with one multi-table UPDATE
// whose join carries the fences, under a savepoint. The batch comes sorted
// by run id, and the join reads the derived table first (it is the small
// side; runs is reached by its primary key), so the rows are locked in id
// order, ExtendLeases' order (storetest Leases/ExtendWhileFinishing counts
// no deadlock with it, 15 in five runs before the sort). When it matched every
// result (the usual case: each fence held), that is all. Otherwise it is
// rolled back to the savepoint and the batch is applied the careful way
// (finishBatchMySQLLocked), which tells which fences held. A batch that
// names a run twice goes the careful way at once.
func (s *claimStore) finishBatchMySQL(ctx context.Context, tx *wtx, rs []model.Result, ok []bool) error {
	seen := make(map[string]bool, len(rs))
	for _, r := range rs {
		if seen[r.RunID] {
			return s.finishBatchMySQLLocked(ctx, tx, rs, ok)
		}
		seen[r.RunID] = true
	}
	var b strings.Builder
	args := make([]any, 0, 14*len(rs))
	for i, r := range rs {
		if i == 0 {
			b.WriteString(`SELECT ? AS status, ? AS retry, ? AS retry_at, ? AS started_at, ? AS finished_at,
				? AS duration_ms, ? AS output, ? AS error, ? AS reason, ? AS request, ? AS id, ? AS node, ? AS attempt, ? AS failed`)
		} else {
			b.WriteString(` UNION ALL SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?`)
		}
		args = append(args, finishValues(r)...)
	}
	errShort := errors.New("not every fence held")
	err := savepoint(ctx, tx, "chime_fast", func() error {
		res, err := tx.ExecContext(ctx, `UPDATE runs JOIN (`+b.String()+`) v
			ON runs.id = v.id AND runs.status = 'running' AND runs.node = v.node AND runs.attempt = v.attempt
			SET runs.due_at = IF(v.retry, v.retry_at, runs.due_at), runs.status = v.status, runs.started_at = v.started_at,
			runs.finished_at = v.finished_at, runs.duration_ms = v.duration_ms, runs.output = v.output,
			runs.error = v.error, runs.reason = v.reason, runs.request = v.request, runs.lease_until = NULL,
			runs.failures = runs.failures + IF(v.failed, 1, 0)`, args...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n != int64(len(rs)) {
			return errShort
		}
		return s.insertAttemptsMySQL(ctx, tx, rs, nil)
	})
	if errors.Is(err, errShort) {
		return s.finishBatchMySQLLocked(ctx, tx, rs, ok)
	}
	if err != nil {
		return err
	}
	for i := range ok {
		ok[i] = true
	}
	return nil
}

// finishBatchMySQLLocked locks the batch's running rows, checks each
// result's fence, and applies
// the results that hold theirs with one multi-table UPDATE.
func (s *claimStore) finishBatchMySQLLocked(ctx context.Context, tx *wtx, rs []model.Result, ok []bool) error {
	clear(ok)
	ids := make([]any, len(rs))
	for i, r := range rs {
		ids[i] = r.RunID
	}
	rows, err := tx.QueryContext(ctx, `SELECT id, status, node, attempt FROM runs WHERE id IN (`+placeholders(len(ids))+`)
		AND status = 'running' ORDER BY id FOR UPDATE`, ids...)
	if err != nil {
		return err
	}
	type fence struct {
		status, node string
		attempt      int
	}
	held := map[string]fence{}
	for rows.Next() {
		var id string
		var f fence
		if err := rows.Scan(&id, &f.status, &f.node, &f.attempt); err != nil {
			rows.Close()
			return err
		}
		held[id] = f
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	var b strings.Builder
	var args []any
	used := map[string]bool{}
	for i, r := range rs {
		f, found := held[r.RunID]
		if !found || used[r.RunID] {
			continue
		}
		if f.status != string(model.RunRunning) || f.node != r.Node || f.attempt != r.Attempt {
			continue
		}
		used[r.RunID] = true
		ok[i] = true
		if len(args) == 0 {
			b.WriteString(`SELECT ? AS status, ? AS retry, ? AS retry_at, ? AS started_at, ? AS finished_at,
				? AS duration_ms, ? AS output, ? AS error, ? AS reason, ? AS request, ? AS id, ? AS node, ? AS attempt, ? AS failed`)
		} else {
			b.WriteString(` UNION ALL SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?`)
		}
		args = append(args, finishValues(r)...)
	}
	if len(args) == 0 {
		return nil
	}
	_, err = tx.ExecContext(ctx, `UPDATE runs JOIN (`+b.String()+`) v ON runs.id = v.id
		SET runs.due_at = IF(v.retry, v.retry_at, runs.due_at), runs.status = v.status, runs.started_at = v.started_at,
		runs.finished_at = v.finished_at, runs.duration_ms = v.duration_ms, runs.output = v.output,
		runs.error = v.error, runs.reason = v.reason, runs.request = v.request, runs.lease_until = NULL,
		runs.failures = runs.failures + IF(v.failed, 1, 0)`, args...)
	if err != nil {
		return err
	}
	return s.insertAttemptsMySQL(ctx, tx, rs, ok)
}

// insertAttemptsMySQL records, with one multi-row INSERT, the attempts of
// the results of rs whose fence held: those with ok[i] set, or all when ok
// is nil.
func (s *claimStore) insertAttemptsMySQL(ctx context.Context, tx *wtx, rs []model.Result, ok []bool) error {
	n := 0
	args := make([]any, 0, 11*len(rs))
	for i, r := range rs {
		if ok != nil && !ok[i] {
			continue
		}
		n++
		args = append(args, attemptValues(r)...)
	}
	if n == 0 {
		return nil
	}
	_, err := tx.ExecContext(ctx, attemptSQL(dialectMySQL, n), args...)
	return err
}

// batchResults calls fn for consecutive batches of rs and the matching ok:
// at most batchSize results, and at most maxBatchText bytes of output and
// error past a batch's first result.
func batchResults(rs []model.Result, ok []bool, fn func([]model.Result, []bool) error) error {
	for len(rs) > 0 {
		n, text := 0, 0
		for n < len(rs) && n < batchSize {
			text += len(rs[n].Output) + len(rs[n].Error) + requestSize(rs[n].Request)
			if n > 0 && text > maxBatchText {
				break
			}
			n++
		}
		if err := fn(rs[:n], ok[:n]); err != nil {
			return err
		}
		rs, ok = rs[n:], ok[n:]
	}
	return nil
}

// requestSize estimates the bytes of r's stored form, for batchResults.
func requestSize(r *model.SentRequest) int {
	if r == nil {
		return 0
	}
	n := len(r.URL) + len(r.Body) + len(r.Args) + len(r.Command) + 200
	for k, v := range r.Header {
		n += len(k) + len(v) + 6
	}
	return n
}

// withFallbacks records r with exec and, while the database rejects it on
// a data error, its fallbacks (see fallbacks) one after the other.
func withFallbacks(r model.Result, exec func(model.Result) (int64, error)) (int64, error) {
	n, err := exec(r)
	if isDataError(err) {
		for _, f := range fallbacks(r, err) {
			if n, err = exec(f); !isDataError(err) {
				break
			}
		}
	}
	return n, err
}
