package redislock_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chimehq/chime/internal/testenv"
	"github.com/chimehq/chime/lock"
	"github.com/chimehq/chime/lock/locktest"
	"github.com/chimehq/chime/lock/redislock"
)

// newClient connects to the test Redis (or skips) and returns a key prefix
// unique to t whose keys are deleted when t ends.
func newClient(t testing.TB) (redis.UniversalClient, string) {
	t.Helper()
	opt, err := redis.ParseURL(testenv.RedisURL(t))
	if err != nil {
		t.Fatalf("parse %s: %v", testenv.EnvRedis, err)
	}
	c := redis.NewClient(opt)
	var b [6]byte
	rand.Read(b[:])
	prefix := "chimetest-" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx := context.Background()
		iter := c.Scan(ctx, 0, prefix+":*", 1000).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Errorf("clean up %s: %v", prefix, err)
		}
		c.Close()
	})
	return c, prefix
}

func TestLocker(t *testing.T) {
	t.Parallel()
	locktest.RunLocker(t, func(t *testing.T) lock.Locker {
		c, prefix := newClient(t)
		return redislock.NewLocker(c, redislock.Options{Prefix: prefix})
	})
}

func TestElector(t *testing.T) {
	t.Parallel()
	locktest.RunElector(t, func(t *testing.T) func() lock.Elector {
		c, prefix := newClient(t)
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
	c, prefix := newClient(t)
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
