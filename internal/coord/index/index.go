// Package index defines the slice index: pending runs grouped by slice, a
// (minute, bucket) pair, so that the node that holds a slice's lock can read
// the runs it must dispatch without a database query. Package internal/coord/index/memindex
// implements it in process; internal/coord/index/redisindex in Redis, one ZSET per slice.
//
// The index is a cache of the store's pending runs, and its callers keep it
// one: they Add a run once the store holds it as pending (planned, retried,
// requeued, rebuilt from the store), and Remove a run once it has left the
// slice in the store (claimed, by this node or another, or deleted). A
// slice that the index does not know (Redis was flushed, the process
// restarted) reads as unknown, and the caller rebuilds it from the store's
// pending runs.
//
// Because callers keep that order, an index may read the store instead of
// holding entries: internal/coord/index/storeindex does, for processes that share one
// SQLite file and no Redis. Such an index may do nothing on Add, Remove and
// MarkKnown, reads every slice as known, and answers Range with the store's
// pending runs of the slice. Package internal/coord/index/indextest checks both kinds
// against the same suite (an index that reads the store comes with its
// indextest.Source).
package index

import (
	"context"
	"fmt"
	"time"

	"github.com/chimehq/chime/model"
)

// Slice is the unit of work a node locks: the runs due in one minute whose
// timers hash to one bucket.
type Slice struct {
	Minute int64 // Unix minute: due.Unix() / 60
	Bucket int
}

// String is the slice's name, used in lock keys and in the node listing.
func (s Slice) String() string { return fmt.Sprintf("%d:%d", s.Minute, s.Bucket) }

// Start is the first instant of the slice's minute.
func (s Slice) Start() time.Time { return time.Unix(s.Minute*60, 0) }

// End is the first instant after the slice's minute.
func (s Slice) End() time.Time { return time.Unix((s.Minute+1)*60, 0) }

// BucketOf returns the bucket of a timer among n buckets.
func BucketOf(timerID string, n int) int {
	if n <= 1 {
		return 0
	}
	return int(model.TimerHash(timerID) % uint32(n))
}

// SliceOf returns the slice that holds a run of timerID due at due.
func SliceOf(timerID string, due time.Time, buckets int) Slice {
	return Slice{Minute: floorDiv(due.Unix(), 60), Bucket: BucketOf(timerID, buckets)}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// Entry is one pending run in the index.
type Entry struct {
	RunID   string
	TimerID string
	DueAt   time.Time // millisecond precision in Redis
}

// EntryOf returns the entry of run r.
func EntryOf(r *model.Run) Entry { return Entry{RunID: r.ID, TimerID: r.TimerID, DueAt: r.DueAt} }

// Index is the slice index. Implementations are safe for concurrent use.
type Index interface {
	// Add puts entries into their slices (SliceOf with the index's bucket
	// count) and marks those slices known. Adding an entry twice keeps one,
	// with the later DueAt: the DueAt of the Add that came last, whether
	// it is earlier or later in time. Dedupe is per slice: an entry re-added
	// with a DueAt in another minute (or, for another timer, in another
	// bucket) lands in the new slice, and the caller removes it from the
	// old one. An index that holds only what is due soon (memindex with a
	// Horizon) may instead drop the entries of a slice that starts far
	// ahead and leave that slice unknown, until MarkKnown.
	Add(ctx context.Context, entries ...Entry) error
	// Range returns the entries of slice s with DueAt < until, ordered by
	// DueAt, then run id. known is false when the index holds no record of
	// s: it was never marked, or was lost; the caller must then read the
	// store. An index that reads the store always knows.
	Range(ctx context.Context, s Slice, until time.Time) (entries []Entry, known bool, err error)
	// Remove deletes run ids from slice s.
	Remove(ctx context.Context, s Slice, runIDs ...string) error
	// MarkKnown records that s is complete in the index (after a rebuild
	// from the store), even if it holds no entries.
	MarkKnown(ctx context.Context, s Slice) error
	// Buckets is the number of buckets per minute.
	Buckets() int
}

// Mark is where a reader of a slice is: what a RangeSince returned up to.
// Its fields belong to the index that made it; the zero Mark reads the
// whole slice.
type Mark struct {
	Seq   uint64 // the index's count of adds at the read
	Until int64  // the read's until, in Unix nanoseconds
}

// SinceRanger is implemented by an index that can leave out of a read what
// the reader's previous read returned. The trigger polls each slice it
// holds every 200 ms for its next seconds: with Range, each run came back
// a dozen times before its claim, and each time went through the
// trigger's dedupe.
type SinceRanger interface {
	// RangeSince returns, as Range does, the entries of s with DueAt <
	// until, except those that the RangeSince which returned since
	// returned too and that are unchanged since: each entry added (or
	// added again with another DueAt) after that read, or due at or after
	// its until, is returned. next is the mark of this read. A zero since
	// reads as Range.
	RangeSince(ctx context.Context, s Slice, until time.Time, since Mark) (entries []Entry, next Mark, known bool, err error)
}
