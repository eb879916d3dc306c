package sqlstore

import (
	"context"
	"database/sql"
	"sync"
)

// stmtCache keeps the SQLite writer's statements prepared across
// transactions. Without it, every statement of a write transaction is
// parsed and planned again: a save's insert of 30 runs (a multi-row
// INSERT … ON CONFLICT … RETURNING of 330 parameters) spent about 40% of
// its time in sqlite3_prepare, and preparing was a fifth of the writer's
// CPU in the api bench (docs/performance.md, "Row size and the save's
// tail").
//
// A statement text is prepared once it has been run twice (so that the
// one-off texts of multi-row statements of rare sizes are not kept), at
// the start of the next write transaction, before the writer's one
// connection is taken: the pool has a single connection, so preparing on
// the pool while a transaction holds it would wait for ever. A
// transaction then runs the statement through Tx.StmtContext, which reuses
// the statement already prepared on that connection. At most
// maxCachedStmts texts are kept; past that, new texts are run unprepared
// as before.
//
// Caveat: only for SQLite (a writer pool of one connection). A
// connection that database/sql replaces gets each statement prepared
// again at its first use, within the transaction.
type stmtCache struct {
	mu      sync.Mutex
	stmts   map[string]*sql.Stmt
	seen    map[string]bool // run once, not prepared yet
	pending []string        // run twice: to prepare at the next begin
}

const maxCachedStmts = 256

func newStmtCache() *stmtCache {
	return &stmtCache{stmts: map[string]*sql.Stmt{}, seen: map[string]bool{}}
}

// get returns the prepared statement of query, or nil (and notes the use).
func (c *stmtCache) get(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.stmts[query]; st != nil {
		return st
	}
	if len(c.stmts)+len(c.pending) >= maxCachedStmts {
		return nil
	}
	if c.seen[query] {
		delete(c.seen, query)
		c.pending = append(c.pending, query)
	} else if len(c.seen) < 4*maxCachedStmts {
		c.seen[query] = true
	}
	return nil
}

// prepare prepares the statements run twice since the last call, on db,
// which must not be held by the caller. A statement that fails to prepare
// is left unprepared.
func (c *stmtCache) prepare(ctx context.Context, db *sql.DB) {
	c.mu.Lock()
	todo := c.pending
	c.pending = nil
	c.mu.Unlock()
	for _, q := range todo {
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			continue
		}
		c.mu.Lock()
		if c.stmts[q] == nil {
			c.stmts[q] = st
			st = nil
		}
		c.mu.Unlock()
		if st != nil {
			st.Close()
		}
	}
}

// close closes the prepared statements.
func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for q, st := range c.stmts {
		st.Close()
		delete(c.stmts, q)
	}
}
