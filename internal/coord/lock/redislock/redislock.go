// Package redislock implements lock.Locker and lock.Elector in Redis, for a
// cluster of nodes.
//
// A lock is the key <prefix>:lock:<key> holding the holder's token, set with
// SET NX PX; extending and releasing go through Lua scripts that compare the
// token first, so a node never extends or deletes a lock another node took
// after its own lease passed. A leader term is the key
// <prefix>:leader:{<service>} holding the leader's node id, with the same
// expiry mechanism.
//
// Leases are measured by the Redis server's clock and rounded up to whole
// milliseconds. As with any leased lock, a node that pauses longer than its
// lease (GC, SIGSTOP, a slow network) may still believe it holds a lock that
// another node has taken: locks spread work, the store's claim guards it.
package redislock

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chimehq/chime/internal/coord/lock"
)

// DefaultPrefix starts every key when Options.Prefix is empty.
const DefaultPrefix = "chime"

// Options configures a Locker or an Elector.
type Options struct {
	// Prefix starts every key; empty means DefaultPrefix.
	Prefix string
}

func (o Options) prefix() string {
	if o.Prefix == "" {
		return DefaultPrefix
	}
	return o.Prefix
}

// ms converts a lease to whole milliseconds, rounding up, and rejects
// leases that are not positive.
func ms(op, key string, d time.Duration) (int64, error) {
	if d <= 0 {
		return 0, fmt.Errorf("redislock: %s %q: lease %v is not positive", op, key, d)
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond), nil
}

// extendScript sets a new expiry on a key if it holds the given value.
//
// KEYS[1]: the lock key. ARGV[1]: the token. ARGV[2]: the new TTL in ms.
// It returns 1 if the key held the token (and was extended), else 0.
var extendScript = redis.NewScript(`
-- KEYS[1] lock key; ARGV[1] token; ARGV[2] ttl ms
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`)

// unlockScript deletes a key if it holds the given value.
//
// KEYS[1]: the lock key. ARGV[1]: the token.
// It returns 1 if the key held the token (and was deleted), else 0.
var unlockScript = redis.NewScript(`
-- KEYS[1] lock key; ARGV[1] token
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`)

// selectScript takes or renews a leader term and returns the leader.
//
// KEYS[1]: the leader key. ARGV[1]: the candidate's node id. ARGV[2]: the
// term in ms.
// If the key is free the candidate takes it; if it holds the candidate its
// term is renewed. It returns the leader's node id.
var selectScript = redis.NewScript(`
-- KEYS[1] leader key; ARGV[1] node id; ARGV[2] hold ms
local cur = redis.call('GET', KEYS[1])
if not cur then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return ARGV[1]
end
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return cur
`)

// Locker is a lock.Locker in Redis. It is safe for concurrent use.
type Locker struct {
	c      redis.UniversalClient
	prefix string
}

var _ lock.Locker = (*Locker)(nil)

// NewLocker returns a Locker that keeps its locks through client.
func NewLocker(client redis.UniversalClient, opts Options) *Locker {
	return &Locker{c: client, prefix: opts.prefix()}
}

// Key returns the Redis key of lock key.
func (l *Locker) Key(key string) string { return l.prefix + ":lock:" + key }

// TryLock implements lock.Locker: SET NX PX, and when the key is taken, a
// compare-and-extend in case token is its holder.
func (l *Locker) TryLock(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	px, err := ms("lock", key, ttl)
	if err != nil {
		return false, err
	}
	k := l.Key(key)
	ok, err := l.c.SetNX(ctx, k, token, time.Duration(px)*time.Millisecond).Result()
	if err != nil {
		return false, fmt.Errorf("redislock: lock %q: %w", key, err)
	}
	if ok {
		return true, nil
	}
	n, err := extendScript.Run(ctx, l.c, []string{k}, token, px).Int()
	if err != nil {
		return false, fmt.Errorf("redislock: lock %q (extend): %w", key, err)
	}
	return n == 1, nil
}

// Extend implements lock.Locker.
func (l *Locker) Extend(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	px, err := ms("extend", key, ttl)
	if err != nil {
		return false, err
	}
	n, err := extendScript.Run(ctx, l.c, []string{l.Key(key)}, token, px).Int()
	if err != nil {
		return false, fmt.Errorf("redislock: extend %q: %w", key, err)
	}
	return n == 1, nil
}

// Unlock implements lock.Locker.
func (l *Locker) Unlock(ctx context.Context, key, token string) (bool, error) {
	n, err := unlockScript.Run(ctx, l.c, []string{l.Key(key)}, token).Int()
	if err != nil {
		return false, fmt.Errorf("redislock: unlock %q: %w", key, err)
	}
	return n == 1, nil
}

// Elector is a lock.Elector in Redis. It is safe for concurrent use.
type Elector struct {
	c      redis.UniversalClient
	prefix string
}

var _ lock.Elector = (*Elector)(nil)

// NewElector returns an Elector that keeps its terms through client.
func NewElector(client redis.UniversalClient, opts Options) *Elector {
	return &Elector{c: client, prefix: opts.prefix()}
}

// Key returns the Redis key of service's leader.
func (e *Elector) Key(service string) string { return e.prefix + ":leader:{" + service + "}" }

// Select implements lock.Elector in one round trip: the script takes the
// key if it is free (SET NX PX), renews it if nodeID holds it, and returns
// the holder.
func (e *Elector) Select(ctx context.Context, service, nodeID string, hold time.Duration) (string, error) {
	px, err := ms("select leader of", service, hold)
	if err != nil {
		return "", err
	}
	if nodeID == "" {
		return "", fmt.Errorf("redislock: select leader of %q: empty node id", service)
	}
	id, err := selectScript.Run(ctx, e.c, []string{e.Key(service)}, nodeID, px).Text()
	if err != nil {
		return "", fmt.Errorf("redislock: select leader of %q: %w", service, err)
	}
	return id, nil
}
