// Package memindex implements index.Index in process, for a single node
// (the embedded mode). Nothing survives a restart: after one, every slice
// reads as unknown and the caller rebuilds it from the store.
//
// Each slice keeps a map from run id to its current entry (the dedupe) and a
// slice of entries ordered by DueAt that is kept sorted lazily: entries added
// in due order are appended, others mark the slice for a sort on the next
// Range, and replaced or removed entries are left as tombstones that Range
// skips and that are compacted once they outnumber the live ones.
//
// Memory stays bounded: slices whose minute ended more than Retention ago are
// dropped on the next Add or Range (checked at most once per minute of the
// clock), after which they read as unknown. With a Horizon, the index holds
// only what is due soon: entries of slices that start further ahead are not
// kept, and those slices read as unknown until MarkKnown (the trigger that
// takes such a slice rebuilds it from the store, see index.Index).
//
// DueAt keeps its full precision (the Redis index keeps milliseconds);
// entries with equal DueAt are ordered by run id, as in Redis.
package memindex

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/coord/index"
	"github.com/chimehq/chime/model"
)

// DefaultRetention is how long after its minute ends a slice is kept.
const DefaultRetention = 10 * time.Minute

// DefaultHorizon is the Horizon a chime node gives its index: the slices
// that start within the next minute. The trigger takes a slice 3 s before
// its minute (scheduler.Config.Prefetch) and rebuilds it from the store if
// the index does not know it; a horizon longer than that lead means that
// every entry dropped was in the store well before the rebuild reads it.
const DefaultHorizon = time.Minute

// Options configures an Index.
type Options struct {
	// Buckets is the number of buckets per minute; values below 1 mean 1.
	Buckets int
	// Retention is how long after the end of its minute a slice is kept
	// before it is dropped (and reads as unknown). Zero means
	// DefaultRetention.
	Retention time.Duration
	// Horizon, if positive, is how far ahead the index holds entries. An
	// entry of a slice that starts more than Horizon after the clock's now
	// is dropped, unless the slice is known already (MarkKnown), and the
	// slice is left unknown; entries added to it once it is within the
	// horizon are kept, but it reads as unknown until MarkKnown, since it
	// lacks those dropped. A node's planner materialises the whole
	// look-ahead (minutes) while its trigger reads only the slices it holds
	// (this minute and the next): without a horizon the index holds every
	// planned run (about 200 bytes each), with one only those due soon.
	// The caveat: a slice taken while unknown is read whole from the store
	// once (the trigger's rebuild), instead of the seconds that its
	// rechecks read. Zero: no horizon.
	Horizon time.Duration
	// Clock is what old slices are dropped by; nil means the system clock.
	Clock clock.Clock
}

// Index is an in-process slice index. It is safe for concurrent use.
type Index struct {
	buckets   int
	retention time.Duration
	horizon   time.Duration
	now       func() time.Time

	mu        sync.Mutex
	slices    map[index.Slice]*slice
	lastPrune int64  // the clock's Unix minute at the last prune
	gen       uint64 // numbers Adds, see item
}

var _ index.Index = (*Index)(nil)

// New returns an empty Index with the given number of buckets per minute and
// the default retention.
func New(buckets int) *Index { return NewWithOptions(Options{Buckets: buckets}) }

// NewWithOptions returns an empty Index configured by opts.
func NewWithOptions(opts Options) *Index {
	if opts.Buckets < 1 {
		opts.Buckets = 1
	}
	if opts.Retention <= 0 {
		opts.Retention = DefaultRetention
	}
	return &Index{
		buckets:   opts.Buckets,
		retention: opts.Retention,
		horizon:   opts.Horizon,
		now:       clock.Default(opts.Clock).Now,
		slices:    make(map[index.Slice]*slice),
		lastPrune: -1 << 62,
	}
}

// item is an entry as stored in a slice's ordered list; gen identifies the
// Add that wrote it, so that a replaced entry is recognised as a tombstone.
// DueAt is kept as Unix nanoseconds: 16 bytes less than a time.Time per
// entry, and no pointer for the GC to follow (a node can hold millions).
// The run id is kept as its runKey, without the 32-byte string behind it.
type item struct {
	run     runKey
	timerID string
	due     int64
	gen     uint64 // oddBit set: run is the hash of an id kept in slice.odd
}

