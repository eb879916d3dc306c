package bench

import (
	"context"
	"errors"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
)

// Waiting for a condition or a time, until the context ends.

// waitFor polls cond every 50ms until it holds, ctx ends or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) || clock.Sleep(ctx, nil, 50*time.Millisecond) != nil {
			return false
		}
	}
	return true
}

var errInterrupted = errors.New("bench: interrupted")
