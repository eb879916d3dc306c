package redisindex_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chimehq/chime/internal/base/testenv"
	"github.com/chimehq/chime/internal/coord/index"
	"github.com/chimehq/chime/internal/coord/index/indextest"
	"github.com/chimehq/chime/internal/coord/index/redisindex"
)

// deleteKeys deletes the keys matching pattern and returns how many.
func deleteKeys(t testing.TB, c redis.UniversalClient, pattern string) int {
	t.Helper()
	n, err := testenv.DeleteRedisKeys(c, pattern)
	if err != nil {
		t.Error(err)
	}
	return n
}

// open is the suite's constructor: an index on a key prefix of its own.
func open(tb testing.TB, buckets int) (index.Index, indextest.Source) {
	c, prefix := testenv.RedisPrefix(tb)
	return redisindex.New(c, redisindex.Options{Prefix: prefix, Buckets: buckets}), nil
}

func TestSuite(t *testing.T) {
	t.Parallel()
	indextest.Run(t, open)
}

// BenchmarkIndex runs the benchmarks shared by every index.
func BenchmarkIndex(b *testing.B) { indextest.Bench(b, open) }

func TestKeysAndDefaults(t *testing.T) {
	t.Parallel()
	x := redisindex.New(redis.NewClient(&redis.Options{}), redisindex.Options{})
	if got, want := x.Key(index.Slice{Minute: 29000000, Bucket: 3}), "chime:slice:{29000000:3}"; got != want {
		t.Errorf("Key = %q, want %q", got, want)
	}
	if x.Buckets() != 1 {
		t.Errorf("Buckets = %d, want 1", x.Buckets())
	}
}

func TestLostSliceReadsUnknown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name    string
		pattern func(x *redisindex.Index, prefix string, s index.Slice) string
	}{
		{"flushed", func(_ *redisindex.Index, prefix string, _ index.Slice) string { return prefix + ":slice:*" }},
		{"zset lost", func(x *redisindex.Index, _ string, s index.Slice) string { return escape(x.Key(s)) }},
		{"timer ids lost", func(x *redisindex.Index, _ string, s index.Slice) string { return escape(x.Key(s)) + ":timers" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, prefix := testenv.RedisPrefix(t)
			x := redisindex.New(c, redisindex.Options{Prefix: prefix, Buckets: 2})
			due := time.Now().Truncate(time.Minute).Add(time.Minute)
			e := index.Entry{RunID: "r1", TimerID: "t1", DueAt: due}
			if err := x.Add(ctx, e); err != nil {
				t.Fatal(err)
			}
			s := index.SliceOf("t1", due, 2)
			if got, known, err := x.Range(ctx, s, s.End()); err != nil || !known || len(got) != 1 {
				t.Fatalf("Range before loss = %v, %v, %v", got, known, err)
			}
			if n := deleteKeys(t, c, tc.pattern(x, prefix, s)); n == 0 {
				t.Fatal("no key deleted")
			}
			got, known, err := x.Range(ctx, s, s.End())
			if err != nil || known || len(got) != 0 {
				t.Fatalf("Range after loss = %v, known %v, %v; want unknown", got, known, err)
			}
			// Rebuilding from the store makes it known again.
			if err := x.MarkKnown(ctx, s); err != nil {
				t.Fatal(err)
			}
			if err := x.Add(ctx, e); err != nil {
				t.Fatal(err)
			}
			if got, known, err := x.Range(ctx, s, s.End()); err != nil || !known || len(got) != 1 {
				t.Fatalf("Range after rebuild = %v, %v, %v", got, known, err)
			}
		})
	}
}

// escape quotes the glob characters of a key for SCAN MATCH.
func escape(key string) string {
	return strings.NewReplacer(`*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`).Replace(key)
}

func TestSlicesExpire(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, prefix := testenv.RedisPrefix(t)
	// A slice of the previous minute, whose keys expire about 300 ms
	// from now.
	now := time.Now()
	due := now.Truncate(time.Minute).Add(-time.Minute)
	s := index.SliceOf("t", due, 1)
	ttl := now.Add(300 * time.Millisecond).Sub(s.End())
	x := redisindex.New(c, redisindex.Options{Prefix: prefix, TTL: ttl})
	if err := x.Add(ctx, index.Entry{RunID: "r", TimerID: "t", DueAt: due}); err != nil {
		t.Fatal(err)
	}
	if pttl := c.PTTL(ctx, x.Key(s)).Val(); pttl <= 0 || pttl > 300*time.Millisecond {
		t.Fatalf("PTTL = %v, want in (0, 300ms]", pttl)
	}
	if pttl := c.PTTL(ctx, x.Key(s)+":timers").Val(); pttl <= 0 || pttl > 300*time.Millisecond {
		t.Fatalf("PTTL of timers = %v, want in (0, 300ms]", pttl)
	}
	// Redis's own clock expires the keys.
	testenv.Eventually(t, 5*time.Second, "the slice to expire", func() (bool, string) {
		_, known, err := x.Range(ctx, s, s.End())
		if err != nil {
			t.Fatal(err)
		}
		return !known, "still known"
	})
	if n, err := c.Exists(ctx, x.Key(s), x.Key(s)+":timers").Result(); err != nil || n != 0 {
		t.Fatalf("Exists after expiry = %d, %v", n, err)
	}
}

func TestScriptCacheFlushed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, prefix := testenv.RedisPrefix(t)
	x := redisindex.New(c, redisindex.Options{Prefix: prefix})
	due := time.Now().Truncate(time.Minute).Add(time.Minute)
	// SCRIPT FLUSH affects only the script cache, which the other tests
	// reload on NOSCRIPT.
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := x.Add(ctx, index.Entry{RunID: "r", TimerID: "t", DueAt: due}); err != nil {
		t.Fatalf("Add after SCRIPT FLUSH: %v", err)
	}
	s := index.SliceOf("t", due, 1)
	if got, known, err := x.Range(ctx, s, s.End()); err != nil || !known || len(got) != 1 {
		t.Fatalf("Range = %v, %v, %v", got, known, err)
	}
}

func TestLargeSlice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, prefix := testenv.RedisPrefix(t)
	x := redisindex.New(c, redisindex.Options{Prefix: prefix})
	due := time.Now().Truncate(time.Minute).Add(time.Minute)
	const n = 2500 // more than one script call and one HMGET chunk
	es := make([]index.Entry, n)
	for i := range es {
		es[i] = index.Entry{RunID: fmt.Sprintf("r%05d", i), TimerID: "t", DueAt: due.Add(time.Duration(i) * time.Millisecond)}
	}
	if err := x.Add(ctx, es...); err != nil {
		t.Fatal(err)
	}
	s := index.SliceOf("t", due, 1)
	got, known, err := x.Range(ctx, s, s.End())
	if err != nil || !known || len(got) != n {
		t.Fatalf("Range = %d entries, %v, %v; want %d", len(got), known, err, n)
	}
	for i := range got {
		if got[i].RunID != es[i].RunID || !got[i].DueAt.Equal(es[i].DueAt) {
			t.Fatalf("entry %d = %v, want %v", i, got[i], es[i])
		}
	}
}

func TestRejectsMarkerRunID(t *testing.T) {
	t.Parallel()
	x := redisindex.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), redisindex.Options{})
	if err := x.Add(context.Background(), index.Entry{RunID: redisindex.Marker, TimerID: "t", DueAt: time.Now()}); err == nil {
		t.Fatal("Add of the marker as run id succeeded")
	}
}
