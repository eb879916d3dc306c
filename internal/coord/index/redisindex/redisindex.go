// Package redisindex implements index.Index in Redis, for a cluster of
// nodes: one sorted set per slice.
//
// # Keys
//
// For slice (minute m, bucket b) and prefix p there are two keys:
//
//	p:slice:{m:b}         ZSET, member = run id, score = DueAt in Unix ms
//	p:slice:{m:b}:timers  HASH, field = run id, value = timer id
//
// The hash tag {m:b} puts both keys of a slice on one Redis Cluster slot, so
// that each slice is read and written atomically by one Lua script, and the
// slices of one minute spread over the cluster.
//
// The ZSET member is the run id alone, so that adding a run again with
// another DueAt updates its score instead of adding a second member. The
// timer id lives in the companion hash, written in the same script; storing
// it in the member ("runID|timerID") was rejected because Remove, which only
// knows run ids, could then not name the member.
//
// A slice is known when its ZSET holds the marker member "~known" with score
// -inf (run ids never contain '~'). Because the marker lives inside the ZSET,
// losing the ZSET (FLUSHDB, a restart without persistence, eviction) loses
// the marker with it, and the slice reads as unknown rather than as empty.
// A run whose timer id is missing from the hash (the hash alone was evicted)
// also makes the slice read as unknown.
//
// Both keys expire Options.TTL after the end of their minute (PEXPIREAT,
// renewed by each Add), so the index needs no cleanup. Adding to a slice
// whose expiry has passed stores nothing: it reads as unknown, which sends
// the caller to the store, as it must for so old a slice.
//
// DueAt is stored with millisecond precision: Range returns it truncated
// to the millisecond, and Range's until bound is compared at that
// precision (an entry is returned if its truncated DueAt is before until
// rounded up to the next millisecond).
package redisindex

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chimehq/chime/internal/coord/index"
)

// Defaults for Options.
const (
	DefaultPrefix = "chime"
	DefaultTTL    = 10 * time.Minute
)

// Marker is the ZSET member that marks a slice known. Run ids must not
// equal it.
const Marker = "~known"

// maxBatch bounds the entries sent to Redis in one script call.
const maxBatch = 1000

// Options configures an Index.
type Options struct {
	// Prefix starts every key; empty means DefaultPrefix. Nodes of one
	// cluster must use the same prefix and the same Buckets.
	Prefix string
	// Buckets is the number of buckets per minute; values below 1 mean 1.
	Buckets int
	// TTL is how long after the end of its minute a slice's keys live;
	// zero means DefaultTTL. It should exceed the time within which the
	// scheduler and the sweeper look at a past slice.
	TTL time.Duration
}

// Index is a slice index in Redis. It is safe for concurrent use.
type Index struct {
	c       redis.UniversalClient
	prefix  string
	buckets int
	ttl     time.Duration
}

var _ index.Index = (*Index)(nil)

// New returns an Index that stores slices through client, which may be a
// single-node, sentinel or cluster client.
func New(client redis.UniversalClient, opts Options) *Index {
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if opts.Buckets < 1 {
		opts.Buckets = 1
	}
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	return &Index{c: client, prefix: opts.Prefix, buckets: opts.Buckets, ttl: opts.TTL}
}

// Buckets implements index.Index.
func (x *Index) Buckets() int { return x.buckets }

// Key returns the ZSET key of slice s. The timer-id hash is Key(s)+":timers".
func (x *Index) Key(s index.Slice) string {
	return fmt.Sprintf("%s:slice:{%d:%d}", x.prefix, s.Minute, s.Bucket)
}

func (x *Index) keys(s index.Slice) []string {
	k := x.Key(s)
	return []string{k, k + ":timers"}
}

func (x *Index) expireAt(s index.Slice) int64 { return s.End().Add(x.ttl).UnixMilli() }

// addScript adds runs to one slice, marks it known and sets its expiry.
//
// KEYS[1]: the slice's ZSET; KEYS[2]: the slice's timer-id HASH.
// ARGV[1]: Unix ms at which both keys expire (PEXPIREAT).
// ARGV[2]: the known-marker member.
// ARGV[3], ARGV[4], ARGV[5], ...: triples of score (DueAt in Unix ms), run
// id, timer id; there may be none (MarkKnown).
var addScript = redis.NewScript(`
-- KEYS[1] slice ZSET, KEYS[2] timer-id HASH
-- ARGV[1] expire-at ms, ARGV[2] marker, ARGV[3..] (score, run id, timer id) triples
for i = 3, #ARGV, 3 do
  redis.call('ZADD', KEYS[1], ARGV[i], ARGV[i+1])
  redis.call('HSET', KEYS[2], ARGV[i+1], ARGV[i+2])
end
redis.call('ZADD', KEYS[1], '-inf', ARGV[2])
redis.call('PEXPIREAT', KEYS[1], ARGV[1])
redis.call('PEXPIREAT', KEYS[2], ARGV[1])
return 1
`)

