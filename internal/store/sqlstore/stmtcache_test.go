package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// TestStmtCache: on SQLite a write statement run twice is prepared at the
// next transaction's start and run prepared from then on, with the same
// results; past maxCachedStmts texts, statements run unprepared.
func TestStmtCache(t *testing.T) {
	t.Parallel()
	s := openSQLiteFile(t)
	if s.stmtc == nil {
		t.Fatal("no statement cache on SQLite")
	}
	ctx := context.Background()
	if _, err := s.w.ExecContext(ctx, `CREATE TABLE cache_probe (k INTEGER PRIMARY KEY, v TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	const insert = `INSERT INTO cache_probe (k, v) VALUES (?, ?) RETURNING v`
	prepared := func() bool {
		s.stmtc.mu.Lock()
		defer s.stmtc.mu.Unlock()
		return s.stmtc.stmts[insert] != nil
	}
	for i := range 5 {
		err := s.tx(ctx, func(tx *wtx) error {
			var v string
			if err := tx.QueryRowContext(ctx, insert, i, fmt.Sprint("v", i)).Scan(&v); err != nil {
				return err
			}
			if v != fmt.Sprint("v", i) {
				return fmt.Errorf("RETURNING gave %q", v)
			}
			_, err := tx.ExecContext(ctx, `UPDATE cache_probe SET v = v || '!' WHERE k = ?`, i)
			return err
		})
		if err != nil {
			t.Fatalf("transaction %d: %v", i, err)
		}
		// Run in transactions 0 and 1, prepared when transaction 2 begins.
		if want := i >= 2; prepared() != want {
			t.Fatalf("after transaction %d: prepared = %v, want %v", i, prepared(), want)
		}
	}
	var n int
	if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM cache_probe WHERE v LIKE 'v_!'`).Scan(&n); err != nil || n != 5 {
		t.Fatalf("rows written = %d (%v), want 5", n, err)
	}
	// A rolled-back transaction leaves the cached statement usable.
	errRollback := errors.New("roll back")
	if err := s.tx(ctx, func(tx *wtx) error {
		if _, err := tx.ExecContext(ctx, insert, 99, "x"); err != nil {
			return err
		}
		return errRollback
	}); !errors.Is(err, errRollback) {
		t.Fatalf("rolled-back transaction: %v", err)
	}
	if err := s.tx(ctx, func(tx *wtx) error { _, err := tx.ExecContext(ctx, insert, 99, "y"); return err }); err != nil {
		t.Fatal(err)
	}

	// The cache is bounded.
	c := newStmtCache()
	for i := range 3 * maxCachedStmts {
		q := fmt.Sprint("SELECT ", i)
		c.get(q)
		c.get(q)
	}
	c.prepare(ctx, s.w)
	if len(c.stmts) != maxCachedStmts {
		t.Errorf("%d statements cached, want %d", len(c.stmts), maxCachedStmts)
	}
	c.close()
}
