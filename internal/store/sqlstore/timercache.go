// The timers that ClaimRuns returns, read by version and cached decoded.

package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/chimehq/chime/model"
)

// timersByID loads the timers of runs in one query per 500 timers. sealed
// holds the errors of the timers whose secrets do not decrypt.
func (s *timerStore) timersByID(ctx context.Context, runs []*model.Run) (timers map[string]*model.Timer, sealed map[string]error, err error) {
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
			if t := s.cache.get(id, version); t != nil {
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
				s.cache.put(t, version)
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
//
// A timer is cached on its second load: the first only records its id and
// version in seen. Where few timers fire often (10,000 fires/s from 12,500
// timers) every timer is cached from its second fire on; where many fire
// rarely (a million timers, most hourly or daily), seen starts afresh
// before most come back, and the cache does not fill with timers decoded
// once an hour (it held 50,000 of them, about 2 KiB each).
type timerCache struct {
	mu   sync.Mutex
	m    map[string]cachedTimer
	seen map[string]int64 // loaded once, not cached: their version
}

type cachedTimer struct {
	t       *model.Timer
	version int64
}

// scanFunc adapts a function to the scanner that scanTimer takes.
type scanFunc func(dest ...any) error

func (f scanFunc) Scan(dest ...any) error { return f(dest...) }

// maxCachedTimers bounds the cache and its seen set; past it, each starts
// afresh.
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
	if v, ok := c.seen[t.ID]; !ok || v != version {
		if c.seen == nil || len(c.seen) >= maxCachedTimers {
			c.seen = make(map[string]int64)
		}
		c.seen[t.ID] = version
		return
	}
	delete(c.seen, t.ID)
	if c.m == nil || len(c.m) >= maxCachedTimers {
		c.m = make(map[string]cachedTimer)
	}
	c.m[t.ID] = cachedTimer{t: t, version: version}
}
