package bench

import (
	"context"
	"errors"
	"time"
)

// Waiting for a condition or a time, until the context ends.

// waitFor polls cond every 50ms until it holds, ctx ends or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) || sleepCtx(ctx, 50*time.Millisecond) != nil {
			return false
		}
	}
	return true
}

// sleepCtx sleeps d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

var errInterrupted = errors.New("bench: interrupted")