// oddBit marks, in item.gen and liveRef.gen, an entry whose run id is not
// of model.RunID's form: its runKey is a hash, and the id is in slice.odd.
// Adds are numbered from 1 and never reach it.
const oddBit = 1 << 63

// runKey is a run id as the index keeps it: for an id of model.RunID's form
// (40 lowercase hex digits), the model.RunIDLen bytes it spells, which
// order as the ids do; for any other id (those of older nodes among them),
// the first model.RunIDLen bytes of its SHA-256 (see oddBit).
type runKey [model.RunIDLen]byte

// keyOf returns id's runKey, and whether id is of model.RunID's form.
func keyOf(id string) (runKey, bool) {
	if k, ok := model.ParseRunID(id); ok {
		return k, true
	}
	sum := sha256.Sum256([]byte(id))
	return runKey(sum[:model.RunIDLen]), false
}

// clampNanos returns t in Unix nanoseconds, clamped to the years
// UnixNano can represent (1678–2262).
func clampNanos(t time.Time) int64 {
	switch {
	case t.Before(minTime):
		return math.MinInt64
	case t.After(maxTime):
		return math.MaxInt64
	}
	return t.UnixNano()
}

var minTime, maxTime = time.Unix(0, math.MinInt64), time.Unix(0, math.MaxInt64)

// runID returns the run id of it.
func (s *slice) runID(it item) string {
	if it.gen&oddBit != 0 {
		return s.odd[it.run]
	}
	return hex.EncodeToString(it.run[:])
}

// entry returns the index.Entry of it, its DueAt in UTC.
func (s *slice) entry(it item) index.Entry {
	return index.Entry{RunID: s.runID(it), TimerID: it.timerID, DueAt: time.Unix(0, it.due).UTC()}
}

// interner hands out one copy of each string; a nil interner returns its
// argument.
type interner map[string]string

func (in interner) of(v string) string {
	if in == nil {
		return v
	}
	if c, ok := in[v]; ok {
		return c
	}
	in[v] = v
	return v
}

// liveRef identifies the live entry of a run in a slice's list.
type liveRef struct {
	gen uint64
	due int64 // DueAt in Unix nanoseconds
}

type slice struct {
	byRun  map[runKey]liveRef // each live entry's gen and due time, by run
	sorted []item             // live entries and tombstones; ordered unless dirty
	dirty  bool
	// clean is, while dirty, how many entries at the front of sorted are
	// in order: those added since are sorted alone and merged in (a
	// planning pass adds runs later than those held, in near order).
	clean int
	stale int // tombstones in sorted
	// trimmed counts the entries dropped from the front of sorted's
	// array since it was made (see trim): the room they took is given
	// back once the live part is small beside it.
	trimmed int
	// known is false for a slice some of whose entries were dropped as
	// beyond the horizon: it reads as unknown until MarkKnown.
	known bool
	// odd holds the run ids that are not of model.RunID's form, by their
	// runKey (tests, mostly); nil until one is added.
	odd map[runKey]string
	// most is the most live entries byRun has held since it was made: a
	// Go map keeps the room of its most entries, so compact makes a new
	// one once it holds less than half of that.
	most int
}

// less orders entries by due time, then run id.
func (s *slice) less(a, b item) int {
	if c := cmp.Compare(a.due, b.due); c != 0 {
		return c
	}
	if (a.gen|b.gen)&oddBit == 0 {
		return bytes.Compare(a.run[:], b.run[:])
	}
	return cmp.Compare(s.runID(a), s.runID(b))
}

func (s *slice) live(it item) bool {
	ref, ok := s.byRun[it.run]
	return ok && ref.gen == it.gen
}

// compact drops tombstones and sorts the list if needed. A slice whose
// runs were mostly removed (dispatched) gives back the room they took: the
// list's array and the map are made again at their live size. A slice is
// kept for Retention after its minute, and every one rebuilt or planned at
// a start held its whole minute (at a million timers, 27,000 runs).
func (s *slice) compact() {
	if s.stale > 0 {
		kept := s.sorted[:0]
		clean := 0
		for i, it := range s.sorted {
			if s.live(it) {
				kept = append(kept, it)
				if i < s.clean {
					clean++
				}
			}
		}
		clear(s.sorted[len(kept):])
		s.sorted, s.clean = kept, clean
		if c := cap(kept); c > 256 && len(kept) < c/4 {
			s.sorted = append(make([]item, 0, 2*len(kept)), kept...)
			s.trimmed = 0
		}
		s.stale = 0
		for k := range s.odd {
			if _, ok := s.byRun[k]; !ok {
				delete(s.odd, k)
			}
		}
		s.shrinkMap()
	}
	s.sort()
}

