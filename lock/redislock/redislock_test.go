package redislock_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chimehq/chime/internal/testenv"
	"github.com/chimehq/chime/lock"
	"github.com/chimehq/chime/lock/locktest"
	"github.com/chimehq/chime/lock/redislock"
)

func TestLocker(t *testing.T) {
	t.Parallel()
	locktest.RunLocker(t, func(t *testing.T) lock.Locker {
		c, prefix := testenv.RedisPrefix(t)
		return redislock.NewLocker(c, redislock.Options{Prefix: prefix})
	})
}

func TestElector(t *testing.T) {
	t.Parallel()
	locktest.RunElector(t, func(t *testing.T) func() lock.Elector {
		c, prefix := testenv.RedisPrefix(t)
		return func() lock.Elector { return redislock.NewElector(c, redislock.Options{Prefix: prefix}) }
	})
}

func TestKeys(t *testing.T) {
	t.Parallel()
	c := redis.NewClient(&redis.Options{})
	defer c.Close()
	tests := []struct{ got, want string }{
		{redislock.NewLocker(c, redislock.Options{}).Key("slice:1:2"), "chime:lock:slice:1:2"},
		{redislock.NewElector(c, redislock.Options{Prefix: "p"}).Key("planner"), "p:leader:{planner}"},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("key = %q, want %q", tc.got, tc.want)
		}
	}
}

func TestLockKeyHasTTL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, prefix := testenv.RedisPrefix(t)
	l := redislock.NewLocker(c, redislock.Options{Prefix: prefix})
	if ok, err := l.TryLock(ctx, "k", "a", 1500*time.Microsecond); err != nil || !ok {
		t.Fatalf("TryLock = %v, %v", ok, err)
	}
	if ok, err := l.TryLock(ctx, "k2", "a", 10*time.Second); err != nil || !ok {
		t.Fatalf("TryLock = %v, %v", ok, err)
	}
	if got := c.Get(ctx, l.Key("k2")).Val(); got != "a" {
		t.Errorf("lock value = %q, want the token", got)
	}
	if pttl := c.PTTL(ctx, l.Key("k2")).Val(); pttl <= 9*time.Second || pttl > 10*time.Second {
		t.Errorf("PTTL = %v, want about 10s", pttl)
	}
}

// TestReleaseEnded: a lock taken free without a note counts as ended only
// once the server has run for longer than its TTL and a margin (a restart
// within the TTL may have lost it while held).
func TestReleaseEnded(t *testing.T) {
	t.Parallel()
	c, prefix := testenv.RedisPrefix(t)
	l := redislock.NewLocker(c, redislock.Options{Prefix: prefix})
	ctx := context.Background()
	ok, rel, err := l.TryLockFrom(ctx, "slice:{1:1}", "a", time.Hour)
	if err != nil || !ok || rel.Ended || rel.Noted {
		t.Fatalf("TryLockFrom with a TTL longer than the server's uptime = %v, %v, %v; want taken, not ended", ok, rel, err)
	}
	if ok, rel, err := l.TryLockFrom(ctx, "slice:{1:1}", "a", time.Hour); err != nil || !ok || rel != (lock.Release{}) {
		t.Fatalf("TryLockFrom by the holder = %v, %v, %v; want taken, the zero Release", ok, rel, err)
	}
	i := 0
	testenv.Eventually(t, 10*time.Second, "a free lock of 1 ms taken as ended", func() (bool, string) {
		i++
		_, rel, err := l.TryLockFrom(ctx, fmt.Sprintf("slice:{2:%d}", i), "a", time.Millisecond)
		return err == nil && rel.Ended, fmt.Sprintf("%v, %v", rel, err)
	})
}

// TestStaleNote: a note that this server did not write (left by an earlier
// run of the server, restored from a snapshot after a restart that lost
// the taking that removed it, or written by an older chime without the
// server's run_id) is not trusted: the taking reads as without a note.
func TestStaleNote(t *testing.T) {
	t.Parallel()
	c, prefix := testenv.RedisPrefix(t)
	l := redislock.NewLocker(c, redislock.Options{Prefix: prefix})
	ctx := context.Background()
	key := "slice:{3:1}"
	if ok, err := l.TryLock(ctx, key, "a", time.Hour); err != nil || !ok {
		t.Fatalf("TryLock = %v, %v", ok, err)
	}
	if ok, err := l.UnlockNote(ctx, key, "a", "", time.Hour); err != nil || !ok {
		t.Fatalf("UnlockNote = %v, %v", ok, err)
	}
	if ok, rel, err := l.TryLockFrom(ctx, key, "b", time.Hour); err != nil || !ok || !rel.Noted || rel.Note != "" {
		t.Fatalf("TryLockFrom after a clean release = %v, %+v, %v; want taken, noted clean", ok, rel, err)
	}
	for i, stale := range []string{"0123456789abcdef0123456789abcdef01234567|", "", "w1 f2"} {
		k := fmt.Sprintf("slice:{3:%d}", i+2)
		note := l.Key(k) + ":note" // the key is hash-tagged: its note's key
		if !strings.Contains(k, "{") {
			t.Fatalf("test assumes a hash-tagged key, got %q", k)
		}
		if err := c.Set(ctx, note, stale, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
		ok, rel, err := l.TryLockFrom(ctx, k, "b", time.Hour)
		if err != nil || !ok || rel.Noted {
			t.Errorf("TryLockFrom with the note %q of another server = %v, %+v, %v; want taken without a note", stale, ok, rel, err)
		}
		if n := c.Exists(ctx, note).Val(); n != 0 {
			t.Errorf("note %q left after the taking", stale)
		}
	}
}