// rangeScript reads the runs of one slice due before a bound.
//
// KEYS[1]: the slice's ZSET; KEYS[2]: the slice's timer-id HASH.
// ARGV[1]: the known-marker member; ARGV[2]: the exclusive upper bound of
// the scores, as "(<ms>".
// It returns {0} when the slice is unknown (no marker, or a run without its
// timer id), else {1, run id, score, timer id, run id, ...} by score.
var rangeScript = redis.NewScript(`
-- KEYS[1] slice ZSET, KEYS[2] timer-id HASH
-- ARGV[1] marker, ARGV[2] exclusive max score "(ms"
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return {0} end
local r = redis.call('ZRANGEBYSCORE', KEYS[1], '(-inf', ARGV[2], 'WITHSCORES')
local out = {1}
local n = #r / 2
local i = 1
while i <= n do
  local j = math.min(i + 499, n)
  local ids = {}
  for k = i, j do ids[#ids+1] = r[2*k-1] end
  local tids = redis.call('HMGET', KEYS[2], unpack(ids))
  for k = 1, #ids do
    if not tids[k] then return {0} end
    out[#out+1] = ids[k]
    out[#out+1] = r[2*(i+k-1)]
    out[#out+1] = tids[k]
  end
  i = j + 1
end
return out
`)

// Add implements index.Index. It writes every slice in one round trip: one
// script call per slice (per 1000 entries), pipelined. A run id that is
// empty or equals Marker is rejected.
func (x *Index) Add(ctx context.Context, entries ...index.Entry) error {
	if len(entries) == 0 {
		return nil
	}
	type batch struct {
		s    index.Slice
		args []any
	}
	var batches []*batch
	open := make(map[index.Slice]*batch)
	for _, e := range entries {
		if e.RunID == "" || e.RunID == Marker {
			return fmt.Errorf("redisindex: add run %q of timer %q: invalid run id", e.RunID, e.TimerID)
		}
		s := index.SliceOf(e.TimerID, e.DueAt, x.buckets)
		b := open[s]
		if b == nil || len(b.args) >= 2+3*maxBatch {
			b = &batch{s: s, args: []any{x.expireAt(s), Marker}}
			open[s] = b
			batches = append(batches, b)
		}
		b.args = append(b.args, e.DueAt.UnixMilli(), e.RunID, e.TimerID)
	}
	run := func(sha bool) ([]redis.Cmder, error) {
		return x.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, b := range batches {
				if sha {
					addScript.EvalSha(ctx, p, x.keys(b.s), b.args...)
				} else {
					addScript.Eval(ctx, p, x.keys(b.s), b.args...)
				}
			}
			return nil
		})
	}
	_, err := run(true)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		// The script cache is empty (first use, restart, SCRIPT FLUSH):
		// send the bodies. Adding again is idempotent.
		_, err = run(false)
	}
	if err != nil {
		return fmt.Errorf("redisindex: add %d entries to %d slices: %w", len(entries), len(batches), err)
	}
	return nil
}

// Range implements index.Index.
func (x *Index) Range(ctx context.Context, s index.Slice, until time.Time) ([]index.Entry, bool, error) {
	ms := until.UnixMilli()
	if time.UnixMilli(ms).Before(until) {
		ms++ // until has a sub-millisecond part: round up
	}
	res, err := rangeScript.Run(ctx, x.c, x.keys(s), Marker, "("+strconv.FormatInt(ms, 10)).Slice()
	if err != nil {
		return nil, false, fmt.Errorf("redisindex: range slice %v: %w", s, err)
	}
	if len(res) == 0 || (len(res)-1)%3 != 0 {
		return nil, false, fmt.Errorf("redisindex: range slice %v: malformed reply of %d values", s, len(res))
	}
	if known, _ := res[0].(int64); known != 1 {
		return nil, false, nil
	}
	var out []index.Entry
	if n := (len(res) - 1) / 3; n > 0 {
		out = make([]index.Entry, 0, n)
	}
	for i := 1; i < len(res); i += 3 {
		runID, ok1 := res[i].(string)
		score, ok2 := res[i+1].(string)
		timerID, ok3 := res[i+2].(string)
		if !ok1 || !ok2 || !ok3 {
			return nil, false, fmt.Errorf("redisindex: range slice %v: malformed reply at %d", s, i)
		}
		f, err := strconv.ParseFloat(score, 64)
		if err != nil {
			return nil, false, fmt.Errorf("redisindex: range slice %v: score of run %s: %w", s, runID, err)
		}
		out = append(out, index.Entry{RunID: runID, TimerID: timerID, DueAt: time.UnixMilli(int64(f))})
	}
	return out, true, nil
}

// Remove implements index.Index. The marker cannot be removed this way.
func (x *Index) Remove(ctx context.Context, s index.Slice, runIDs ...string) error {
	members := make([]any, 0, len(runIDs))
	for _, id := range runIDs {
		if id != Marker {
			members = append(members, id)
		}
	}
	if len(members) == 0 {
		return nil
	}
	keys := x.keys(s)
	// Both keys share a slot, so MULTI works on Redis Cluster too.
	_, err := x.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ZRem(ctx, keys[0], members...)
		p.HDel(ctx, keys[1], stringsOf(members)...)
		return nil
	})
	if err != nil {
		return fmt.Errorf("redisindex: remove %d runs from slice %v: %w", len(members), s, err)
	}
	return nil
}

func stringsOf(a []any) []string {
	s := make([]string, len(a))
	for i, v := range a {
		s[i] = v.(string)
	}
	return s
}

// MarkKnown implements index.Index. Marking a slice whose expiry has passed
// has no effect.
func (x *Index) MarkKnown(ctx context.Context, s index.Slice) error {
	if err := addScript.Run(ctx, x.c, x.keys(s), x.expireAt(s), Marker).Err(); err != nil {
		return fmt.Errorf("redisindex: mark slice %v known: %w", s, err)
	}
	return nil
}
