// Package storeindex is a slice index that reads the store itself. It is
// for several chime processes sharing one SQLite file on one host, where no
// Redis holds a shared index and each process's in-memory index would only
// know the runs that process planned: every Range is a small indexed query
// of the pending runs due in the slice's window.
//
// Add, Remove and MarkKnown do nothing: the store already holds every
// pending run, and a run leaves the index when its claim moves it out of
// pending. Every slice is always known. This is the index that reads the
// store of index.Index's contract, and it passes internal/coord/index/indextest as one
// (its tests give the suite the store as the Source).
package storeindex

import (
	"context"
	"fmt"
	"time"

	"github.com/chimehq/chime/internal/coord/index"
	"github.com/chimehq/chime/model"
)

// Store is what the index reads of the store: the due runs of a slice
// (store.Store implements it).
type Store interface {
	DueRuns(ctx context.Context, from time.Time, to time.Time, buckets int, in ...int) ([]*model.Run, error)
}

// Index is a slice index over a store.
type Index struct {
	st      Store
	buckets int
}

// New returns an index over st with the given number of buckets.
func New(st Store, buckets int) *Index {
	if buckets < 1 {
		buckets = 1
	}
	return &Index{st: st, buckets: buckets}
}

// Add does nothing: the store holds the runs.
func (x *Index) Add(context.Context, ...index.Entry) error { return nil }

// Remove does nothing: claimed runs are no longer pending.
func (x *Index) Remove(context.Context, index.Slice, ...string) error { return nil }

// MarkKnown does nothing: every slice is known.
func (x *Index) MarkKnown(context.Context, index.Slice) error { return nil }

// Buckets is the number of buckets per minute.
func (x *Index) Buckets() int { return x.buckets }

// Range returns the pending runs of slice s due before until.
func (x *Index) Range(ctx context.Context, s index.Slice, until time.Time) ([]index.Entry, bool, error) {
	end := s.End()
	if until.Before(end) {
		end = until
	}
	runs, err := x.st.DueRuns(ctx, s.Start(), end, x.buckets, s.Bucket)
	if err != nil {
		return nil, false, fmt.Errorf("store index: range slice %s: %w", s, err)
	}
	out := make([]index.Entry, len(runs))
	for i, r := range runs {
		out[i] = index.EntryOf(r)
	}
	return out, true, nil
}
