package server

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chimehq/chime/index"
	"github.com/chimehq/chime/index/redisindex"
	"github.com/chimehq/chime/lock"
	"github.com/chimehq/chime/lock/redislock"
)

// redisBackends connects the cluster's slice index, locks and election to
// the Redis at url. Every node of a cluster must use the same buckets.
func redisBackends(ctx context.Context, url string, buckets int) (index.Index, lock.Locker, lock.Elector, func() error, error) {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("redis url: %w", err)
	}
	opts.DialTimeout = 2 * time.Second
	opts.ReadTimeout = 2 * time.Second
	opts.WriteTimeout = 2 * time.Second
	client := redis.NewClient(opts)
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := client.Ping(pctx).Err(); err != nil {
		client.Close()
		return nil, nil, nil, nil, fmt.Errorf("redis %s: %w", redact(url), err)
	}
	if buckets <= 0 {
		buckets = 16
	}
	return redisindex.New(client, redisindex.Options{Buckets: buckets}),
		redislock.NewLocker(client, redislock.Options{}),
		redislock.NewElector(client, redislock.Options{}),
		client.Close, nil
}
