package store

import (
	"context"
	"sync"

	"github.com/chimehq/chime/model"
)

// DependentRuns collects the runs that a store's FinishRuns or SetRunStatus
// made after the ends they recorded (model.Timer.After), for
// the caller to put in the slice index at once. See WithDependentRuns.
type DependentRuns struct {
	mu   sync.Mutex
	runs []*model.Run
}

// Take returns the runs collected so far and forgets them.
func (d *DependentRuns) Take() []*model.Run {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.runs
	d.runs = nil
	return out
}

// Add appends runs that a committed write made (for stores).
func (d *DependentRuns) Add(runs ...*model.Run) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.runs = append(d.runs, runs...)
}

type dependentRunsKey struct{}

// WithDependentRuns returns a context that makes the store's result writes
// add the downstream runs they made, once committed, to d. Without it the
// runs are made all the same; they wait for a trigger's next read of the
// store (every few seconds) instead of being indexed at once.
func WithDependentRuns(ctx context.Context, d *DependentRuns) context.Context {
	return context.WithValue(ctx, dependentRunsKey{}, d)
}

// DependentRunsOf returns the collector of ctx (WithDependentRuns), or nil.
func DependentRunsOf(ctx context.Context) *DependentRuns {
	d, _ := ctx.Value(dependentRunsKey{}).(*DependentRuns)
	return d
}
