package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Coordination in the database: the slice locks and the leader elections of
// a cluster that runs without Redis (--coordination db) are lease rows of
// the table coord_locks, one per lock name, judged by the database's clock,
// so that the nodes' own clocks do not matter. A lock is held by token
// while its row names token and expires_at lies ahead of the database's
// clock; an expired row is free for anyone.
//
// Taking or extending is one conditional UPDATE on the row's primary key
// (a row that exists: the common case), and one INSERT that ignores a
// conflict when the row is missing. Both are atomic on every dialect: the
// UPDATE re-reads the row it changes (a locking read on MySQL/MariaDB, a
// re-check of the WHERE on the latest version on PostgreSQL, the one writer
// on SQLite), and of two INSERTs of one name one wins.

// coordGCEvery is how often a Locker deletes the rows of locks that expired
// long ago (slices of past minutes).
const coordGCEvery = time.Minute

// coordGCAge is how long an expired lock row is kept before it is deleted.
const coordGCAge = 10 * time.Minute

// nowMicros is the database clock in microseconds, as SQL.
func (s *nodeStore) nowMicros() string {
	switch s.d {
	case dialectMySQL:
		return `CAST(UNIX_TIMESTAMP(SYSDATE(6)) * 1000000 AS SIGNED)`
	case dialectPostgres:
		return `(extract(epoch from clock_timestamp()) * 1000000)::bigint`
	}
	return `CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)`
}

// Locker is a lock.Locker whose locks are rows of the store's database.
type Locker struct {
	s      *core
	prefix string
	lastGC atomic.Int64 // unix nanos of the last collection of old rows

	take, insert, extend, unlock, holder, gc string
}

// Locker returns the store's lock.Locker. Every lock name is prefixed with
// prefix: lockers of different prefixes never see each other's locks.
func (s *nodeStore) Locker(prefix string) *Locker {
	now := s.nowMicros()
	insert := `INSERT INTO coord_locks (name, token, expires_at, gen) VALUES (?, ?, ` + now + ` + ?, 1)`
	if s.d == dialectMySQL {
		insert = `INSERT IGNORE` + insert[len(`INSERT`):]
	} else {
		insert += ` ON CONFLICT DO NOTHING`
	}
	return &Locker{
		s: s.core, prefix: prefix,
		take:   s.q(`UPDATE coord_locks SET token = ?, expires_at = ` + now + ` + ?, gen = gen + 1 WHERE name = ? AND (token = ? OR expires_at <= ` + now + `)`),
		insert: s.q(insert),
		extend: s.q(`UPDATE coord_locks SET expires_at = ` + now + ` + ?, gen = gen + 1 WHERE name = ? AND token = ? AND expires_at > ` + now),
		unlock: s.q(`DELETE FROM coord_locks WHERE name = ? AND token = ? AND expires_at > ` + now),
		holder: s.q(`SELECT token FROM coord_locks WHERE name = ? AND expires_at > ` + now),
		gc:     s.q(`DELETE FROM coord_locks WHERE expires_at < ` + now + ` - ?`),
	}
}

// errTTL is returned for a lease that is not positive.
var errTTL = errors.New("lock ttl must be positive")

// TryLock takes key for token for ttl if it is free or already token's.
func (l *Locker) TryLock(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	if ttl <= 0 {
		return false, fmt.Errorf("lock %s: %w", key, errTTL)
	}
	l.collect(ctx)
	name := l.prefix + key
	res, err := l.s.w.ExecContext(ctx, l.take, token, ttl.Microseconds(), name, token)
	if err != nil {
		return false, fmt.Errorf("lock %s: %w", key, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return false, fmt.Errorf("lock %s: %w", key, err)
	} else if n == 1 {
		return true, nil
	}
	res, err = l.s.w.ExecContext(ctx, l.insert, name, token, ttl.Microseconds())
	if err != nil {
		return false, fmt.Errorf("lock %s: %w", key, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("lock %s: %w", key, err)
	}
	return n == 1, nil
}

// Extend sets a new ttl on key if token holds it.
func (l *Locker) Extend(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	if ttl <= 0 {
		return false, fmt.Errorf("extend lock %s: %w", key, errTTL)
	}
	res, err := l.s.w.ExecContext(ctx, l.extend, ttl.Microseconds(), l.prefix+key, token)
	if err != nil {
		return false, fmt.Errorf("extend lock %s: %w", key, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("extend lock %s: %w", key, err)
	}
	return n == 1, nil
}

// Unlock releases key if token holds it.
func (l *Locker) Unlock(ctx context.Context, key, token string) (bool, error) {
	res, err := l.s.w.ExecContext(ctx, l.unlock, l.prefix+key, token)
	if err != nil {
		return false, fmt.Errorf("unlock %s: %w", key, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("unlock %s: %w", key, err)
	}
	return n == 1, nil
}

// holderOf returns the token that holds key, or "" when it is free.
func (l *Locker) holderOf(ctx context.Context, key string) (string, error) {
	var token string
	err := l.s.r.QueryRowContext(ctx, l.holder, l.prefix+key).Scan(&token)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("lock holder %s: %w", key, err)
	}
	return token, nil
}

// collect deletes, at most once every coordGCEvery, the rows of locks that
// expired more than coordGCAge ago: the slices of past minutes. A failure
// is retried at the next collection; it never fails the lock call.
func (l *Locker) collect(ctx context.Context) {
	now := time.Now().UnixNano()
	last := l.lastGC.Load()
	if now-last < int64(coordGCEvery) || !l.lastGC.CompareAndSwap(last, now) {
		return
	}
	_, _ = l.s.w.ExecContext(ctx, l.gc, coordGCAge.Microseconds())
}

// Elector is a lock.Elector whose terms are rows of the store's database.
type Elector struct{ l *Locker }

// Elector returns the store's lock.Elector; prefix as for Locker.
func (s *nodeStore) Elector(prefix string) *Elector { return &Elector{l: s.Locker(prefix)} }

// Select makes nodeID the leader of service for hold if no one is, extends
// its term if it is, and returns the current leader's id ("" when the term
// of the last leader ended at the very moment of the call).
func (e *Elector) Select(ctx context.Context, service, nodeID string, hold time.Duration) (string, error) {
	if nodeID == "" {
		return "", fmt.Errorf("elect %s: empty node id", service)
	}
	if hold <= 0 {
		return "", fmt.Errorf("elect %s: %w", service, errTTL)
	}
	key := "leader:" + service
	ok, err := e.l.TryLock(ctx, key, nodeID, hold)
	if err != nil {
		return "", fmt.Errorf("elect %s: %w", service, err)
	}
	if ok {
		return nodeID, nil
	}
	return e.l.holderOf(ctx, key)
}

// Dialect names the store's database: "sqlite", "mysql" or "postgres".
func (s *core) Dialect() string { return s.d.String() }
