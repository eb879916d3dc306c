package redislock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chimehq/chime/internal/base/testenv"
	"github.com/chimehq/chime/internal/coord/lock"
	"github.com/chimehq/chime/internal/coord/lock/locktest"
	"github.com/chimehq/chime/internal/coord/lock/redislock"
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
