// Failure notifications: the outbox of final results (notify_events),
// written in the result's transaction, and the deliveries it becomes
// (notifications), claimed like runs by moving next_at ahead.

package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/chimehq/chime/model"
)

// notifyStore keeps the notification channels of apps and the events and
// deliveries of notifications.
type notifyStore struct {
	*core
}

// insertIgnore is the dialect's INSERT that skips rows whose key exists.
func (s *core) insertIgnore(table, cols string, n int) string {
	vals := `(` + placeholders(n) + `)`
	switch s.d {
	case dialectMySQL:
		return `INSERT IGNORE INTO ` + table + ` (` + cols + `) VALUES ` + vals
	case dialectPostgres:
		return s.q(`INSERT INTO ` + table + ` (` + cols + `) VALUES ` + vals + ` ON CONFLICT DO NOTHING`)
	}
	return `INSERT OR IGNORE INTO ` + table + ` (` + cols + `) VALUES ` + vals
}

const notifyEventCols = `run_id, attempt, timer_id, status, finished_at`

// writeNotifyEvents writes, in tx, the notify event of each result of rs
// whose fence held (ok) that asks for one and ends its run, unless the
// run is a shard (its fire's end writes the fire's event: FinishFires).
func (s *notifyStore) writeNotifyEvents(ctx context.Context, tx *wtx, rs []model.Result, ok []bool) error {
	ends := func(i int, r model.Result) bool {
		return ok[i] && r.Notify && r.TimerID != "" &&
			(r.Status == model.RunSucceeded || r.Status == model.RunFailed && r.RetryAt.IsZero())
	}
	var ids []string
	for i, r := range rs {
		if ends(i, r) {
			ids = append(ids, r.RunID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	shards, err := s.shardsAmong(ctx, tx, ids)
	if err != nil {
		return fmt.Errorf("notify events: %w", err)
	}
	for i, r := range rs {
		if !ends(i, r) || shards[r.RunID] {
			continue
		}
		if _, err := tx.ExecContext(ctx, s.insertIgnore("notify_events", notifyEventCols, 5),
			r.RunID, r.Attempt, r.TimerID, string(r.Status), nanos(r.FinishedAt)); err != nil {
			return fmt.Errorf("notify event of run %s: %w", r.RunID, err)
		}
	}
	return nil
}

// ClaimNotifyEvents claims up to limit notify events whose claim ended
// before now (or that nobody claimed), until until, oldest first. A node
// that dies holding them leaves them to another after until.
func (s *notifyStore) ClaimNotifyEvents(ctx context.Context, now, until time.Time, limit int) ([]model.NotifyEvent, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.r.QueryContext(ctx, s.q(`SELECT `+notifyEventCols+`, claim_until FROM notify_events
		WHERE claim_until < ? ORDER BY finished_at LIMIT `+strconv.Itoa(limit)), nanos(now))
	if err != nil {
		return nil, fmt.Errorf("claim notify events: %w", err)
	}
	var seen []model.NotifyEvent
	for rows.Next() {
		var ev model.NotifyEvent
		var status string
		var fin, claim int64
		if err := rows.Scan(&ev.RunID, &ev.Attempt, &ev.TimerID, &status, &fin, &claim); err != nil {
			rows.Close()
			return nil, fmt.Errorf("claim notify events: %w", err)
		}
		ev.Status, ev.FinishedAt, ev.ClaimUntil = model.RunStatus(status), fromNanos(fin), time.Unix(0, claim).UTC()
		seen = append(seen, ev)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim notify events: %w", err)
	}
	var out []model.NotifyEvent
	for _, ev := range seen {
		res, err := s.w.ExecContext(ctx, s.q(`UPDATE notify_events SET claim_until = ? WHERE run_id = ? AND attempt = ? AND claim_until = ?`),
			nanos(until), ev.RunID, ev.Attempt, ev.ClaimUntil.UnixNano())
		if err != nil {
			return out, fmt.Errorf("claim notify event of run %s: %w", ev.RunID, err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			ev.ClaimUntil = until
			out = append(out, ev)
		}
	}
	return out, nil
}

const notificationCols = `id, run_id, timer_id, app, on_event, channel, target, payload, status, attempts, next_at, sent_at, error, created_at`

// ExpandNotifyEvent replaces the event ev, still claimed as ev.ClaimUntil
// says, by the notifications ns, in one transaction: a notification whose
// id exists already is left alone, so that expanding an event twice (its
// claim ran out meanwhile) sends nothing twice. It returns an error
// wrapping model.ErrNotClaimed when the claim no longer holds.
func (s *notifyStore) ExpandNotifyEvent(ctx context.Context, ev model.NotifyEvent, ns []*model.Notification) error {
	return s.tx(ctx, func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, s.q(`DELETE FROM notify_events WHERE run_id = ? AND attempt = ? AND claim_until = ?`),
			ev.RunID, ev.Attempt, nanos(ev.ClaimUntil))
		if err != nil {
			return fmt.Errorf("expand notify event of run %s: %w", ev.RunID, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("expand notify event of run %s: %w", ev.RunID, model.ErrNotClaimed)
		}
		for _, n := range ns {
			target, err := s.sealTarget(n.Channel, n.Target)
			if err != nil {
				return fmt.Errorf("insert notification %s: target: %w", n.ID, err)
			}
			if _, err := tx.ExecContext(ctx, s.insertIgnore("notifications", notificationCols, 14),
				n.ID, n.RunID, n.TimerID, n.App, n.On, n.Channel, target, string(n.Payload), n.Status, n.Attempts,
				nanos(n.NextAt), nullTimePtr(n.SentAt), n.Error, nanos(n.CreatedAt)); err != nil {
				return fmt.Errorf("insert notification %s: %w", n.ID, err)
			}
		}
		return nil
	})
}

func nullTimePtr(t *time.Time) sql.NullInt64 {
	if t == nil {
		return sql.NullInt64{}
	}
	return nullNanos(*t)
}

func (s *notifyStore) queryNotifications(ctx context.Context, query string, args ...any) ([]*model.Notification, error) {
	rows, err := s.r.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*model.Notification
	for rows.Next() {
		var n model.Notification
		var payload string
		var next, created int64
		var sent sql.NullInt64
		if err := rows.Scan(&n.ID, &n.RunID, &n.TimerID, &n.App, &n.On, &n.Channel, &n.Target, &payload, &n.Status,
			&n.Attempts, &next, &sent, &n.Error, &created); err != nil {
			return nil, err
		}
		n.Payload, n.NextAt, n.CreatedAt = []byte(payload), time.Unix(0, next).UTC(), fromNanos(created)
		var err error
		if n.Target, err = s.openTarget(n.Channel, n.Target); err != nil {
			return nil, fmt.Errorf("notification %s: target: %w", n.ID, err)
		}
		if sent.Valid {
			t := fromNanos(sent.Int64)
			n.SentAt = &t
		}
		out = append(out, &n)
	}
	return out, rows.Err()
}

// DueNotifications claims up to limit pending notifications due at now,
// earliest first, by moving their NextAt to until: a node that dies while
// delivering one leaves it due again then. The returned notifications
// carry NextAt = until, the fence of RecordNotification.
func (s *notifyStore) DueNotifications(ctx context.Context, now, until time.Time, limit int) ([]*model.Notification, error) {
	if limit <= 0 {
		limit = 100
	}
	due, err := s.queryNotifications(ctx, `SELECT `+notificationCols+` FROM notifications
		WHERE status = 'pending' AND next_at <= ? ORDER BY next_at, id LIMIT `+strconv.Itoa(limit), nanos(now))
	if err != nil {
		return nil, fmt.Errorf("due notifications: %w", err)
	}
	var out []*model.Notification
	for _, n := range due {
		res, err := s.w.ExecContext(ctx, s.q(`UPDATE notifications SET next_at = ? WHERE id = ? AND status = 'pending' AND next_at = ?`),
			nanos(until), n.ID, n.NextAt.UnixNano())
		if err != nil {
			return out, fmt.Errorf("claim notification %s: %w", n.ID, err)
		}
		if k, _ := res.RowsAffected(); k == 1 {
			n.NextAt = until
			out = append(out, n)
		}
	}
	return out, nil
}

// RecordNotification writes a delivery's outcome (Status, Attempts,
// SentAt, Error) and its next due time next, fenced on the claim
// (n.NextAt as DueNotifications returned it). It returns an error
// wrapping model.ErrNotClaimed when the claim ran out and another node
// took the notification.
func (s *notifyStore) RecordNotification(ctx context.Context, n *model.Notification, next time.Time) error {
	res, err := s.w.ExecContext(ctx, s.q(`UPDATE notifications SET status = ?, attempts = ?, sent_at = ?, error = ?, next_at = ?
		WHERE id = ? AND status = 'pending' AND next_at = ?`),
		n.Status, n.Attempts, nullTimePtr(n.SentAt), n.Error, nanos(next), n.ID, nanos(n.NextAt))
	if err != nil {
		return fmt.Errorf("record notification %s: %w", n.ID, err)
	}
	if k, _ := res.RowsAffected(); k == 0 {
		return fmt.Errorf("record notification %s: %w", n.ID, model.ErrNotClaimed)
	}
	n.NextAt = next
	return nil
}

// RunNotifications returns the notifications of run id, oldest first.
func (s *notifyStore) RunNotifications(ctx context.Context, runID string) ([]*model.Notification, error) {
	ns, err := s.queryNotifications(ctx, `SELECT `+notificationCols+` FROM notifications WHERE run_id = ? ORDER BY created_at, id`, runID)
	if err != nil {
		return nil, fmt.Errorf("notifications of run %s: %w", runID, err)
	}
	return ns, nil
}

// AppNotify returns app's default notification rules (none: an empty
// slice).
func (s *notifyStore) AppNotify(ctx context.Context, app string) ([]model.NotifyRule, error) {
	var raw string
	err := s.r.QueryRowContext(ctx, s.q(`SELECT notify FROM app_notify WHERE app = ?`), app).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) || err == nil && raw == "" {
		return []model.NotifyRule{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("notify defaults of app %s: %w", app, err)
	}
	var rules []model.NotifyRule
	if err := json.Unmarshal([]byte(raw), &rules); err != nil {
		return nil, fmt.Errorf("notify defaults of app %s: decode: %w", app, err)
	}
	if err := s.openNotify(rules); err != nil {
		return nil, fmt.Errorf("notify defaults of app %s: %w", app, err)
	}
	return rules, nil
}

// SetAppNotify replaces app's default notification rules; none deletes
// them.
func (s *notifyStore) SetAppNotify(ctx context.Context, app string, rules []model.NotifyRule, now time.Time) error {
	if len(rules) == 0 {
		if _, err := s.w.ExecContext(ctx, s.q(`DELETE FROM app_notify WHERE app = ?`), app); err != nil {
			return fmt.Errorf("set notify defaults of app %s: %w", app, err)
		}
		return nil
	}
	sealed, err := s.sealNotify(rules)
	if err != nil {
		return fmt.Errorf("set notify defaults of app %s: %w", app, err)
	}
	b, err := json.Marshal(sealed)
	if err != nil {
		return fmt.Errorf("set notify defaults of app %s: encode: %w", app, err)
	}
	query := `INSERT INTO app_notify (app, notify, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (app) DO UPDATE SET notify = excluded.notify, updated_at = excluded.updated_at`
	if s.d == dialectMySQL {
		query = `INSERT INTO app_notify (app, notify, updated_at) VALUES (?, ?, ?)
			ON DUPLICATE KEY UPDATE notify = VALUES(notify), updated_at = VALUES(updated_at)`
	}
	if _, err := s.w.ExecContext(ctx, s.q(query), app, string(b), nanos(now)); err != nil {
		return fmt.Errorf("set notify defaults of app %s: %w", app, err)
	}
	return nil
}
