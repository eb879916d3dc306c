package api

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/chimehq/chime/internal/store"
)

// DefaultStatsMaxAge is how old the counts of GET /api/v1/stats may be when
// Config.StatsMaxAge is zero.
const DefaultStatsMaxAge = 10 * time.Second

// statsCache keeps the store's counts for GET /api/v1/stats. Store.Stats
// counts every run by status, a scan of the whole runs table (seconds with
// millions of runs on SQLite): the cache answers every call at once with
// the last counts, and when they are older than maxAge one call starts a
// refresh in the background and answers the old counts meanwhile. So a
// node counts at most once per maxAge however often it is asked, and not
// at all when nobody asks; only the first call of a node waits for the
// counts. A count that takes long stretches maxAge to ten times its
// duration, so that counting takes at most a tenth of a core however big
// the table (a million runs on SQLite: about 2 s, so counts up to 20 s
// old). The counts may thus be that old, plus the time a count takes.
type statsCache struct {
	maxAge time.Duration
	now    func() time.Time
	load   func(ctx context.Context) (store.Stats, error)
	log    *slog.Logger

	mu         sync.Mutex
	st         store.Stats
	at         time.Time     // when st was read; zero: not yet
	took       time.Duration // how long reading st took
	refreshing bool
}

// statsTimeout bounds one background count.
const statsTimeout = time.Minute

// get returns the counts, loading them when there are none yet.
func (c *statsCache) get(ctx context.Context) (store.Stats, error) {
	c.mu.Lock()
	if !c.at.IsZero() && c.maxAge > 0 {
		st := c.st
		if c.now().Sub(c.at) >= max(c.maxAge, 10*c.took) && !c.refreshing {
			c.refreshing = true
			go c.refresh()
		}
		c.mu.Unlock()
		return st, nil
	}
	c.mu.Unlock()
	start := c.now()
	st, err := c.load(ctx)
	if err != nil {
		return st, err
	}
	c.set(st, start, c.now())
	return st, nil
}

// refresh counts again in the background.
func (c *statsCache) refresh() {
	ctx, cancel := context.WithTimeout(context.Background(), statsTimeout)
	defer cancel()
	start := c.now()
	st, err := c.load(ctx)
	c.mu.Lock()
	c.refreshing = false
	c.mu.Unlock()
	if err != nil {
		c.log.Warn("stats: count runs", "err", err)
		return
	}
	c.set(st, start, c.now())
}

// set keeps st, read from start to end, unless newer counts are kept
// already.
func (c *statsCache) set(st store.Stats, start, end time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if end.Before(c.at) {
		return
	}
	c.st, c.at, c.took = st, end, end.Sub(start)
}
