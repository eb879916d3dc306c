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
// A lock released with UnlockNote leaves its note in the key <lock
// key>:note (or {<lock key>}:note when the lock key has no hash tag, so
// that both keys live in one slot of a Redis Cluster) for the next taking
// to read (lock.Handover). Every other lock taken here reports the zero
// lock.Release, unless the server has run for longer than the lock's TTL
// (and a margin) and was never promoted from a replica (INFO): then the
// lock expired, was released or was never held (lock.Release.Ended). A
// restart (keys written after the last snapshot, or all of them without
// persistence) or a failover to a replica that had not seen the lock loses
// a lock while its holder still believes it holds it. A key deleted by
// hand (DEL, FLUSHDB) is not detected. One Redis server is assumed, as
// chime connects: with Redis Cluster, INFO would tell of one node only.
// The same failover could bring back a note that a taking had removed;
// notes are kept briefly (the keep the caller gives) to narrow that.
//
// Leases are measured by the Redis server's clock and rounded up to whole
// milliseconds. As with any leased lock, a node that pauses longer than its
// lease (GC, SIGSTOP, a slow network) may still believe it holds a lock that
// another node has taken: locks spread work, the store's claim guards it.
package redislock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chimehq/chime/lock"
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

// lockScript takes a lock that is free, or extends it for its holder, and
// returns the note a free lock's last holder left (removing it), when
// this server wrote it: a note carries the run_id of the server that
// stored it (unlockNoteScript), and a server restarted from a snapshot,
// or a replica promoted, has another. Such a note may be older than a
// taking the server lost with the restart (the note was removed by a
// holder that may still be starting runs), so it is not returned.
//
// KEYS[1]: the lock key. KEYS[2]: its note. ARGV[1]: the token. ARGV[2]:
// the TTL in ms. Returns {1 if the token holds the lock now, else 0; 1 if
// it took a free lock, else 0; 1 if a free lock was taken and a note of
// this server was there, else 0; the note, or the empty string}.
var lockScript = redis.NewScript(`
-- KEYS[1] lock key; KEYS[2] note; ARGV[1] token; ARGV[2] ttl ms
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, 0, 0, ''}
end
if cur then
  return {0, 0, 0, ''}
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local stamped = redis.call('GET', KEYS[2])
if not stamped then
  return {1, 1, 0, ''}
end
redis.call('DEL', KEYS[2])
local id, note = string.match(stamped, '^(%w*)|(.*)$')
local run = string.match(redis.call('INFO', 'server'), 'run_id:(%w+)')
if id and run and id == run then
  return {1, 1, 1, note}
end
return {1, 1, 0, ''}
`)

// unlockNoteScript deletes a lock key if it holds the given token and
// leaves its note, stamped with the server's run_id ("<run_id>|<note>",
// see lockScript).
//
// KEYS[1]: the lock key. KEYS[2]: its note. ARGV[1]: the token. ARGV[2]:
// the note. ARGV[3]: how long the note is kept, in ms. Returns 1 if it
// released.
var unlockNoteScript = redis.NewScript(`
-- KEYS[1] lock key; KEYS[2] note; ARGV[1] token; ARGV[2] note; ARGV[3] keep ms
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  local run = string.match(redis.call('INFO', 'server'), 'run_id:(%w+)') or ''
  redis.call('SET', KEYS[2], run .. '|' .. ARGV[2], 'PX', ARGV[3])
  return 1
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

var (
	_ lock.Locker   = (*Locker)(nil)
	_ lock.Handover = (*Locker)(nil)
)

// NewLocker returns a Locker that keeps its locks through client.
func NewLocker(client redis.UniversalClient, opts Options) *Locker {
	return &Locker{c: client, prefix: opts.prefix()}
}

// Key returns the Redis key of lock key.
func (l *Locker) Key(key string) string { return l.prefix + ":lock:" + key }

// TryLock implements lock.Locker: lockScript, without asking the server
// whether the lock may have vanished (TryLockFrom).
func (l *Locker) TryLock(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	held, _, _, err := l.lock(ctx, key, token, ttl)
	return held, err
}

// TryLockFrom implements lock.Handover: one script takes the lock when it
// is free (removing its note), or extends it when token holds it.
func (l *Locker) TryLockFrom(ctx context.Context, key, token string, ttl time.Duration) (bool, lock.Release, error) {
	held, took, rel, err := l.lock(ctx, key, token, ttl)
	if err == nil && took && !rel.Noted {
		rel.Ended = l.steady(ctx, ttl)
	}
	return held, rel, err
}

// lock runs lockScript: whether token holds the lock now, whether it took
// it free, and the note it found.
func (l *Locker) lock(ctx context.Context, key, token string, ttl time.Duration) (held, took bool, rel lock.Release, err error) {
	px, err := ms("lock", key, ttl)
	if err != nil {
		return false, false, rel, err
	}
	k := l.Key(key)
	res, err := lockScript.Run(ctx, l.c, []string{k, noteKey(k)}, token, px).Slice()
	if err != nil {
		return false, false, rel, fmt.Errorf("redislock: lock %q: %w", key, err)
	}
	if len(res) != 4 {
		return false, false, rel, fmt.Errorf("redislock: lock %q: unexpected answer %v", key, res)
	}
	h, _ := res[0].(int64)
	t, _ := res[1].(int64)
	noted, _ := res[2].(int64)
	note, _ := res[3].(string)
	return h == 1, t == 1, lock.Release{Noted: noted == 1, Note: note}, nil
}

// steadyMargin is how much longer than a lock's TTL the server must have
// run for a lock taken without a note to count as lock.Release.Ended:
// more than the holders' margin before their lock's end
// (scheduler.LazyMargin) and the drift of their clocks from the server's
// over one TTL.
const steadyMargin = time.Second

// steady reports, after a taking, whether the server cannot have lost a
// lock of ttl while its holder believed it held it: it has run for longer
// than ttl (and a margin) since it started, and was never promoted from a
// replica (INFO: uptime_in_seconds, second_repl_offset -1). Data is lost
// only by a restart (keys written after the last snapshot, or all of them
// without persistence) or a failover to a replica that had not seen them;
// a lock that vanished that way more than ttl ago ended its holder's lazy
// starts before it. Anything else, an error included, is not steady.
func (l *Locker) steady(ctx context.Context, ttl time.Duration) bool {
	info, err := l.c.Info(ctx, "server", "replication").Result()
	if err != nil {
		return false
	}
	var uptime time.Duration
	promoted := true
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch k {
		case "uptime_in_seconds":
			s, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return false
			}
			uptime = time.Duration(s) * time.Second
		case "second_repl_offset":
			promoted = v != "-1"
		}
	}
	return !promoted && uptime > ttl+steadyMargin
}

// UnlockNote implements lock.Handover.
func (l *Locker) UnlockNote(ctx context.Context, key, token, note string, keep time.Duration) (bool, error) {
	px, err := ms("unlock", key, keep)
	if err != nil {
		return false, err
	}
	k := l.Key(key)
	n, err := unlockNoteScript.Run(ctx, l.c, []string{k, noteKey(k)}, token, note, px).Int()
	if err != nil {
		return false, fmt.Errorf("redislock: unlock %q: %w", key, err)
	}
	return n == 1, nil
}

// noteKey is the note of the lock key k, in k's Redis Cluster slot: k's
// own hash tag when it has one, else k as the note's tag.
func noteKey(k string) string {
	if i := strings.IndexByte(k, '{'); i >= 0 {
		if j := strings.IndexByte(k[i+1:], '}'); j > 0 {
			return k + ":note"
		}
	}
	return "{" + k + "}:note"
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
