package sim

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/chimehq/chime/internal/coord/index"
	"github.com/chimehq/chime/internal/coord/lock"
	"github.com/chimehq/chime/internal/coord/lock/memlock"
)

// locks is the cluster's shared lock server (the role Redis plays): a
// memlock.Locker that also knows who holds which key, so that a fault can
// evict a held lock as a Redis under maxmemory or a failover would.
type locks struct {
	l    *memlock.Locker
	mu   sync.Mutex
	held map[string]string // key → token, as last granted
}

func newLocks() *locks { return &locks{l: memlock.NewLocker(nil), held: map[string]string{}} }

func (s *locks) granted(key, token string, ok bool) {
	if ok {
		s.mu.Lock()
		s.held[key] = token
		s.mu.Unlock()
	}
}

// evict removes one held lock, chosen by pick among the keys in order, as
// if the server had lost it; it returns the key.
func (s *locks) evict(pick func(n int) int) string {
	s.mu.Lock()
	keys := make([]string, 0, len(s.held))
	for k := range s.held {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if len(keys) == 0 {
		s.mu.Unlock()
		return ""
	}
	k := keys[pick(len(keys))]
	tok := s.held[k]
	delete(s.held, k)
	s.mu.Unlock()
	_, _ = s.l.Unlock(context.Background(), k, tok)
	return k
}

// nodeLocks is one process's client of the lock server.
type nodeLocks struct {
	s  *locks
	io *nodeIO
}

var _ lock.Locker = nodeLocks{}

func (c nodeLocks) TryLock(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	if err := c.io.indexCall(ctx, "TryLock"); err != nil {
		return false, err
	}
	ok, err := c.s.l.TryLock(ctx, key, token, ttl)
	c.s.granted(key, token, ok)
	return ok, err
}

func (c nodeLocks) Extend(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	if err := c.io.indexCall(ctx, "Extend"); err != nil {
		return false, err
	}
	return c.s.l.Extend(ctx, key, token, ttl)
}

func (c nodeLocks) Unlock(ctx context.Context, key, token string) (bool, error) {
	if err := c.io.indexCall(ctx, "Unlock"); err != nil {
		return false, err
	}
	return c.s.l.Unlock(ctx, key, token)
}

// nodeElector is one process's client of the shared election.
type nodeElector struct {
	e  *memlock.Elector
	io *nodeIO
}

func (c nodeElector) Select(ctx context.Context, service, nodeID string, hold time.Duration) (string, error) {
	if err := c.io.indexCall(ctx, "Select"); err != nil {
		return "", err
	}
	return c.e.Select(ctx, service, nodeID, hold)
}

// nodeIndex is one process's client of the shared slice index.
type nodeIndex struct {
	ix interface {
		index.Index
		index.SinceRanger
	}
	io *nodeIO
}

var _ index.SinceRanger = nodeIndex{}

func (c nodeIndex) Add(ctx context.Context, entries ...index.Entry) error {
	if err := c.io.indexCall(ctx, "Add"); err != nil {
		return err
	}
	return c.ix.Add(ctx, entries...)
}

func (c nodeIndex) Range(ctx context.Context, s index.Slice, until time.Time) ([]index.Entry, bool, error) {
	if err := c.io.indexCall(ctx, "Range"); err != nil {
		return nil, false, err
	}
	return c.ix.Range(ctx, s, until)
}

func (c nodeIndex) RangeSince(ctx context.Context, s index.Slice, until time.Time, since index.Mark) ([]index.Entry, index.Mark, bool, error) {
	if err := c.io.indexCall(ctx, "Range"); err != nil {
		return nil, since, false, err
	}
	return c.ix.RangeSince(ctx, s, until, since)
}

func (c nodeIndex) Remove(ctx context.Context, s index.Slice, runIDs ...string) error {
	if err := c.io.indexCall(ctx, "Remove"); err != nil {
		return err
	}
	return c.ix.Remove(ctx, s, runIDs...)
}

func (c nodeIndex) MarkKnown(ctx context.Context, s index.Slice) error {
	if err := c.io.indexCall(ctx, "MarkKnown"); err != nil {
		return err
	}
	return c.ix.MarkKnown(ctx, s)
}

func (c nodeIndex) Buckets() int { return c.ix.Buckets() }
