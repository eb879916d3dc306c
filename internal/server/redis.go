package server

import (
	"errors"

	"github.com/chimehq/chime/index"
	"github.com/chimehq/chime/lock"
)

func redisBackends(url string, buckets int) (index.Index, lock.Locker, lock.Elector, []func() error, error) {
	return nil, nil, nil, nil, errors.New("redis backends: not built yet")
}