// shrinkMap makes byRun again at its live size once it holds less than
// half of the most it held (a Go map keeps the room of its most entries).
func (s *slice) shrinkMap() {
	if s.most > 256 && len(s.byRun) < s.most/2 {
		m := make(map[runKey]liveRef, len(s.byRun))
		for k, v := range s.byRun {
			m[k] = v
		}
		s.byRun, s.most = m, len(m)
	}
}

// sort orders the list if it is dirty: the entries added since it was in
// order are sorted alone, then merged with those before them, which is a
// copy of nothing when they all come after (the usual case: a planning
// pass adds the runs of the seconds after those the slice holds).
func (s *slice) sort() {
	if !s.dirty {
		return
	}
	s.dirty = false
	head, tail := s.sorted[:s.clean], s.sorted[s.clean:]
	slices.SortFunc(tail, s.less)
	if len(head) == 0 || len(tail) == 0 || s.less(head[len(head)-1], tail[0]) <= 0 {
		return
	}
	// Merge from the back: the tail's copy and the head, largest first.
	tmp := slices.Clone(tail)
	i, j, k := len(head)-1, len(tmp)-1, len(s.sorted)-1
	for j >= 0 {
		if i >= 0 && s.less(head[i], tmp[j]) > 0 {
			s.sorted[k] = head[i]
			i--
		} else {
			s.sorted[k] = tmp[j]
			j--
		}
		k--
	}
}

// trim drops the first n entries of the list, all tombstones: the runs
// dispatched first are due first. Their room in the array is given back
// (a new array at the live size) once it is three times what is left.
func (s *slice) trim(n int) {
	clear(s.sorted[:n])
	s.sorted = s.sorted[n:]
	s.stale -= n
	s.trimmed += n
	if s.trimmed > 256 && len(s.sorted) < s.trimmed/3 {
		s.sorted = append(make([]item, 0, 2*len(s.sorted)), s.sorted...)
		s.trimmed = 0
	}
	s.shrinkMap()
}

// Add implements index.Index. Entries with an empty RunID are rejected.
func (x *Index) Add(_ context.Context, entries ...index.Entry) error {
	for _, e := range entries {
		if e.RunID == "" {
			return fmt.Errorf("memindex: add entry of timer %q due %v: empty run id", e.TimerID, e.DueAt)
		}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	now := x.pruneLocked()
	var far int64 = math.MaxInt64 // slices starting after this (Unix s) are beyond the horizon
	if x.horizon > 0 {
		far = now.Add(x.horizon).Unix()
	}
	// The entries of one timer share one copy of its id (a planning pass
	// adds each timer's runs together, each read back from the store with
	// its own copy).
	var timerIDs interner
	if len(entries) > 1 {
		timerIDs = make(interner)
	}
	for _, e := range entries {
		e.DueAt = e.DueAt.Round(0) // drop the monotonic reading
		sl := index.SliceOf(e.TimerID, e.DueAt, x.buckets)
		s, ok := x.slices[sl]
		if sl.Minute*60 > far && (!ok || !s.known) {
			// Beyond the horizon: the slice is rebuilt from the store
			// when it is read.
			if !ok {
				x.slices[sl] = &slice{}
			}
			continue
		}
		if !ok {
			s = x.sliceLocked(sl)
		}
		due := clampNanos(e.DueAt)
		k, hexID := keyOf(e.RunID)
		if cur, ok := s.byRun[k]; ok {
			if cur.due == due {
				// The same entry again (a slice reconciled from the store
				// re-adds what the planner added): nothing changes.
				continue
			}
			s.stale++
		}
		x.gen++
		it := item{run: k, timerID: timerIDs.of(e.TimerID), due: due, gen: x.gen}
		if !hexID {
			it.gen |= oddBit
			if s.odd == nil {
				s.odd = make(map[runKey]string)
			}
			s.odd[k] = e.RunID
		}
		if s.byRun == nil {
			s.byRun = make(map[runKey]liveRef)
		}
		s.byRun[k] = liveRef{gen: it.gen, due: due}
		s.most = max(s.most, len(s.byRun))
		if n := len(s.sorted); n > 0 && !s.dirty && s.less(it, s.sorted[n-1]) < 0 {
			s.dirty, s.clean = true, n
		}
		s.sorted = append(s.sorted, it)
		if s.stale > 64 && s.stale > len(s.byRun) {
			s.compact()
		}
	}
	return nil
}

// Range implements index.Index. The returned slice is the caller's.
func (x *Index) Range(ctx context.Context, sl index.Slice, until time.Time) ([]index.Entry, bool, error) {
	entries, _, known, err := x.RangeSince(ctx, sl, until, index.Mark{})
	return entries, known, err
}

var _ index.SinceRanger = (*Index)(nil)

// RangeSince implements index.SinceRanger: an entry's gen numbers the Add
// that wrote it, so the entries added since a read are those whose gen is
// above the count of adds at that read.
func (x *Index) RangeSince(_ context.Context, sl index.Slice, until time.Time, since index.Mark) ([]index.Entry, index.Mark, bool, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.pruneLocked()
	s, ok := x.slices[sl]
	if !ok || !s.known {
		return nil, index.Mark{}, false, nil
	}
	u := clampNanos(until)
	next := index.Mark{Seq: x.gen, Until: u}
	// Only the part read is looked at: the tombstones that Range skips
	// are, nearly all, the runs dispatched (removed) from the front, and
	// those are dropped here. Compacting the whole slice at every read
	// (each poll of the trigger, after each claim) went through a
	// minute's runs to drop the few claimed since the last one.
	s.sort()
	n := sort.Search(len(s.sorted), func(i int) bool { return s.sorted[i].due >= u })
	if n == 0 {
		return nil, next, true, nil
	}
	lead := 0 // tombstones before the first live entry
	if s.stale > 0 {
		for lead < n && !s.live(s.sorted[lead]) {
			lead++
		}
	}
	var out []index.Entry
	if lead < n {
		all := since == (index.Mark{})
		if all {
			out = make([]index.Entry, 0, n-lead)
		}
		for _, it := range s.sorted[lead:n] {
			if !all && it.gen&^oddBit <= since.Seq && it.due < since.Until {
				continue // returned by the read of since, or a tombstone of it
			}
			if s.stale == lead || s.live(it) {
				out = append(out, s.entry(it))
			}
		}
	}
	if lead > 0 {
		s.trim(lead)
	}
	return out, next, true, nil
}

// Remove implements index.Index. Removing from an unknown slice, or a run
// that is not in the slice, is not an error.
func (x *Index) Remove(_ context.Context, sl index.Slice, runIDs ...string) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	s, ok := x.slices[sl]
	if !ok {
		return nil
	}
	for _, id := range runIDs {
		k, _ := keyOf(id)
		if _, ok := s.byRun[k]; ok {
			delete(s.byRun, k)
			s.stale++
		}
	}
	switch {
	case len(s.byRun) == 0 && s.stale > 0:
		// Every run dispatched: the slice keeps only whether it is known.
		s.byRun, s.sorted, s.odd, s.stale, s.dirty, s.clean, s.most, s.trimmed = nil, nil, nil, 0, false, 0, 0, 0
	case s.stale > 64 && s.stale > len(s.byRun):
		s.compact()
	}
	return nil
}

// MarkKnown implements index.Index. A slice older than the retention is
// dropped again on the next prune.
func (x *Index) MarkKnown(_ context.Context, sl index.Slice) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if s, ok := x.slices[sl]; ok {
		s.known = true
		return nil
	}
	x.sliceLocked(sl)
	return nil
}

// Buckets implements index.Index.
func (x *Index) Buckets() int { return x.buckets }

// Len returns the number of slices held, known or not, for tests and
// metrics.
func (x *Index) Len() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.slices)
}

func (x *Index) sliceLocked(sl index.Slice) *slice {
	s, ok := x.slices[sl]
	if !ok {
		s = &slice{byRun: make(map[runKey]liveRef), known: true}
		x.slices[sl] = s
	}
	return s
}

// pruneLocked drops the slices whose minute ended more than the retention
// ago, and returns the clock's now. It scans at most once per minute of the
// clock.
func (x *Index) pruneLocked() time.Time {
	now := x.now()
	minute := now.Unix() / 60
	if minute == x.lastPrune {
		return now
	}
	x.lastPrune = minute
	cutoff := now.Add(-x.retention)
	for sl := range x.slices {
		if sl.End().Before(cutoff) {
			delete(x.slices, sl)
		}
	}
	return now
}
